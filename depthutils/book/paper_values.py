"""P2's published values as the book quotes them, computed from its Table 1 (``shared/reference``, read by
:mod:`depthutils.analysis.study`): the long forms the claim table's "paper vs this run" rows give, and the short
forms of the intro's overview."""
from __future__ import annotations

from depthutils.analysis.p2_table import reference_cells, reference_cot_tolerance, reference_gains
from depthutils.core.numbers import number
from depthutils.measures.effective_depth import METRICS

__all__ = ["p2_cot_short", "p2_difficulty_short", "p2_lens", "p2_lens_short", "p2_scale_short", "p2_values"]


def p2_values(fact: str | dict, models: str) -> str:
    """P2's value of a chapter-9 statistic, per metric, computed from its Table 1 (:func:`reference_gains`);
    ``fact`` a key of it, or ``{label: key}`` for a claim graded on several statistics (each labelled)."""
    groups = []
    for label, key in (fact.items() if isinstance(fact, dict) else [("", fact)]):
        parts = []
        for m in METRICS:
            v = reference_gains(m)[key]
            parts.append(f"{m} " + (", ".join(f"{size} {number(x, '+.2f')}" for size, x in v.items())
                                    if isinstance(v, dict) else number(v, "+.2f")))
        groups.append(f"{label}: {', '.join(parts)}" if label else "; ".join(parts))
    return f"{'; '.join(groups)} (P2's Table 1, {models})"


def p2_lens() -> str:
    """P2's own measurement of the logit-lens claim's statistic: P2's ED_KL and ED_overlap ratios, (ED + 1) / L,
    are the relative depths where the lens KL halves and where the top-5 overlap passes 0.3. Their range over
    every model × task of its Table 1 (:func:`reference_cells`), and, where the lowest cell lies apart from the
    next one, the range without it, naming that cell."""
    parts, models = [], {}
    for metric, name in (("kl", "KL"), ("overlap", "overlap")):
        cells = sorted(reference_cells(metric), key=lambda c: c[2])
        models.update(dict.fromkeys(c[0] for c in cells))
        lo, nxt, hi = cells[0][2], cells[1][2], cells[-1][2]
        text = f"{name} {lo:.2f}–{hi:.2f}"
        if f"{nxt:.2f}" != f"{lo:.2f}":
            text += f" ({nxt:.2f}–{hi:.2f} without its lowest cell, {cells[0][0]} on {cells[0][1]})"
        parts.append(text)
    return (f"{'; '.join(parts)} (P2's measurement of this statistic, its ED ratio, in P2's Table 1: "
            f"{len(models)} Qwen2.5 and R1-Distill models × 3 tasks; P1 gives no number)")


def _per_metric(key: str) -> list[float]:
    """P2's values of a chapter-9 statistic over its three metrics (Table 1)."""
    return [reference_gains(m)[key] for m in METRICS]


def p2_lens_short() -> str:
    """:func:`p2_lens` in a few words: the range of P2's ED_KL and ED_overlap ratios."""
    ratios = {m: [c[2] for c in reference_cells(m)] for m in ("kl", "overlap")}
    return "P2's ED ratio: " + ", ".join(f"{'KL' if m == 'kl' else m} {min(v):.2f}–{max(v):.2f}"
                                         for m, v in ratios.items()) + " (Table 1)"


def p2_scale_short() -> str:
    """The range over metrics of P2's slope of ED against L and of its ratio's spread across sizes."""
    slopes, spreads = _per_metric("scale_ed_slope"), _per_metric("scale_spread")
    return (f"ED slope {min(slopes):.2f}–{max(slopes):.2f}; ratio spread {min(spreads):.2f}–{max(spreads):.2f} "
            "(Table 1)")


def p2_cot_short() -> str:
    """P2's largest rise of the mean ratio from a base model to its long-CoT model."""
    return f"largest rise {reference_cot_tolerance()[0]:+.2f} (Table 1)"


def p2_difficulty_short() -> str:
    """The largest |AIME24 minus HellaSwag and GSM8K| of P2's mean ratio over its metrics."""
    return f"within ±{max(abs(v) for v in _per_metric('hard_gain')):.2f} (Table 1)"
