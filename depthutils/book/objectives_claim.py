"""Chapter 10's claim graded: the authors' hypothesis on each task, at matched accuracy, with the same step beside it.

The hypothesis (P1's authors, in our reading): without the question to model (objective A) a model keeps
building features to its last layers; modelling the question (Q+A), and more so English too (LM), ends that
stage earlier and leaves the last layers to refine the output distribution. So on a task that needs depth, every
graded measure (:data:`GRADED`, each read at the answer-predicting position) should be larger for A than for Q+A,
and for Q+A than for LM (:data:`PREDICTIONS` says why each). The contribution ratio is shown but not graded: a
layer that refines the output writes into the residual as much as one that builds features, so the hypothesis
predicts no direction for it.

**Rules (ours, each stated with its source):**

* A step count counts for a task only where every objective's seed-mean accuracy reaches :func:`floor`:
  chapter 6's floor, or, where that lies too close to chance to tell a model that does the task from one that
  guesses, the accuracy a one-sided binomial test on 100 chains tells from chance at 5%.
* At matched accuracy, each run is read at its first snapshot whose accuracy on the hardest trained step count
  reaches the level every run of the task reaches (:meth:`ObjectivesResult.reachable`). Where that level is below
  the floor (some run never learns the hardest count), the match is on the hardest trained count where it is not.
  A condition is not tested unless some chain of :data:`MIN_COMPOSED` or more operations counts: one operation is
  a lookup, with nothing to compose, so it cannot speak to depth.
* A comparison (one measure, one pair of objectives) is *shown* when its interval over seeds and prompts lies
  wholly above 0 **and** every seed's own difference is above 0; *not shown* when the interval lies wholly below
  0; *mixed* otherwise. Under a null with no difference, every one of ``n`` seeds agrees in the predicted
  direction with chance ``2^-n`` (1/32 for five).
* A pair of objectives is shown when at least three of its five measures are shown and none is not shown, not
  shown when at least three are not shown and none is shown, mixed otherwise (not tested with fewer than three
  tested). The claim on a task is shown when both pairs are, not shown when both are not, mixed otherwise.
"""
from __future__ import annotations

import math
from statistics import NormalDist
from dataclasses import dataclass, field

from depthutils.analysis.at_answer import LABELS
from depthutils.analysis.objectives import Comparison, ObjectivesResult
from depthutils.book.claim_table import ACCURACY_FLOOR, CLAIMS
from depthutils.book.grading import Verdict, _verdict
from depthutils.ladder.objectives import N_ACCURACY, OBJECTIVE_LABELS, TRAIN_STEPS
from depthutils.ladder.registry import OBJECTIVE_TASKS
from depthutils.ladder.word_problems import TASKS
from depthutils.measures.curves import OVERLAP_THRESHOLD

#: the graded measures, each predicted larger for A than Q+A and for Q+A than LM
GRADED = ("later", "output", "ed_kl", "ed_overlap", "depth")
#: why the hypothesis predicts that direction for each graded measure (ours)
PREDICTIONS = {
    "later": "layers that still build features feed the layers above them: skipping a late layer changes the later "
             "updates more when the late layers compute",
    "output": "the answer position reads what earlier positions computed; late layers that build features there "
              "(not refine those positions' own next-token predictions) move the answer's distribution more",
    "ed_kl": "the lens reaches half the final distribution's divergence later when the answer forms in the last "
             "layers, earlier when they only sharpen it",
    "ed_overlap": "the lens's top-5 overlaps the output's later when the answer forms in the last layers",
    "depth": "P1's depth score, the centre of mass of the later-layer effects, moves up when late layers compute",
}
#: the two comparisons the hypothesis orders
PAIRS = (("a", "qa"), ("qa", "lm"))
CONDITIONS = {"matched": "at matched accuracy", "final": "at the same step (the last)"}
#: the objectives in a word
SHORT = {o: OBJECTIVE_LABELS[o].split(" (")[0] for o in OBJECTIVE_LABELS}
#: the measures in a few words (tables and the reading guide)
SHORT_LABELS = {"later": "later-layer effect", "output": "output effect", "ed_kl": "ED_KL", "ed_overlap": "ED_overlap",
                "depth": "depth score", "contributions": "contribution ratio"}

#: the floor's binomial test: its one-sided level, and the normal quantile of its approximation (1.645)
ALPHA = 0.05
Z_ALPHA = NormalDist().inv_cdf(1 - ALPHA)
#: how many of a pair's measures must be shown (or not shown) for the pair to be
MAJORITY = 3
#: the fewest operations a counted chain must have for the comparison to speak to depth: a single operation is
#: a lookup, with nothing to compose
MIN_COMPOSED = 2
#: what the chapter says of a task none of whose seeds has all three objectives in the tables
NOT_RUN = "No seed of this task has all three objectives in the tables (train them with `python -m depthutils objectives`)."


def floor(task: str) -> float:
    """The accuracy a step count of ``task`` needs to count: chapter 6's floor, or the accuracy a one-sided binomial
    test on :data:`N_ACCURACY` chains tells from chance at 5% where that is higher."""
    p = TASKS[task].chance
    return max(ACCURACY_FLOOR, p + Z_ALPHA * math.sqrt(p * (1 - p) / N_ACCURACY))


def grade(c: Comparison) -> str:
    """One comparison's outcome (see the module docstring)."""
    if c.diff is None:
        return "not tested"
    if c.lo is not None and c.lo > 0 and c.agree == c.n_seeds:
        return "shown"
    if c.hi is not None and c.hi < 0:
        return "not shown"
    return "mixed"


def pair_outcome(grades) -> str:
    tested = [g for g in grades if g != "not tested"]
    shown, against = tested.count("shown"), tested.count("not shown")
    if len(tested) < MAJORITY:
        return "not tested"
    if shown >= MAJORITY and not against:
        return "shown"
    if against >= MAJORITY and not shown:
        return "not shown"
    return "mixed"


def claim_outcome(pairs) -> str:
    if "not tested" in pairs:
        return "not tested"
    return "shown" if all(p == "shown" for p in pairs) else "not shown" if all(p == "not shown" for p in pairs) \
        else "mixed"


@dataclass
class Condition:
    """One task under one condition: the snapshots read, the step counts that count, every comparison."""

    task: str
    name: str
    steps: dict
    levels: tuple
    dropped: dict                     # step count -> {objective: seed-mean accuracy} below the floor
    match_level: float | None = None  # the matched accuracy (matched only) …
    match_k: int | None = None        # … on this many operations
    why: str | None = None            # not tested: why
    comparisons: dict = field(default_factory=dict)  # (pair, measure) -> Comparison
    contributions: dict = field(default_factory=dict)  # pair -> Comparison of the ungraded contribution ratio

    def grades(self) -> dict:
        return {key: grade(c) for key, c in self.comparisons.items()}

    def pair(self, pair) -> str:
        return pair_outcome([grade(self.comparisons[(pair, m)]) for m in GRADED]) if not self.why else "not tested"

    def outcome(self) -> str:
        return "not tested" if self.why else claim_outcome([self.pair(p) for p in PAIRS])


def condition(result: ObjectivesResult, task: str, name: str) -> Condition:
    """Grade ``task`` under condition ``name`` (:data:`CONDITIONS`)."""
    fl, level, k = floor(task), None, None
    if name == "matched":
        k = next((k for k in reversed(TRAIN_STEPS) if k >= MIN_COMPOSED and result.reachable(task, k) >= fl), None)
        if k is None:
            return Condition(task, name, result.final_steps(task), (), {}, None, None, "no chain of "
                             f"{MIN_COMPOSED} or more operations is learned by every run: on each such count, some "
                             f"run stays below the floor {fl:.2f} at every snapshot")
        level = result.reachable(task, k)
        steps = result.matched_steps(task, k, level)
    else:
        steps = result.final_steps(task)
    accs = {o: result.mean_accuracy(task, o, steps) for o, _ in OBJECTIVE_LABELS.items()}
    dropped = {n: {o: accs[o][n][0] for o in accs if accs[o][n][0] < fl} for n in TRAIN_STEPS}
    dropped = {n: below for n, below in dropped.items() if below}
    levels = tuple(n for n in TRAIN_STEPS if n not in dropped)
    cond = Condition(task, name, steps, levels, dropped, level, k)
    if not any(n >= MIN_COMPOSED for n in levels):
        cond.why = (f"no chain of {MIN_COMPOSED} or more operations reaches the floor {fl:.2f} under every objective"
                    + (f" (only chains of {' or '.join(map(str, levels))} operation(s) do)" if levels else ""))
        return cond
    for pair in PAIRS:
        for m in GRADED:
            cond.comparisons[(pair, m)] = result.compare(task, steps, m, *pair, levels)
        cond.contributions[pair] = result.compare(task, steps, "contributions", *pair, levels)
    return cond


@dataclass
class Grading:
    """Every task under every condition, and the verdict per task (graded at matched accuracy)."""

    result: ObjectivesResult
    conditions: dict  # (task, condition) -> Condition

    def verdicts(self) -> dict:
        """``{task: Verdict}`` for every task of the experiment (not tested where it has no complete seed)."""
        return {t: verdict(self, t) for t in OBJECTIVE_TASKS}

    def n_comparisons(self) -> int:
        return len(PAIRS) * len(GRADED)

    def facts(self) -> dict:
        """The numbers the chapter states, rounded as printed, keyed ``{task}_{condition}_{...}``."""
        r3 = lambda v: None if v is None else round(v, 3) + 0.0  # noqa: E731  (no "-0.0")
        out = {"n_comparisons": self.n_comparisons(), "majority": MAJORITY, "hardest": TRAIN_STEPS[-1],
               "overlap_threshold": OVERLAP_THRESHOLD, "n_runs": len(self.result.cards), "alpha": f"{ALPHA:.0%}",
               "n_live": len(self.result.live_gap),
               "live_gap": f"{max(self.result.live_gap.values()):.1e}" if self.result.live_gap else "—"}
        for t in OBJECTIVE_TASKS:  # every key for every task, so that the chapter's prose never misses one
            out.update({f"{t}_{name}_{key}": "—" for name in CONDITIONS for key in ("level", "k", "steps", "levels")})
            out.update({f"{t}_{name}_{key}": "not tested" for name in CONDITIONS for key in ("outcome", *map("_".join, PAIRS))})
            out.update({f"{t}_floor": round(floor(t), 2), f"{t}_chance": round(TASKS[t].chance, 2), f"{t}_n_seeds": 0,
                        f"{t}_null_agree": "—", f"{t}_expected_chance_shown": "—"})
        for t in self.result.tasks():
            seeds = self.result.seeds(t)
            out.update({f"{t}_n_seeds": len(seeds), f"{t}_floor": round(floor(t), 2),
                        f"{t}_chance": round(TASKS[t].chance, 2), f"{t}_null_agree": f"1/{2 ** len(seeds)}",
                        f"{t}_expected_chance_shown": round(self.n_comparisons() / 2 ** len(seeds), 2)})
            for name in CONDITIONS:
                c, p = self.conditions[(t, name)], f"{t}_{name}"
                out[f"{p}_outcome"] = c.outcome()
                out[f"{p}_levels"] = ", ".join(map(str, c.levels)) or "none"
                if c.match_level is not None:
                    out[f"{p}_level"] = round(c.match_level, 2)
                    out[f"{p}_k"] = c.match_k
                    picked = sorted(s for s in c.steps.values() if s is not None)
                    out[f"{p}_steps"] = f"{picked[0]}–{picked[-1]}" if picked else "none"
                for pair in PAIRS:
                    out[f"{p}_{'_'.join(pair)}"] = c.pair(pair)
                    for m in GRADED:
                        cmp = c.comparisons.get((pair, m))
                        if cmp is None:
                            continue
                        q = f"{p}_{'_'.join(pair)}_{m}"
                        out.update({q: r3(cmp.diff), f"{q}_lo": r3(cmp.lo), f"{q}_hi": r3(cmp.hi),
                                    f"{q}_agree": f"{cmp.agree}/{cmp.n_seeds}", f"{q}_grade": grade(cmp)})
                n_shown = sum(g == "shown" for g in c.grades().values())
                out[f"{p}_n_shown"] = n_shown
        return out

    def table(self, task: str, condition: str) -> str:
        """Markdown, one row per measure: each objective's seed mean [95% interval] and, per pair, the difference
        [interval], the seeds above 0 and the grade, under ``condition``."""
        if task not in self.result.tasks():
            return NOT_RUN
        c = self.conditions[(task, condition)]
        if c.why:
            return f"Not tested: {c.why}."
        pairs = [f"{SHORT[a]} − {SHORT[b]}" for a, b in PAIRS]
        lines = ["| measure | " + " | ".join(SHORT[o] for o in OBJECTIVE_LABELS) + " | " + " | ".join(pairs) + " |",
                 "|---" * (1 + len(OBJECTIVE_LABELS) + len(PAIRS)) + "|"]
        for m in (*GRADED, "contributions"):
            cmps = [c.contributions[p] if m == "contributions" else c.comparisons[(p, m)] for p in PAIRS]
            means = {cmps[0].a: (cmps[0].mean_a, cmps[0].band_a), cmps[0].b: (cmps[0].mean_b, cmps[0].band_b),
                     cmps[1].b: (cmps[1].mean_b, cmps[1].band_b)}
            cells = [_cell(*means[o]) for o in OBJECTIVE_LABELS]
            diffs = [f"{_cell(x.diff, (x.lo, x.hi), '+.3f')} · {x.agree}/{x.n_seeds}"
                     + ("" if m == "contributions" else f" · *{grade(x)}*") for x in cmps]
            label = SHORT_LABELS[m] + (" (not graded)" if m == "contributions" else "")
            lines.append(f"| {label} | " + " | ".join(cells + diffs) + " |")
        return "\n".join(lines)


def _cell(v, band, fmt: str = ".3f") -> str:
    """``0.449 [0.38, 0.52]``: the value to three decimals, its interval's ends to two (minus signs as −)."""
    if v is None:
        return "undefined"
    lo, hi = band
    short = fmt.replace(".3f", ".2f")
    text = f"{v:{fmt}}" + ("" if lo is None else f" [{lo:{short}}, {hi:{short}}]")
    return text.replace("-", "−")


def grading(result: ObjectivesResult) -> Grading:
    """Grade every task of ``result`` under both conditions."""
    return Grading(result, {(t, n): condition(result, t, n) for t in result.tasks() for n in CONDITIONS})


def criterion(task: str) -> str:
    """The rule that grades ``task``, in words, with its floor."""
    c = CLAIMS["objectives"]
    return (f"{c.statistic}. A comparison is shown when its 95% interval over seeds and prompts lies wholly above 0 "
            f"and every seed's own difference is above 0 (ours), not shown when the interval lies wholly below 0, "
            f"mixed otherwise. A pair of objectives is shown when at least {MAJORITY} of its {len(GRADED)} measures "
            f"are shown and none is not shown, not shown in the mirror case, mixed otherwise; the claim is shown when "
            f"both pairs are. A step count counts where every objective's mean accuracy reaches {floor(task):.2f} "
            f"(chapter 6's floor, or the accuracy a one-sided binomial test on {N_ACCURACY} chains tells from chance, "
            f"{TASKS[task].chance:.2f}, at {ALPHA:.0%}, whichever is higher).")


def verdict(g: Grading, task: str) -> Verdict:
    """The verdict on ``task``, graded at matched accuracy; the same step's outcome is stated beside it."""
    c, label = CLAIMS["objectives"], TASKS[task].label
    why = (f"{label}: {NOT_RUN[0].lower()}{NOT_RUN[1:]}" if task not in g.result.tasks() else
           f"{label}: one seed only; the intervals are over seeds." if len(g.result.seeds(task)) < 2 else
           f"{label}: {g.conditions[(task, 'matched')].why}." if g.conditions[(task, "matched")].why else None)
    if why:
        return _verdict(c, "not tested", why, criterion=criterion(task))
    m, f = g.conditions[(task, "matched")], g.conditions[(task, "final")]
    parts = []
    for pair in PAIRS:
        cells = [f"{SHORT_LABELS[mm]} {_cell(x.diff, (x.lo, x.hi), '+.3f')} ({x.agree}/{x.n_seeds} seeds, {grade(x)})"
                 for mm in GRADED for x in [m.comparisons[(pair, mm)]]]
        parts.append(f"{SHORT[pair[0]]} − {SHORT[pair[1]]}: {m.pair(pair)} ({'; '.join(cells)})")
    n = len(g.result.seeds(task))
    numbers = (f"{label}, {n} seeds, at matched accuracy (every run read at its first snapshot with accuracy "
               f"≥ {m.match_level:.2f} on {m.match_k} operations; step counts {', '.join(map(str, m.levels))}): "
               + "; ".join(parts) + f". At the same step (the last), the claim would be {f.outcome()}.")
    notes = [f"{g.n_comparisons()} comparisons per task and condition; under a null with no difference each has at "
             f"most a 1/{2 ** n} chance of every seed agreeing in the predicted direction, so about "
             f"{g.n_comparisons() / 2 ** n:.2f} chance-shown comparisons are expected, and a pair needs {MAJORITY}."]
    return _verdict(c, m.outcome(), numbers, notes, criterion=criterion(task),
                    value=f"{TASKS[task].name.upper()}: A − Q+A {m.pair(PAIRS[0])}, Q+A − LM {m.pair(PAIRS[1])}")


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
    return " ".join(parts)




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
