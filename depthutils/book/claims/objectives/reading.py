"""Chapter 10's grading in words and tables: every measure per objective, the null control, the reading guide
(the rules and the verdict are :mod:`depthutils.book.claims.objectives`'s)."""
from __future__ import annotations

from depthutils.analysis.at_answer import LABELS
from depthutils.book.claims.objectives import (
    CONDITIONS,
    GRADED,
    NOT_RUN,
    PAIRS,
    PREDICTIONS,
    SHORT,
    SHORT_LABELS,
    Condition,
    Grading,
    apart,
    cell,
    grade,
)
from depthutils.ladder.objectives import OBJECTIVE_LABELS
from depthutils.ladder.word_problems import TASKS
from depthutils.measures.curves import OVERLAP_THRESHOLD

__all__ = ["READS", "measures_markdown", "null_sizes", "null_table", "reading", "table"]


def table(g: Grading, task: str, condition: str) -> str:
    """Markdown, one row per measure: each objective's seed mean [95% interval] and, per pair, the difference
    [interval], the seeds above 0 and the grade, under ``condition``."""
    if task not in g.result.tasks():
        return NOT_RUN
    c = g.conditions[(task, condition)]
    if c.why:
        return f"Not tested: {c.why}."
    pairs = [f"{SHORT[a]} − {SHORT[b]}" for a, b in PAIRS]
    lines = ["| measure | " + " | ".join(SHORT[o] for o in OBJECTIVE_LABELS) + " | " + " | ".join(pairs) + " |",
             "|---" * (1 + len(OBJECTIVE_LABELS) + len(PAIRS)) + "|"]
    for m in (*GRADED, "contributions"):
        cmps = [c.contributions[p] if m == "contributions" else c.comparisons[(p, m)] for p in PAIRS]
        means = {cmps[0].a: (cmps[0].mean_a, cmps[0].band_a), cmps[0].b: (cmps[0].mean_b, cmps[0].band_b),
                 cmps[1].b: (cmps[1].mean_b, cmps[1].band_b)}
        cells = [cell(*means[o]) for o in OBJECTIVE_LABELS]
        diffs = [f"{cell(x.diff, (x.lo, x.hi), '+.3f')} · {x.agree}/{x.n_seeds}"
                 + ("" if m == "contributions" else f" · *{grade(x)}*") for x in cmps]
        label = SHORT_LABELS[m] + (" (not graded)" if m == "contributions" else "")
        lines.append(f"| {label} | " + " | ".join(cells + diffs) + " |")
    return "\n".join(lines)


def null_table(g: Grading, task: str, condition: str) -> str:
    """Markdown, one row per graded measure: A and A′ (the null control) with their seed means [95% interval],
    the difference [interval], the seeds above 0, and whether it tells the runs apart."""
    if task not in g.result.tasks():
        return NOT_RUN
    c = g.conditions[(task, condition)]
    if c.why:
        return f"Not tested: {c.why}."
    if not c.null:
        return f"The null control was not run on {TASKS[task].name.upper()}."
    lines = [f"| measure | {SHORT['a']} | A′ | {SHORT['a']} − A′ |", "|---|---|---|---|"]
    for m, x in c.null.items():
        lines.append(f"| {SHORT_LABELS[m]} | {cell(x.mean_a, x.band_a)} | {cell(x.mean_b, x.band_b)} | "
                     f"{cell(x.diff, (x.lo, x.hi), '+.3f')} · {x.agree}/{x.n_seeds} · "
                     f"*{'apart' if apart(x) else 'alike'}* |")
    return "\n".join(lines)


def reading(g: Grading, task: str) -> str:
    """The reading guide's paragraph on ``task``, in words built from the run: what each pair comes out as at
    matched accuracy and at the same step, and which measures point the other way."""
    if task not in g.result.tasks():
        return NOT_RUN
    name = TASKS[task].name.upper()
    parts = []
    for cond, words in CONDITIONS.items():
        c = g.conditions[(task, cond)]
        if c.why:
            parts.append(f"{words.capitalize()}, {name} is not tested: {c.why}.")
            continue
        for pair in PAIRS:
            label = f"{SHORT[pair[0]]} − {SHORT[pair[1]]}"
            grades = {m: grade(c.comparisons[(pair, m)]) for m in GRADED}
            up = [m for m in GRADED if (c.comparisons[(pair, m)].diff or 0) > 0]
            down = [m for m in GRADED if (c.comparisons[(pair, m)].diff or 0) < 0]
            shown = [SHORT_LABELS[m] for m, x in grades.items() if x == "shown"]
            against = [SHORT_LABELS[m] for m, x in grades.items() if x == "not shown"]
            text = (f"{words}, {label} on {name} is *{c.pair(pair)}*: {len(shown)} of {len(GRADED)} measures shown"
                    + (f" ({', '.join(shown)})" if shown else "") + (f", {len(against)} wholly the other way "
                                                                      f"({', '.join(against)})" if against else ""))
            if up and down:
                text += (f"; the measures disagree in direction: {len(up)} put {SHORT[pair[0]]} above, {len(down)} "
                         f"below ({', '.join(SHORT_LABELS[m] for m in down)})")
            parts.append(text[0].upper() + text[1:] + ".")
    null = null_sizes(g.conditions[(task, "matched")])
    if null:
        parts.append(null)
    return " ".join(parts)


def null_sizes(c: Condition) -> str:
    """The null control against the objectives, in words: per measure, the size of A − A′ relative to that of
    A − Q+A, so a reader sees whether two draws of the examples under one objective differ as much as two
    objectives do."""
    if c.why or not c.null:
        return ""
    pair = PAIRS[0]
    sizes = []
    for m in GRADED:
        x, y = c.null[m].diff, c.comparisons[(pair, m)].diff
        if x is not None and y:
            sizes.append(f"{SHORT_LABELS[m]} {abs(x) / abs(y):.2f}")
    text = f"The null control at matched accuracy tells A from A′ apart on {c.null_apart()} of {len(GRADED)} measures"
    if sizes:
        text += (f"; the size of A − A′ over that of A − Q+A, per measure: {', '.join(sizes)} (near 1 or above: two "
                 f"draws of the examples under one objective differ about as much as A and Q+A)")
    return text + "."



#: what each graded measure reads (the chapter's list; the reasons are :data:`PREDICTIONS`)
READS = {
    "later": "chapter 2's future effect with the skip on the positions before the answer position: a second-half "
             "layer's effect on the later layers' updates there, over a first-half layer's",
    "output": "the same skips' effect on the answer's output distribution, second half over first",
    "ed_kl": "P2's effective depth on chapter 3's lens at the answer position, (ED + 1)/L, where the lens first comes "
             "within half the maximum KL of the output",
    "ed_overlap": f"the same where the lens first shares more than {OVERLAP_THRESHOLD} of the output's top 5",
    "depth": "chapter 6's depth score (P1's centre of mass of the later-layer effects) with the skip before the answer "
             "position, normalised by L − 1",
}


def measures_markdown() -> str:
    """The graded measures as a Markdown list: what each reads, and why the hypothesis predicts A > Q+A > LM."""
    return "\n".join(f"- **{LABELS[m]}**: {READS[m]}. *Predicted A > Q+A > LM:* {PREDICTIONS[m]}." for m in GRADED)
