"""Chapter 9's study: cached per model × task, table recomputed from the cached curves."""
from __future__ import annotations

from conftest import build_tiny

from depthutils.analysis.p2_table import reference_facts, reference_table, table_markdown
from depthutils.analysis.study import METRICS, study, tokens_note
from depthutils.core import cache
from depthutils.measures.curves import ed_cos, ed_kl, ed_overlap, ratio


def test_study_caches_per_model_and_task_and_the_table_recomputes(tiny_root, tmp_path):
    a, b = (str(build_tiny(f, tiny_root)) for f in ("llama", "qwen2"))
    tasks = ["arithmetic", "addition"]
    s1 = study([a], tasks, n=3, cache_dir=tmp_path, progress_bar=False)
    assert s1.hits == 0 and len(list(tmp_path.glob("*.npz"))) == 2
    s2 = study([a, b], tasks, n=3, cache_dir=tmp_path, progress_bar=False)
    assert s2.hits == 2 and len(list(tmp_path.glob("*.npz"))) == 4  # only the new model was computed
    # the table, recomputed from the per-layer curves stored in the cache files
    rows = []
    for model in (a, b):
        cells = []
        for metric in METRICS:
            for task in tasks:
                (path,) = [p for p in tmp_path.glob(f"ed-*{model.rsplit('/', 1)[-1]}-{task}-*.npz")]
                r = cache.read(path, path.stem.rsplit("-", 1)[1])
                ed = {"cos": ed_cos, "kl": ed_kl, "overlap": ed_overlap}[metric](
                    {"cos": r.mean_cos, "kl": r.kl, "overlap": r.overlap}[metric])
                cells.append((ed, ratio(ed, len(r.kl)), None))
        rows.append((model, 3, cells))
    assert table_markdown(tasks, rows) == s2.markdown(intervals=False)
    # with intervals: every defined cell carries a bracket that contains its ratio
    table = s2.markdown()
    assert "bootstrap" in table
    for model in (a, b):
        for metric in METRICS:
            for task in tasks:
                _, rt = s2.cell(model, task, metric)
                band = s2.cell_interval(model, task, metric)
                if rt is not None and band is not None:
                    assert band[0] - 1e-12 <= rt <= band[1] + 1e-12
                    assert f"[{band[0]:.2f}–{band[1]:.2f}]" in table


def test_undefined_cells_show_as_a_dash_with_a_footnote():
    table = table_markdown(["gsm8k"], [("m", 4, [(None, None, None), (2, 0.75, (0.5, 0.75)), (3, 1.0, None)])])
    assert "| m | 4 | —¹ | 2 (0.75) [0.50–0.75] | 3 (1.00) |" in table
    assert "¹ undefined" in table
    assert "¹" not in table_markdown(["gsm8k"], [("m", 4, [(1, 0.5, None), (2, 0.75, None), (3, 1.0, None)])])


def test_reference_table_is_p2s():
    t = reference_table()
    assert "| Qwen2.5-32B | 64 | 43 (0.69) | 46 (0.73) | 46 (0.73) |" in t
    assert t.count("\n") == 13


def test_tokens_note_says_whether_the_ladder_varies_depth_alone(tiny_root):
    """Chapter 9's prose glues this phrase: equal on the controlled ladder, unequal once a fine-tune
    joins, unknown for a model without a card."""
    assert tokens_note(["ladder-4", "ladder-8", "ladder-12", "ladder-16"]) == "equal (14.3M each)"
    assert tokens_note(["ladder-8", "ladder-8-cot"]).startswith("unequal (ladder-8 14.3M, ladder-8-cot 17.6M")
    assert tokens_note(["ladder-8", str(build_tiny("llama", tiny_root))]).startswith("unknown")


def test_reference_facts_are_the_band_of_p2s_table():
    """Chapter 9 glues P2's band from the table instead of typing it: per-model medians over the tasks."""
    import pandas as pd

    from depthutils.analysis.p2_table import P2_TASKS, REFERENCE_CSV

    table = pd.read_csv(REFERENCE_CSV)
    for m in METRICS:
        medians = table[[f"{m}_{t}_ratio" for t in P2_TASKS]].median(axis=1)
        f = reference_facts()
        assert (f[f"{m}_lo"], f[f"{m}_hi"]) == (round(medians.min(), 2), round(medians.max(), 2))
    assert 0.7 < f["kl_lo"] < f["kl_hi"] < 1


def test_uncontrolled_points_are_drawn_apart_and_never_joined(tiny_root, tmp_path):
    """Chapter 9's real models: hollow diamonds, one per defined cell, beside the ladder's lines; none without them.
    Two of them, named by long paths, still leave the figure as wide as the column (CI's book once widened it)."""
    from depthutils.book import claims, plotstyle

    a, b, c = (str(build_tiny(f, tiny_root)) for f in ("llama", "qwen2", "gemma3"))
    tasks = ["arithmetic", "addition"]
    ladder = study([a], tasks, n=3, cache_dir=tmp_path, progress_bar=False)
    other = study([b, c], tasks, n=3, cache_dir=tmp_path, progress_bar=False)
    plain = claims.effective_depth.ratio_figure(ladder, [a])
    assert not any(l.get_marker() == "D" for ax in plain.axes for l in ax.lines)
    fig = claims.effective_depth.ratio_figure(ladder, [a], uncontrolled=other)
    for ax, metric in zip(fig.axes, METRICS):
        diamonds = [l for l in ax.lines if l.get_marker() == "D"]
        defined = [(m, t) for m in (b, c) for t in tasks if other.cell(m, t, metric)[1] is not None]
        assert len(diamonds) == len(defined)
        assert all(l.get_linestyle() == "None" and len(l.get_xdata()) == 1 for l in diamonds)
    assert any("uncontrolled" in t.get_text() for legend in fig.legends for t in legend.get_texts())
    assert plotstyle.legibility(fig)["width_in"] <= plotstyle.COLUMN_IN + 0.15
