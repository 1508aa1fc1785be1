"""Chapter 10's claim graded: the authors' hypothesis on each task, at matched accuracy, with the same step beside it.

The hypothesis (P1's authors, in our reading): without the question to model (objective A) a model keeps
building features to its last layers; modelling the question (Q+A), and more so English too (LM), ends that
stage earlier and leaves the last layers to refine the output distribution. So on a task that needs depth, every
graded measure (:data:`GRADED`, each read at the answer-predicting position) should be larger for A than for Q+A,
and for Q+A than for LM (:data:`PREDICTIONS` says why each). The contribution ratio is shown but not graded: a
layer that refines the output writes into the residual as much as one that builds features, so the hypothesis
predicts no direction for it.

**Rules (ours, each stated with its source):**

* A step count counts for a task only where **every** compared run (each objective's every seed, and the null
  control's) reaches :data:`LEARNED` on it at the snapshot read, and only from :data:`MIN_COMPOSED` operations
  on: a model compared must have learned what it is graded on, and one operation is a lookup, with nothing to
  compose. A condition with no such step count is not tested.
* At matched accuracy, each run is read at its first snapshot whose accuracy on the hardest trained step count
  that every run learns (reaches :data:`LEARNED` at some snapshot) reaches the level every run of the task reaches
  (:meth:`ObjectivesResult.reachable`). The match is a match only where every run's accuracy there lies within
  :data:`MATCH_TOL` of that level (snapshots too sparse for that: not tested).
* A comparison (one measure, one pair of objectives) is *shown* when its interval over seeds and prompts lies
  wholly above 0 **and** every seed's own difference is above 0; *not shown* when the interval lies wholly below
  0; *mixed* otherwise. Under a null with no difference, every one of ``n`` seeds agrees in the predicted
  direction with chance ``2^-n`` (1/32 for five).
* A pair of objectives is shown when at least three of its five measures are shown and none is not shown, not
  shown when at least three are not shown and none is shown, mixed otherwise (not tested with fewer than three
  tested). The claim on a task is shown when both pairs are, not shown when both are not, mixed otherwise.
* **The null control.** On S5 each seed also trains A′: objective A from the same initial weights on another
  draw of the task examples. A against A′ is paired by seed exactly as the objectives are, and no objective
  differs, so the rule should find nothing. A null comparison *tells the runs apart* when its interval excludes
  0 and every seed's difference has the interval's sign. If at least three of the five measures tell A from A′
  apart, the rule separates runs by their examples as readily as a pair needs to be shown, and a shown or not
  shown claim is reported as mixed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from depthutils.analysis.objectives import Comparison, ObjectivesResult
from depthutils.book.claim_table import CLAIMS
from depthutils.book.grading import Verdict, verdict_of
from depthutils.core.numbers import interval
from depthutils.ladder.objectives import GEOMETRIES, N_ACCURACY, NULL, OBJECTIVE_LABELS, TRAIN_STEPS
from depthutils.ladder.registry import OBJECTIVE_TASKS
from depthutils.ladder.word_problems import TASKS
from depthutils.measures.curves import OVERLAP_THRESHOLD

__all__ = ["GRADED", "PREDICTIONS", "PAIRS", "CONDITIONS", "SHORT", "SHORT_LABELS", "LEARNED", "MATCH_TOL", "MAJORITY",
           "MIN_COMPOSED", "NOT_RUN", "OBJECTIVE_TASKS", "grade", "apart", "pair_outcome", "claim_outcome",
           "Condition", "condition", "Grading", "null_words", "cell", "grading", "criterion", "verdict"]

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

#: a step count counts only where every compared run reaches this accuracy on it at the snapshot read
LEARNED = 0.9
#: matched accuracy is a match only where every run's accuracy at its snapshot lies within this of the level
MATCH_TOL = 0.05
#: how many of a pair's measures must be shown (or not shown) for the pair to be
MAJORITY = 3
#: the fewest operations a counted chain must have for the comparison to speak to depth: a single operation is
#: a lookup, with nothing to compose
MIN_COMPOSED = 2
#: what the chapter says of a task none of whose seeds has all three objectives in the tables
NOT_RUN = "No seed of this task has all three objectives in the tables (train them with `python -m depthutils objectives`)."


def grade(c: Comparison) -> str:
    """One comparison's outcome (see the module docstring)."""
    if c.diff is None:
        return "not tested"
    if c.lo is not None and c.lo > 0 and c.agree == c.n_seeds:
        return "shown"
    if c.hi is not None and c.hi < 0:
        return "not shown"
    return "mixed"


def apart(c: Comparison) -> bool:
    """Whether a null comparison tells its runs apart: the interval excludes 0 and every seed's difference has
    the interval's sign (either direction: under the null, both are false)."""
    if c.diff is None or c.lo is None:
        return False
    up = c.lo > 0 and c.agree == c.n_seeds
    down = c.hi < 0 and sum(d is not None and d < 0 for d in c.seed_diffs.values()) == c.n_seeds
    return up or down


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
    dropped: dict                     # step count -> {run: accuracy} of the runs below LEARNED on it
    match_level: float | None = None  # the matched accuracy (matched only) …
    match_k: int | None = None        # … on this many operations
    why: str | None = None            # not tested: why
    comparisons: dict = field(default_factory=dict)  # (pair, measure) -> Comparison
    contributions: dict = field(default_factory=dict)  # pair -> Comparison of the ungraded contribution ratio
    null: dict = field(default_factory=dict)  # measure -> Comparison of A with A′ (the null control)

    def grades(self) -> dict:
        return {key: grade(c) for key, c in self.comparisons.items()}

    def pair(self, pair) -> str:
        return pair_outcome([grade(self.comparisons[(pair, m)]) for m in GRADED]) if not self.why else "not tested"

    def parts(self) -> list[str]:
        """Every graded measure's outcome, over every pair: the parts the verdict combines."""
        return [] if self.why else [grade(self.comparisons[(pair, m)]) for pair in PAIRS for m in GRADED]

    def null_apart(self) -> int | None:
        """How many graded measures tell A from A′ apart (the null control; None: not run)."""
        return sum(apart(c) for c in self.null.values()) if self.null else None

    def null_fails(self) -> bool:
        """Whether the rule tells A from A′ apart on :data:`MAJORITY` or more measures."""
        return (self.null_apart() or 0) >= MAJORITY

    def raw_outcome(self) -> str:
        """The outcome before the null control."""
        return "not tested" if self.why else claim_outcome([self.pair(p) for p in PAIRS])

    def outcome(self) -> str:
        raw = self.raw_outcome()
        return "mixed" if raw in ("shown", "not shown") and self.null_fails() else raw


def _read_at(result: ObjectivesResult, task: str, steps: dict, k: int) -> dict:
    """``{run: accuracy on k operations}`` of every run of ``task`` (the null control's too) at its snapshot in
    ``steps``."""
    return {n: result.accuracy(n, steps[n])[k] for n in result.runs(task) if steps.get(n) is not None}


def condition(result: ObjectivesResult, task: str, name: str) -> Condition:
    """Grade ``task`` under condition ``name`` (:data:`CONDITIONS`)."""
    composed = [k for k in TRAIN_STEPS if k >= MIN_COMPOSED]
    level, k = None, None
    if name == "matched":
        k = next((k for k in reversed(composed) if result.reachable(task, k) >= LEARNED), None)
        if k is None:
            return Condition(task, name, result.final_steps(task), (), {}, None, None, "no chain of "
                             f"{MIN_COMPOSED} or more operations is learned by every run: on each such count, some "
                             f"run stays below {LEARNED} at every snapshot")
        level = result.reachable(task, k)
        steps = result.matched_steps(task, k, level)
        off = {n: a for n, a in _read_at(result, task, steps, k).items() if a - level > MATCH_TOL}
        if off:
            return Condition(task, name, steps, (), {}, level, k, f"the snapshots are too sparse to match accuracy "
                             f"within {MATCH_TOL} of {level:.2f} on {k} operations: " + ", ".join(
                                 f"{n} reads {a:.2f}" for n, a in sorted(off.items())))
    else:
        steps = result.final_steps(task)
    dropped = {n: {run: a for run, a in _read_at(result, task, steps, n).items() if a < LEARNED} for n in composed}
    dropped = {n: below for n, below in dropped.items() if below}
    levels = tuple(n for n in composed if n not in dropped)
    cond = Condition(task, name, steps, levels, dropped, level, k)
    if not levels:
        worst = {n: min(below.values()) for n, below in dropped.items()}
        cond.why = (f"no chain of {MIN_COMPOSED} or more operations is learned by every run (≥ {LEARNED}); the "
                    "lowest run per count: " + ", ".join(f"{n} operations {a:.2f}" for n, a in worst.items()))
        return cond
    for pair in PAIRS:
        for m in GRADED:
            cond.comparisons[(pair, m)] = result.compare(task, steps, m, *pair, levels)
        cond.contributions[pair] = result.compare(task, steps, "contributions", *pair, levels)
    if result.has_null(task):
        for m in GRADED:
            cond.null[m] = result.compare(task, steps, m, "a", NULL, levels)
    return cond


@dataclass
class Grading:
    """Every task under every condition, and the verdict per task (graded at matched accuracy)."""

    result: ObjectivesResult
    conditions: dict  # (task, condition) -> Condition

    def verdicts(self, premise: Verdict | None = None) -> dict:
        """``{task: Verdict}`` for every task of the experiment (not tested where it has no complete seed, or
        where ``premise``, the depth-necessity sweep's verdict, is given and is not shown)."""
        out = {t: verdict(self, t, premise) for t in OBJECTIVE_TASKS}
        if premise is not None:  # the chapter's "paper vs this run" table shows the premise's rows too
            out[OBJECTIVE_TASKS[0]].also.append(premise)
        return out

    def n_comparisons(self) -> int:
        return len(PAIRS) * len(GRADED)

    def facts(self) -> dict:
        """The numbers the chapter states, rounded as printed, keyed ``{task}_{condition}_{...}``."""
        r3 = lambda v: None if v is None else round(v, 3) + 0.0  # noqa: E731  (no "-0.0")
        out = {"n_comparisons": self.n_comparisons(), "majority": MAJORITY, "hardest": TRAIN_STEPS[-1],
               "overlap_threshold": OVERLAP_THRESHOLD, "n_runs": len(self.result.cards), "learned": LEARNED, "match_tol": MATCH_TOL,
               "n_live": len(self.result.live_gap),
               "n_null": sum(c["objective"] == NULL for c in self.result.cards.values()),
               "train_hours": f"{sum(c.get('wall_time_s', 0) for c in self.result.cards.values()) / 3600:.1f}",
               "live_gap": f"{max(self.result.live_gap.values()):.1e}" if self.result.live_gap else "—"}
        for t in OBJECTIVE_TASKS:  # every key for every task, so that the chapter's prose never misses one
            out.update({f"{t}_{name}_{key}": "—" for name in CONDITIONS
                        for key in ("level", "k", "steps", "levels")})
            out.update({f"{t}_{name}_{key}": "not run" for name in CONDITIONS for key in ("null_apart", "null")})
            out.update({f"{t}_{name}_{key}": "not tested" for name in CONDITIONS
                        for key in ("outcome", "raw_outcome", *map("_".join, PAIRS))})
            out.update({f"{t}_chance": round(TASKS[t].chance, 2), f"{t}_n_seeds": 0,
                        f"{t}_chains": GEOMETRIES[t].examples,
                        f"{t}_null_agree": "—", f"{t}_expected_chance_shown": "—"})
        for t in self.result.tasks():
            seeds = self.result.seeds(t)
            out.update({f"{t}_n_seeds": len(seeds),
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
                out[f"{p}_raw_outcome"] = c.raw_outcome()
                if c.null:
                    out[f"{p}_null_apart"] = null_words(c)
                    out[f"{p}_null"] = "fails" if c.null_fails() else "passes"
        return out


def null_words(c: Condition) -> str:
    """``1 of 5 measures``: how many graded measures tell A from A′ apart (the null control)."""
    n = c.null_apart()
    return "not run" if n is None else f"{n} of {len(GRADED)} measures"


def cell(v, band, fmt: str = ".3f") -> str:
    """``0.449 [0.38, 0.52]``: the value to three decimals, its interval's ends to two (minus signs as −), in the
    package's one interval format (:func:`depthutils.core.numbers.interval`)."""
    return interval(v, *band, fmt, fmt.replace(".3f", ".2f")).replace("-", "−")


def grading(result: ObjectivesResult) -> Grading:
    """Grade every task of ``result`` under both conditions."""
    return Grading(result, {(t, n): condition(result, t, n) for t in result.tasks() for n in CONDITIONS})


def criterion(task: str) -> str:
    """The rule that grades ``task``, in words."""
    c = CLAIMS["objectives"]
    return (f"{c.statistic}. A comparison is shown when its 95% interval over seeds and prompts lies wholly above 0 "
            f"and every seed's own difference is above 0 (ours), not shown when the interval lies wholly below 0, "
            f"mixed otherwise. A pair of objectives is shown when at least {MAJORITY} of its {len(GRADED)} measures "
            f"are shown and none is not shown, not shown in the mirror case, mixed otherwise; the claim is shown when "
            f"both pairs are; a shown or not shown claim is reported as mixed when the same rule tells A from A′ (A "
            f"on another draw of the examples, the null control) apart on {MAJORITY} or more measures. A step count "
            f"counts only from {MIN_COMPOSED} operations on, and only where every compared run (each seed of each "
            f"objective, and A′) reaches {LEARNED} on it at the snapshot read ({N_ACCURACY} held-out chains; chance "
            f"{TASKS[task].chance:.2f}); at matched accuracy every run must lie within {MATCH_TOL} of the level. "
            f"Graded only where the premise holds: at these lengths S5 needs more layers than Z10 (the sweep above).")


def verdict(g: Grading, task: str, premise: Verdict | None = None) -> Verdict:
    """The verdict on ``task``, graded at matched accuracy; the same step's outcome is stated beside it. Not tested
    where ``premise`` (:func:`depthutils.book.claims.objectives.premise.verdict`) is given and is not shown: without
    a task that needs more depth than its control, the comparison cannot speak to the hypothesis."""
    c, label = CLAIMS["objectives"], TASKS[task].label
    why = (f"{label}: the premise (chapter 10's first verdict) is {premise.outcome}"
           + (f" ({premise.value})" if premise.value else "") + ", so no objective is graded."
           if premise is not None and premise.outcome != "shown" else
           f"{label}: {NOT_RUN[0].lower()}{NOT_RUN[1:]}" if task not in g.result.tasks() else
           f"{label}: one seed only; the intervals are over seeds." if len(g.result.seeds(task)) < 2 else
           f"{label}: {g.conditions[(task, 'matched')].why}." if g.conditions[(task, "matched")].why else None)
    if why:
        also = g.conditions.get((task, "matched"))
        notes = [f"Apart from the premise, at matched accuracy: {also.why}."] if also and also.why and "premise" in why \
            else []
        return verdict_of(c, "not tested", why, notes, criterion=criterion(task))
    m, f = g.conditions[(task, "matched")], g.conditions[(task, "final")]
    parts = []
    for pair in PAIRS:
        cells = [f"{SHORT_LABELS[mm]} {cell(x.diff, (x.lo, x.hi), '+.3f')} ({x.agree}/{x.n_seeds} seeds, {grade(x)})"
                 for mm in GRADED for x in [m.comparisons[(pair, mm)]]]
        parts.append(f"{SHORT[pair[0]]} − {SHORT[pair[1]]}: {m.pair(pair)} ({'; '.join(cells)})")
    n = len(g.result.seeds(task))
    numbers = (f"{label}, {n} seeds, at matched accuracy (every run read at its first snapshot with accuracy "
               f"≥ {m.match_level:.2f} on {m.match_k} operations; step counts {', '.join(map(str, m.levels))}): "
               + "; ".join(parts) + f". At the same step (the last), the claim would be {f.outcome()}.")
    read = _read_at(g.result, task, m.steps, m.match_k)
    notes = [f"Matched accuracy, each run's on {m.match_k} operations at its snapshot (level {m.match_level:.2f}, "
             f"tolerance {MATCH_TOL}): " + ", ".join(f"{n.removeprefix('objective-')} {a:.2f}"
                                                     for n, a in sorted(read.items())) + ".",
             f"{g.n_comparisons()} comparisons per task and condition; under a null with no difference each has at "
             f"most a 1/{2 ** n} chance of every seed agreeing in the predicted direction, so about "
             f"{g.n_comparisons() / 2 ** n:.2f} chance-shown comparisons are expected, and a pair needs {MAJORITY}.",
             "Null control (A against A′, objective A on another draw of the examples, paired by seed): "
             + ("not run on this task." if not m.null else
                f"{null_words(m)} tell them apart; " + (
                    f"{MAJORITY} or more, so the rule's {m.raw_outcome()} is reported as mixed."
                    if m.null_fails() and m.raw_outcome() in ("shown", "not shown") else
                    f"{MAJORITY} or more: the control fails." if m.null_fails() else
                    f"fewer than {MAJORITY}, so the control passes."))]
    return verdict_of(c, m.outcome(), numbers, notes, criterion=criterion(task),
                    value=f"{TASKS[task].name.upper()}: A − Q+A {m.pair(PAIRS[0])}, Q+A − LM {m.pair(PAIRS[1])}",
                    parts=m.parts())
