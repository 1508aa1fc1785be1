"""Every figure of the book is drawn for the column it is shown in: the column's width, no text under the
book's smallest size, no two tick labels of one axis on top of each other, even on a 30-layer model.

The rendered book's own figures are checked again in Chromium (``test_book.py``: each figure's displayed
scale against what :func:`depthutils.book.plotstyle.save` recorded in its PNG)."""
from __future__ import annotations

import types

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from conftest import build_tiny  # noqa: E402
from PIL import Image  # noqa: E402

import depthutils  # noqa: E402
from depthutils.book import claims, plotstyle  # noqa: E402
from depthutils.measures import MEASUREMENTS  # noqa: E402

#: the saved PNG may be a little narrower or wider than the figure where its tight box trims or keeps an edge
WIDTH_SLACK_IN = 0.15


@pytest.fixture(scope="module")
def deep(tiny_root):
    """A random 30-layer model: as many layers as SmolLM2, so per-layer ticks and cells are as crowded."""
    return depthutils.load_model(str(build_tiny("llama", tiny_root, layers=30)), device="cpu", dtype="float32")




def _figure(name: str):
    """Measurement ``name``'s figure, in the module of the claim it is graded for (``claims.<claim>``): that module's
    ``FIGURES[name]``, or its ``figure`` where the module is the measurement's own (``claims.contributions``)."""
    module = getattr(claims, MEASUREMENTS[name].claim, None)
    if not isinstance(module, types.ModuleType):
        return None
    return getattr(module, "FIGURES", {}).get(name) or (module.figure if module.__name__.endswith("." + name) else None)


#: every registered measurement with a figure of its own
FIGURES = [name for name in MEASUREMENTS if _figure(name) is not None]


@pytest.mark.parametrize("name", FIGURES)
def test_a_figure_fits_the_column_and_can_be_read(deep, name, tmp_path):
    """The measurement's figure, drawn from its registered example on a 30-layer model."""
    fig = _figure(name)(MEASUREMENTS[name].example(deep).run())
    seen = plotstyle.legibility(fig)
    png, _ = plotstyle.save(fig, tmp_path, name)
    plt.close(fig)
    assert seen["width_in"] <= plotstyle.COLUMN_IN + WIDTH_SLACK_IN, seen
    assert seen["min_font_pt"] >= plotstyle.MIN_FONT_PT, seen
    assert not seen["overlaps"], seen["overlaps"]
    info = Image.open(png).info  # what the browser test reads back from the page
    assert info["depthutils:overlaps"] == "0" and float(info["depthutils:min_font_pt"]) >= plotstyle.MIN_FONT_PT
    assert Image.open(png).size[0] <= (plotstyle.COLUMN_IN + WIDTH_SLACK_IN) * plotstyle.PNG_DPI


def test_the_check_can_fail():
    fig, ax = plt.subplots(figsize=(11, 3))
    ax.set_xticks(range(30), [str(1000 + i) for i in range(30)], fontsize=8)
    seen = plotstyle.legibility(fig)
    plt.close(fig)
    assert seen["width_in"] > plotstyle.COLUMN_IN + WIDTH_SLACK_IN
    assert seen["min_font_pt"] < plotstyle.MIN_FONT_PT
    fig, ax = plotstyle.subplots(height=3)
    ax.set_xticks(range(60), [str(1000 + i) for i in range(60)])
    assert "1000 | 1001" in plotstyle.legibility(fig)["overlaps"]
    plt.close(fig)


def test_a_colour_scale_is_capped_where_one_cell_would_stretch_it():
    import numpy as np

    data = np.random.default_rng(0).uniform(0, 1, (30, 30))
    data[0, 1] = 60.0
    fig, ax = plotstyle.subplots(height=4)
    plotstyle.heatmap(ax, data, "value", robust=True)
    assert ax.collections[0].norm.vmax == pytest.approx(np.percentile(data, plotstyle.ROBUST_PERCENTILE))
    assert ax.collections[0].norm.vmax < 1
    assert "98th percentile" in fig.axes[-1].get_ylabel()
    plt.close(fig)


def test_a_title_too_long_for_its_place_is_wrapped_not_left_to_widen_the_figure(tmp_path):
    fig, (ax, _, _) = plotstyle.subplots(1, 3, height=3)
    fig.suptitle("hellaswag: P2's three metrics per layer, at relative depth (l + 1) / L, on SmolLM2-135M-Instruct")
    ax.set_title("an axes title much longer than the third of the column it sits on")
    before = plotstyle.legibility(fig)["width_in"]
    plotstyle.save(fig, tmp_path, "long")
    after = plotstyle.legibility(fig)
    plt.close(fig)
    assert before > plotstyle.COLUMN_IN + WIDTH_SLACK_IN >= after["width_in"]
    assert "\n" in fig._suptitle.get_text() and "\n" in ax.get_title()
