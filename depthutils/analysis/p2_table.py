"""P2's Table 1 (``data/reference/p2_effective_depth_table1.csv``): its cells, spreads and gains, which the book's
claims quote beside this run's numbers (:mod:`depthutils.analysis.study` runs the same measure on our models)."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from depthutils.core.errors import DepthError
from depthutils.core.numbers import span
from depthutils.measures.curves import OVERLAP_THRESHOLD
from depthutils.measures.effective_depth import METRICS

#: P2's tasks, in its table's order
P2_TASKS = ("hellaswag", "gsm8k", "aime24")
REFERENCE_CSV = Path(__file__).resolve().parents[2] / "data" / "reference" / "p2_effective_depth_table1.csv"
UNDEFINED = "—"
NO_FIT = "n/a"  # a task none of whose prompts fits the model's context
NOT_P2 = "·"    # a task P2's Table 1 does not have


def slope(x, ys) -> float | np.ndarray:
    """The least-squares slope of ``ys`` against ``x``: ``ys`` one value per ``x`` (a float), or one array of
    draws per ``x`` (an array, one slope per draw; NaN where a draw is NaN at some ``x``)."""
    x = np.asarray(x, float)
    y = np.asarray(ys, float).reshape(len(x), -1)
    b = ((x - x.mean())[:, None] * (y - y.mean(axis=0))).sum(axis=0) / ((x - x.mean()) ** 2).sum()
    return float(b[0]) if np.ndim(ys) == 1 else b


def reference_rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def reference_table(path: Path = REFERENCE_CSV) -> str:
    """P2's published Table 1 as markdown, in the same layout as :meth:`Study.markdown`."""
    rows = [(r["model"], r["layers"], [(int(r[f"{m}_{t}_ed"]), float(r[f"{m}_{t}_ratio"]), None)
                                       for m in METRICS for t in P2_TASKS])
            for r in reference_rows(path)]
    return table_markdown(list(P2_TASKS), rows)


def reference_spread(metric: str, path: Path = REFERENCE_CSV, family: str = "Qwen2.5-{}-Instruct") -> float:
    """P2's own "stable" across scale: the largest minus the smallest mean ``metric`` ratio (over P2's three
    tasks) of one model family across its sizes in Table 1 (default: Qwen2.5-Instruct, 1.5B to 32B, the one
    plain Qwen2.5 family P2 gives at all four sizes). Chapter 9 grades the ladder's spread against it."""
    rows = [r for r in reference_rows(path)
            if any(r["model"] == family.format(size) for size in ("1.5B", "7B", "14B", "32B"))]
    if len(rows) < 2:
        raise DepthError(f"P2's table at {path} has fewer than two sizes of {family.format('*')}.")
    means = [np.mean([float(r[f"{metric}_{t}_ratio"]) for t in P2_TASKS]) for r in rows]
    return round(float(max(means) - min(means)), 3)


def reference_floor_cells(metric: str = "kl", path: Path = REFERENCE_CSV) -> list[tuple[str, str, int]]:
    """The cells of P2's Table 1 whose ``metric`` ED is at layer 1 or below, (model, task, ED): where, on P2's own
    models, the KL curve is halved by the first layer, as on a curve whose maximum sits at ``h_0``."""
    return [(r["model"], t, int(r[f"{metric}_{t}_ed"])) for r in reference_rows(path) for t in P2_TASKS
            if int(r[f"{metric}_{t}_ed"]) <= 1]


def reference_cells(metric: str, path: Path = REFERENCE_CSV) -> list[tuple[str, str, float]]:
    """Every cell of P2's Table 1 for ``metric``: (model, task, ratio), in the table's order."""
    return [(r["model"], t, float(r[f"{metric}_{t}_ratio"])) for r in reference_rows(path) for t in P2_TASKS]


def reference_facts(path: Path = REFERENCE_CSV) -> dict:
    """The band of P2's published ratios, for the reading guide: for each metric, the smallest and the
    largest per-model median ratio over P2's three tasks (``{metric}_lo``, ``{metric}_hi``), the spread and
    the ED slope of :func:`reference_gains` (``{metric}_spread``, ``{metric}_ed_slope``); P2's largest
    base-to-long-CoT rise (:func:`reference_cot_tolerance`: ``cot_rise``, ``cot_rise_metric``,
    ``cot_rise_size``); and P2's overlap threshold (``overlap_threshold``)."""
    rows, out = reference_rows(path), {"overlap_threshold": OVERLAP_THRESHOLD}
    for m in METRICS:
        medians = [float(np.median([float(r[f"{m}_{t}_ratio"]) for t in P2_TASKS])) for r in rows]
        out[f"{m}_lo"], out[f"{m}_hi"] = round(min(medians), 2), round(max(medians), 2)
        gains = reference_gains(m, path)
        out[f"{m}_spread"], out[f"{m}_ed_slope"] = gains["scale_spread"], round(gains["scale_ed_slope"], 2)
    out["cot_rise"], out["cot_rise_metric"], out["cot_rise_size"] = reference_cot_tolerance(path)
    return out


def table_markdown(tasks, rows, level: float | None = None, metrics=METRICS) -> str:
    """A markdown table: ``rows`` of (model, L, [(ED, ratio, interval or None) per metric × task]);
    None is "—" + footnote; ``level`` names the intervals' level in a footnote."""
    out = ["| model | L | " + " | ".join(f"{m} · {t}" if len(metrics) > 1 else t for m in metrics for t in tasks) + " |",
           "|" + "---|" * (2 + len(metrics) * len(tasks))]
    undefined = no_fit = False
    band = lambda iv: "" if iv is None else f" {span(*iv, '.2f', '–')}"
    for name, L, cells in rows:
        undefined |= any(ed is None for ed, _, _ in cells)
        no_fit |= any(ed == NO_FIT for ed, _, _ in cells)
        text = [f"{UNDEFINED}¹" if ed is None else f"{NO_FIT}²" if ed == NO_FIT else NOT_P2 if ed == NOT_P2
                else f"{ed} ({rt:.2f}){band(iv)}"
                for ed, rt, iv in cells]
        out.append(f"| {name} | {L} | " + " | ".join(text) + " |")
    if level is not None:
        out.append(f"\nED (ratio) [interval]: the bracket is the ratio's {100 * level:.0f}% percentile bootstrap "
                   "interval over the task's prompts (resample the prompts, recompute the curve and its ED); "
                   "where ED is undefined in some resamples, the interval is over the others.")
    if undefined:
        out.append("\n¹ undefined: no layer meets the metric's condition (the definitions under Measure), so there is no "
                   "effective depth to report (not a 0).")
    if no_fit:
        out.append("\n² not measured: no prompt of this task fits the model's context (max_tokens), "
                   "and a task prompt is never cut (its answer would be lost).")
    return "\n".join(out)


#: P2's long-CoT models in Table 1 and the base each was distilled from, by size (Qwen2.5-Math at 1.5B and 7B)
REFERENCE_COT = {"1.5B": ("DS-R1-Qwen-1.5B", "Qwen2.5-Math-1.5B"), "7B": ("DS-R1-Qwen-7B", "Qwen2.5-Math-7B"),
                 "14B": ("DS-R1-Qwen-14B", "Qwen2.5-14B"), "32B": ("DS-R1-Qwen-32B", "Qwen2.5-32B")}


def reference_gains(metric: str, path: Path = REFERENCE_CSV, family: str = "Qwen2.5-{}-Instruct") -> dict:
    """P2's own values, from Table 1, of the statistics chapter 9 grades, for ``metric``:
    ``scale_spread`` (:func:`reference_spread`), ``scale_ed_slope`` (over ``family``'s sizes, the
    least-squares slope of the mean ED over P2's tasks against L), ``cot_gain`` (per size of
    :data:`REFERENCE_COT`, the long-CoT model's mean ratio over P2's tasks minus its base's; sizes missing
    from the table are left out) and ``hard_gain`` (over ``family``'s sizes, the mean AIME24 ratio minus the
    mean HellaSwag and GSM8K ratio), rounded to 3 decimals."""
    rows = {r["model"]: r for r in reference_rows(path)}
    mean = lambda r, tasks: float(np.mean([float(r[f"{metric}_{t}_ratio"]) for t in tasks]))  # noqa: E731
    cot = {size: round(mean(rows[c], P2_TASKS) - mean(rows[b], P2_TASKS), 3)
           for size, (c, b) in REFERENCE_COT.items() if c in rows and b in rows}
    ladder = [rows[family.format(s)] for s in ("1.5B", "7B", "14B", "32B") if family.format(s) in rows]
    hard = (round(float(np.mean([mean(r, ["aime24"]) for r in ladder])
                        - np.mean([mean(r, ["hellaswag", "gsm8k"]) for r in ladder])), 3) if ladder else None)
    ed = lambda r: float(np.mean([int(r[f"{metric}_{t}_ed"]) for t in P2_TASKS]))  # noqa: E731
    grows = round(slope([int(r["layers"]) for r in ladder], [ed(r) for r in ladder]), 3) if len(ladder) >= 2 else None
    return {"scale_spread": reference_spread(metric, path, family), "scale_ed_slope": grows, "cot_gain": cot,
            "hard_gain": hard}


def reference_cot_tolerance(path: Path = REFERENCE_CSV) -> tuple[float, str, str]:
    """P2's largest rise of the mean ratio from a base model to its long-CoT model in Table 1, over the pairs
    of :data:`REFERENCE_COT` and the three metrics, all of which P2 reads as “no significant difference”
    (§4.2): ``(rise, metric, size)``, the rise rounded to 3 decimals."""
    rises = [(gain, m, size) for m in METRICS for size, gain in reference_gains(m, path)["cot_gain"].items()]
    return max(rises)


def cot_pairs(path: Path = REFERENCE_CSV) -> list[tuple[str, str]]:
    """P2's base and long-CoT pairs (:data:`REFERENCE_COT`) as hub ids read from its Table 1: (base, CoT), by size."""
    hub = {r["model"]: r["hf_id"] for r in reference_rows(path)}
    return [(hub[base], hub[cot]) for cot, base in REFERENCE_COT.values() if base in hub and cot in hub]
