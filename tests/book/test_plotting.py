"""The figures' own band computation against seaborn's (the token-weighted bootstrap band)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from depthutils.book.legends import below  # noqa: E402
from depthutils.book.plotstyle import BAND, coinciding, lineplot, lines, save  # noqa: E402


def _frame(seed: int = 0) -> pd.DataFrame:
    """Two lines of 7 prompts × 5 layers, with tied values (as a lens overlap has), a NaN and an x with one row."""
    rng = np.random.default_rng(seed)
    rows = []
    for what in ("a", "b"):
        for p in range(7):
            for x in range(5):
                value = 1.0 if x == 4 else round(float(rng.uniform(0, 1)), 1)
                rows.append(dict(x=x / 5, value=value, what=what, prompt=p, tokens=float(rng.integers(3, 40))))
    rows.append(dict(x=1.5, value=0.3, what="a", prompt=0, tokens=5.0))
    rows[3]["value"] = np.nan
    return pd.DataFrame(rows)


def _bands(ax) -> list[np.ndarray]:
    return [np.asarray(c.get_paths()[0].vertices) for c in ax.collections if c.get_paths()]


def test_weighted_bands_are_seaborns():
    df = _frame()
    palette = {"a": "C0", "b": "C1"}
    fig, (ours, theirs) = plt.subplots(1, 2)
    lineplot(ours, df, weighted=True, hue="what", palette=palette, marker="o")
    sns.lineplot(df, x="x", y="value", hue="what", palette=palette, weights="tokens", marker="o", ax=theirs, **BAND)
    got, want = _bands(ours), _bands(theirs)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    for g, w in zip(ours.lines, theirs.lines):
        np.testing.assert_allclose(g.get_xydata(), w.get_xydata(), rtol=1e-12, atol=1e-12)
    plt.close(fig)


def test_coinciding_lines_stay_visible(tmp_path):
    """Two lines drawn on the same points: the later is saved dashed, in the plot and in the legend, whose entry names
    the line it lies on; a third, distinct line is left as it is."""
    df = pd.DataFrame(dict(x=[0, 1, 2] * 3, value=[1.0, 2.0, 3.0] * 2 + [3.0, 1.0, 2.0], what=["a"] * 3 + ["b"] * 3 + ["c"] * 3,
                           prompt=0, tokens=1.0))
    fig, ax = plt.subplots()
    lines(ax, df, palette={"a": "C0", "b": "C1", "c": "C2"})
    below(fig, [ax], ncol=3)
    save(fig, tmp_path, "same")
    drawn = {to_hex(line.get_color()): line for line in ax.get_lines() if len(line.get_xdata()) > 1}
    assert drawn[to_hex("C0")].get_linestyle() == "-" and drawn[to_hex("C2")].get_linestyle() == "-"
    assert drawn[to_hex("C1")].get_linestyle() != "-"
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.texts] == ["a", "b", "c"]  # the text stays: the figure keeps its width
    assert [h.get_linestyle() == "-" for h in legend.legend_handles] == [True, False, True]
    assert coinciding(fig) == []  # once made visible, the pair is left alone
    plt.close(fig)
