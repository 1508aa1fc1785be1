"""Chapter 10's grading in words and tables: every measure per objective, the null control, the reading guide
(the rules and the verdict are :mod:`depthutils.book.claims.objectives`'s)."""
from __future__ import annotations

from depthutils.analysis.at_answer import LABELS
from depthutils.book.claims.objectives import (
    CONDITIONS,
    FALSE_SHOWN_MAX,
    GRADED,
    NOT_RUN,
    OBJECTIVE_TASKS,
    OTHER_TASKS,
    PAIRS,
    PREDICTIONS,
    SHORT,
    SHORT_LABELS,
    SHOWN,
    TIE,
    UNGRADED,
    Condition,
    Grading,
    agreement,
    cell,
    on_premise_tasks,
    seed_band,
)
from depthutils.ladder.objectives import OBJECTIVE_LABELS
from depthutils.ladder.word_problems import TASKS
from depthutils.measures.curves import OVERLAP_THRESHOLD

__all__ = ["READS", "conclusion", "measures_markdown", "null_sizes", "null_table", "reading", "table"]


def table(g: Grading, task: str, condition: str) -> str:
    """Markdown, one row per measure: each objective's seed mean [95% interval over seeds and prompts] and, per
    pair, the difference [its graded band over seeds], the seeds above 0 and the grade, under ``condition``."""
    if task not in g.result.tasks():
        return NOT_RUN
    c = g.conditions[(task, condition)]
    if c.why:
        return f"Not tested: {c.why}."
    pairs = [f"{SHORT[a]} − {SHORT[b]}" for a, b in PAIRS]
    lines = ["| measure | " + " | ".join(SHORT[o] for o in OBJECTIVE_LABELS) + " | " + " | ".join(pairs) + " |",
             "|---" * (1 + len(OBJECTIVE_LABELS) + len(PAIRS)) + "|"]
    for m in SHOWN:
        cmps = [c.comparisons[(p, m)] for p in PAIRS]
        means = {cmps[0].a: (cmps[0].mean_a, cmps[0].band_a), cmps[0].b: (cmps[0].mean_b, cmps[0].band_b),
                 cmps[1].b: (cmps[1].mean_b, cmps[1].band_b)}
        cells = [cell(*means[o]) for o in OBJECTIVE_LABELS]
        diffs = [f"{cell(x.diff, c.band(p, m), '+.3f')} · {agreement(x)}" + (f" · *{c.grade(p, m)}*" if m in GRADED else "")
                 for p, x in zip(PAIRS, cmps)]
        label = SHORT_LABELS[m] + (" (not graded)" if m in UNGRADED else "")
        lines.append(f"| {label} | " + " | ".join(cells + diffs) + " |")
    return "\n".join(lines)


def null_table(g: Grading, task: str, condition: str) -> str:
    """Markdown, one row per measure: A and A′ (the null control) with their seed means [95% interval], the
    difference [its band over seeds], the seeds above 0, and the grade the objectives' rule gives it."""
    if task not in g.result.tasks():
        return NOT_RUN
    c = g.conditions[(task, condition)]
    if c.why:
        return f"Not tested: {c.why}."
    if not c.null:
        return f"The null control was not run on {TASKS[task].name.upper()}."
    lines = [f"| measure | {SHORT['a']} | A′ | {SHORT['a']} − A′ |", "|---|---|---|---|"]
    grades = c.null_grades()
    for m, x in c.null.items():
        lines.append(f"| {SHORT_LABELS[m]}{'' if m in grades else ' (not graded)'} | {cell(x.mean_a, x.band_a)} | "
                     f"{cell(x.mean_b, x.band_b)} | {cell(x.diff, seed_band(x, x), '+.3f')} · {agreement(x)}"
                     + (f" · *{grades[m]}*" if m in grades else "") + " |")
    return "\n".join(lines)


def _direction(x) -> int:
    """+1, −1 or 0: the sign of a difference as printed (within :data:`TIE` of 0 it reads as equal)."""
    return 0 if x.diff is None or abs(x.diff) < TIE else (1 if x.diff > 0 else -1)


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
            grades = {m: c.grade(pair, m) for m in GRADED}
            way = {m: _direction(c.comparisons[(pair, m)]) for m in GRADED}
            up, down = [m for m in GRADED if way[m] > 0], [m for m in GRADED if way[m] < 0]
            equal = [SHORT_LABELS[m] for m in GRADED if way[m] == 0 and c.comparisons[(pair, m)].diff is not None]
            shown = [SHORT_LABELS[m] for m, x in grades.items() if x == "shown"]
            against = [SHORT_LABELS[m] for m, x in grades.items() if x == "not shown"]
            text = (f"{words}, {label} on {name} is *{c.pair(pair)}*: {len(shown)} of {len(GRADED)} measures shown"
                    + (f" ({', '.join(shown)})" if shown else "") + (f", {len(against)} wholly the other way "
                                                                      f"({', '.join(against)})" if against else ""))
            if up and down:
                text += (f"; the measures disagree in direction: {len(up)} put {SHORT[pair[0]]} above, {len(down)} "
                         f"below ({', '.join(SHORT_LABELS[m] for m in down)})")
            if equal:
                text += f"; equal to three decimals: {', '.join(equal)}"
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
    pair, grades = PAIRS[0], c.null_grades()
    sizes = []
    for m in GRADED:
        x, y = c.null[m].diff, c.comparisons[(pair, m)].diff
        if x is not None and y:
            sizes.append(f"{SHORT_LABELS[m]} {abs(x) / abs(y):.2f}")
    false = sum(x in ("shown", "not shown") for x in grades.values())
    text = (f"Graded by the same rule, A − A′ {CONDITIONS[c.name]} comes out shown (either way) on {false} of "
            f"{len(grades)} measures")
    if sizes:
        text += (f"; the size of A − A′ over that of A − Q+A, per measure: {', '.join(sizes)} (near 1 or above: two "
                 f"draws of the examples under one objective differ about as much as A and Q+A)")
    return text + "."


#: what the premise's outcome, where it is not shown, means for the design
DESIGN = {
    "not shown": "At the lengths trained, S5 does not need more layers than C10, so the two tasks cannot stand for "
                 "one that needs depth and one that does not; the design has to change (longer S5 chains, or a "
                 "control the sweep shows is learned with fewer layers) before an objective can be graded.",
    "mixed": "The sweep does not settle whether S5 needs more layers than C10 at the lengths trained (its numbers are "
             "in the premise's section); until it does, the two tasks cannot stand for one that needs depth and one "
             "that does not.",
    "not tested": "The sweep cannot grade it yet.",
}


def conclusion(g: Grading, premise) -> str:
    """The chapter's conclusion in plain words, from the run: the premise, what is graded and how it came out (or
    what the rule alone would say where nothing is graded), the null control beside the objectives, the limits.
    ``premise``: the sweep's :class:`~depthutils.book.grading.Verdict`."""
    graded = premise.outcome == "shown" and on_premise_tasks()
    design = DESIGN[premise.outcome] if premise.outcome != "shown" else f"{OTHER_TASKS[0].upper()}{OTHER_TASKS[1:]}."
    parts = [f"**The premise** is *{premise.outcome}*" + (f" ({premise.value})" if premise.value else "") + "."
             + ("" if graded else f" {design} So no objective is graded: the tables and figures above are these "
                                  "runs' record, not a test of the hypothesis.")]
    for t in OBJECTIVE_TASKS:
        name = TASKS[t].name.upper()
        if t not in g.result.tasks():
            parts.append(f"**{name}**: not run.")
            continue
        m, f = g.conditions[(t, "matched")], g.conditions[(t, "final")]
        say = (f"at matched accuracy *{g.outcome(t, 'matched')}*, at the same step *{g.outcome(t, 'final')}*" if graded
               else f"by the rule alone, it would be *{m.raw_outcome()}* at matched accuracy and *{f.raw_outcome()}* "
                    f"at the same step")
        why = f" (matched: {m.why})" if m.why else ""
        null = null_sizes(m) or null_sizes(f)
        parts.append(f"**{name}**, {len(g.result.seeds(t))} seeds: {say}{why}." + (" " + null if null else ""))
    parts.append(f"**The rule on the null**: it grades {g.false_shown_words()} null comparisons shown, at most "
                 f"{FALSE_SHOWN_MAX:.0%} allowed.")
    cards = g.result.cards.values()

    def span(key):
        values = sorted({c[key] for c in cards})
        return f"{values[0]}" if len(values) == 1 else f"{values[0]}–{values[-1]}"

    parts.append(f"**Limits.** {len(g.result.cards)} runs of {span('layers')} layers trained for {span('steps')} steps on "
                 + " and ".join(sorted({c["task_label"] for c in cards})) + "; a verdict speaks to these models and "
                 "the lengths they learned, one operation is never graded, and the lens's effective depths are shown, "
                 "not graded.")
    return "\n\n".join(parts)


#: what each measure reads (the chapter's list; the reasons are :data:`PREDICTIONS`)
READS = {
    "later": "chapter 2's future effect with the skip on the positions before the answer position: a second-half "
             "layer's effect on the later layers' updates there, over a first-half layer's",
    "output": "the same skips' effect on the answer's output distribution, second half over first",
    "ed_kl": "P2's effective depth on chapter 3's lens at the answer position, (ED + 1)/L, where the lens first comes "
             "within half the maximum KL of the output",
    "ed_overlap": f"the same where the lens first shares more than {OVERLAP_THRESHOLD} of the output's top 5",
    "depth": "chapter 6's depth score (P1's centre of mass of the later-layer effects) with the skip before the answer "
             "position, normalised by L − 1",
    "contributions": "chapter 1's relative contribution ‖Δ_l‖ / ‖h_l‖ at the answer position, second half over "
                     "first (layer 0 left apart)",
}


def measures_markdown() -> str:
    """The measures as a Markdown list: what each graded one reads and why the hypothesis predicts A > Q+A > LM;
    then the ones shown but not graded, and why not."""
    return "\n".join([f"- **{LABELS[m]}**: {READS[m]}. *Predicted A > Q+A > LM:* {PREDICTIONS[m]}." for m in GRADED]
                     + [f"- **{LABELS[m]}** (not graded): {READS[m]}. *No predicted direction:* {UNGRADED[m]}."
                        for m in UNGRADED])
