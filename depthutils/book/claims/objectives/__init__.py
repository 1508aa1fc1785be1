"""Chapter 10's claim graded: the authors' hypothesis on each task, at matched accuracy, with the same step beside it.

The hypothesis (P1's authors, in our reading): without the question to model (objective A) a model keeps
building features to its last layers; modelling the question (Q+A), and more so English too (LM), ends that
stage earlier and leaves the last layers to refine the output distribution. So on a task that needs depth, every
graded measure (:data:`GRADED`, each read at the answer-predicting position) should be larger for A than for Q+A,
and for Q+A than for LM (:data:`PREDICTIONS` says why each). The lens's effective depths and the contribution ratio are shown but not graded
(:data:`UNGRADED` says why): the hypothesis predicts no direction for them.

**Rules (ours, each stated with its source):**

* A step count counts for a task only where **every** compared run (each objective's every seed, and the null
  control's) reaches :data:`LEARNED` on it at the snapshot read, and only from :data:`MIN_COMPOSED` operations
  on: a model compared must have learned what it is graded on, and one operation is a lookup, with nothing to
  compose. A condition with no such step count is not tested.
* At matched accuracy, each run is read at its first snapshot whose accuracy on the hardest trained step count
  that every run learns (reaches :data:`LEARNED` at some snapshot) reaches the level every run of the task reaches
  (:meth:`ObjectivesResult.reachable`). The match is a match only where every run's accuracy there lies within
  :data:`MATCH_TOL` of that level (snapshots too sparse for that: not tested).
* **Graded against the null, over seeds.** The seed is the unit of replication. Every seed also trains A′
  (objective A from the same initial weights on another draw of the examples), so A − A′ is what two runs differ by
  when their objectives do not. A comparison is graded from its per-seed differences against A − A′
  (:func:`seed_band`, :func:`grade`): *shown* when their band lies wholly above 0 and every seed's difference is
  above :data:`TIE` (a smaller one is a tie, in neither direction); *not shown* in the mirror case; *mixed*
  otherwise; *not tested* without A′. No bootstrap draw enters a grade.
* **The rule calibrated on the null** (:meth:`Grading.false_shown`): graded by the same rule, A − A′ and A′ − A
  on every graded measure, condition and task should come out neither shown; the share that does is the rule's
  false-shown rate. Above :data:`FALSE_SHOWN_MAX`, no claim is graded shown or not shown (mixed instead).
* A pair of objectives is shown when at least :data:`MAJORITY` of its :data:`GRADED` measures are shown and none
  is not shown, not shown in the mirror case, mixed otherwise (not tested with fewer than :data:`MAJORITY`
  tested). The claim on a task is shown when both pairs are, not shown when both are not, mixed otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from depthutils.analysis.objectives import Comparison, ObjectivesResult
from depthutils.book.claim_table import CLAIMS
from depthutils.book.grading import Verdict, verdict_of
from depthutils.core.numbers import interval
from depthutils.core.seeds import sd, t_band
from depthutils.ladder.objectives import GEOMETRIES, N_ACCURACY, NULL, OBJECTIVE_LABELS, TRAIN_STEPS
from depthutils.ladder.registry import OBJECTIVE_TASKS, SWEEP_TASKS
from depthutils.ladder.word_problems import TASKS
from depthutils.measures.curves import OVERLAP_THRESHOLD

__all__ = ["GRADED", "UNGRADED", "SHOWN", "PREDICTIONS", "PAIRS", "CONDITIONS", "SHORT", "SHORT_LABELS", "LEARNED",
           "MATCH_TOL", "MAJORITY", "MIN_COMPOSED", "TIE", "FALSE_SHOWN_MAX", "NOT_RUN", "OBJECTIVE_TASKS", "PREMISE_TASKS",
           "OTHER_TASKS", "on_premise_tasks", "seed_band",
           "signs", "agreement", "grade", "pair_outcome", "claim_outcome", "Condition", "condition", "Grading", "cell",
           "grading", "criterion", "verdict"]

#: the premise's two tasks (the depth sweep's task that needs depth and its control): an objective is graded only on
#: runs trained on them
PREMISE_TASKS = tuple(SWEEP_TASKS)


def _tasks_words(tasks) -> str:
    """``"S5 and C10, with structured questions"``: the tasks' groups and how their questions are drawn."""
    how = ("with structured questions" if all(TASKS[t].chain for t in tasks) else
           "with operations drawn independently" if not any(TASKS[t].chain for t in tasks) else "")
    return " and ".join(TASKS[t].label.split(" (")[0] for t in tasks) + (f", {how}" if how else "")


#: why nothing is graded where the runs were trained on other tasks than the premise's
OTHER_TASKS = (f"the premise was measured on {_tasks_words(PREMISE_TASKS)}, but these runs were trained on "
               f"{_tasks_words(OBJECTIVE_TASKS)}: the objectives are trained again on the premise's tasks before any "
               "is graded")


def on_premise_tasks() -> bool:
    """Whether the objectives' runs were trained on the tasks the premise was measured on."""
    return set(OBJECTIVE_TASKS) == set(PREMISE_TASKS)


#: the graded measures, each predicted larger for A than Q+A and for Q+A than LM
GRADED = ("later", "output", "depth")
#: why the hypothesis predicts that direction for each graded measure (ours)
PREDICTIONS = {
    "later": "layers that still build features feed the layers above them: skipping a late layer changes the later "
             "updates more when the late layers compute",
    "output": "the answer position reads what earlier positions computed; late layers that build features there "
              "(not refine those positions' own next-token predictions) move the answer's distribution more",
    "depth": "P1's depth score, the centre of mass of the later-layer effects, moves up when late layers compute",
}
#: shown beside the graded measures, not graded: why the hypothesis predicts no direction for each (ours)
UNGRADED = {
    "ed_kl": "late layers that refine the output distribution delay the lens's convergence as much as late layers "
             "that build features, so either reading of the hypothesis moves it the same way",
    "ed_overlap": "the same holds for the lens's top-5 overlap with the output",
    "contributions": "a layer that refines the output writes into the residual as much as one that builds features",
}
#: every measure the chapter shows, graded first
SHOWN = (*GRADED, *UNGRADED)
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
#: how many of a pair's graded measures must be shown (or not shown) for the pair to be
MAJORITY = 2
#: the fewest operations a counted chain must have for the comparison to speak to depth: a single operation is
#: a lookup, with nothing to compose
MIN_COMPOSED = 2
#: a seed's difference nearer 0 than this (half the printed precision) is a tie, in neither direction
TIE = 5e-4
#: the largest share of null comparisons (A − A′ and A′ − A) the rule may grade shown
FALSE_SHOWN_MAX = 0.05
#: what the chapter says of a task none of whose seeds has all three objectives in the tables
NOT_RUN = "No seed of this task has all three objectives in the tables (train them with `python -m depthutils objectives`)."

def seed_band(c: Comparison, null: Comparison | None) -> tuple:
    """The graded band of ``c``'s mean per-seed difference: ``mean ± t95(S − 1) · σ / √S`` over its ``S`` seeds,
    ``σ`` the larger of the per-seed differences' standard deviation and that of ``null`` (A − A′, the same
    measure on the same snapshots and seeds). ``(None, None)`` without ``null``, with fewer than two seeds, or
    where a seed's difference is undefined."""
    if null is None or c.n_seeds < 2 or set(null.seed_diffs) != set(c.seed_diffs):
        return None, None
    d, n = list(c.seed_diffs.values()), list(null.seed_diffs.values())
    return (None, None) if None in d or None in n else t_band(d, sd(n))


def signs(c: Comparison) -> tuple[int, int, int]:
    """``(above, below, ties)``: the seeds whose difference is above :data:`TIE`, below −TIE, and within it."""
    d = [x for x in c.seed_diffs.values() if x is not None]
    up, down = sum(x >= TIE for x in d), sum(x <= -TIE for x in d)
    return up, down, len(d) - up - down


def agreement(c: Comparison, unit: str = "") -> str:
    """``4/5, 1 tied``: the seeds above 0 (:func:`signs`) of all, ``unit`` after the count, and the ties beside."""
    up, _, ties = signs(c)
    return f"{up}/{c.n_seeds}{unit}" + (f", {ties} tied" if ties else "")


def grade(c: Comparison, null: Comparison | None) -> str:
    """One comparison's outcome, graded against ``null`` (see the module docstring; ``grade(x, x)`` grades a null
    comparison ``x`` by the same rule)."""
    lo, hi = seed_band(c, null)
    if c.diff is None or lo is None:
        return "not tested"
    up, down, _ = signs(c)
    if lo > 0 and up == c.n_seeds:
        return "shown"
    if hi < 0 and down == c.n_seeds:
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
    dropped: dict                     # step count -> {run: accuracy} of the runs below LEARNED on it
    match_level: float | None = None  # the matched accuracy (matched only) …
    match_k: int | None = None        # … on this many operations
    why: str | None = None            # not tested: why
    comparisons: dict = field(default_factory=dict)  # (pair, measure) -> Comparison, every measure of SHOWN
    null: dict = field(default_factory=dict)  # measure -> Comparison of A with A′ (the null control)

    def grade(self, pair, measure: str) -> str:
        """The outcome of ``pair`` on a graded ``measure``, against the null control's A − A′."""
        return grade(self.comparisons[(pair, measure)], self.null.get(measure))

    def band(self, pair, measure: str) -> tuple:
        """The graded band (:func:`seed_band`) of ``pair`` on ``measure``."""
        return seed_band(self.comparisons[(pair, measure)], self.null.get(measure))

    def grades(self) -> dict:
        return {(pair, m): self.grade(pair, m) for pair in PAIRS for m in GRADED} if not self.why else {}

    def pair(self, pair) -> str:
        return pair_outcome([self.grade(pair, m) for m in GRADED]) if not self.why else "not tested"

    def parts(self) -> list[str]:
        """Every graded measure's outcome, over every pair: the parts the verdict combines."""
        return list(self.grades().values())

    def null_grades(self) -> dict:
        """``{measure: outcome}`` of A − A′ graded by the objectives' own rule (``shown`` or ``not shown`` here is
        a false one: nothing differs but the draw of the examples). Empty without the null control."""
        return {} if self.why else {m: grade(x, x) for m, x in self.null.items() if m in GRADED}

    def raw_outcome(self) -> str:
        """The outcome before the calibration on the null."""
        return "not tested" if self.why else claim_outcome([self.pair(p) for p in PAIRS])

    def outcome(self, calibrated: bool = True) -> str:
        """The outcome; a shown or not shown one is mixed where the rule is not ``calibrated``
        (:meth:`Grading.calibrated`)."""
        raw = self.raw_outcome()
        return "mixed" if raw in ("shown", "not shown") and not calibrated else raw


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
        for m in SHOWN:
            cond.comparisons[(pair, m)] = result.compare(task, steps, m, *pair, levels)
    if result.has_null(task):
        for m in SHOWN:
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

    def false_shown(self) -> tuple[int, int]:
        """``(false, n)``: of the ``n`` null comparisons (A − A′ and A′ − A, every graded measure, condition and
        task with the null control), how many the rule grades shown; A′ − A is shown where A − A′ is not shown."""
        grades = [x for c in self.conditions.values() for x in c.null_grades().values()]
        return sum(x in ("shown", "not shown") for x in grades), 2 * len(grades)

    def calibrated(self) -> bool:
        """Whether the rule's false-shown rate on the null is at most :data:`FALSE_SHOWN_MAX` (and measured)."""
        false, n = self.false_shown()
        return n > 0 and false <= FALSE_SHOWN_MAX * n

    def outcome(self, task: str, name: str) -> str:
        return self.conditions[(task, name)].outcome(self.calibrated())

    def false_shown_words(self) -> str:
        """``0 of 24 (0%)``: the rule's false-shown rate on the null, or that it has none to read."""
        false, n = self.false_shown()
        return f"{false} of {n} ({false / n:.0%})" if n else "not measured (no null comparison is tested)"

    def facts(self) -> dict:
        """The numbers the chapter states, rounded as printed, keyed ``{task}_{condition}_{...}``."""
        r3 = lambda v: None if v is None else round(v, 3) + 0.0  # noqa: E731  (no "-0.0")
        out = {"n_comparisons": self.n_comparisons(), "majority": MAJORITY, "n_graded": len(GRADED),
               "hardest": TRAIN_STEPS[-1], "overlap_threshold": OVERLAP_THRESHOLD, "n_runs": len(self.result.cards),
               "learned": LEARNED, "match_tol": MATCH_TOL, "tie": TIE, "false_shown": self.false_shown_words(),
               "false_shown_max": f"{FALSE_SHOWN_MAX:.0%}", "calibrated": "is" if self.calibrated() else "is not",
               "n_live": len(self.result.live_gap),
               "n_null": sum(c["objective"] == NULL for c in self.result.cards.values()),
               "train_hours": f"{sum(c.get('wall_time_s', 0) for c in self.result.cards.values()) / 3600:.1f}",
               "live_gap": f"{max(self.result.live_gap.values()):.1e}" if self.result.live_gap else "—"}
        for t in OBJECTIVE_TASKS:  # every key for every task, so that the chapter's prose never misses one
            out.update({f"{t}_{name}_{key}": "—" for name in CONDITIONS
                        for key in ("level", "k", "steps", "levels")})
            out.update({f"{t}_{name}_{key}": "not tested" for name in CONDITIONS
                        for key in ("outcome", "raw_outcome", *map("_".join, PAIRS))})
            out.update({f"{t}_chance": round(TASKS[t].chance, 2), f"{t}_n_seeds": 0,
                        f"{t}_chains": GEOMETRIES[t].examples, f"{t}_n_null": 0})
        for t in self.result.tasks():
            out.update({f"{t}_n_seeds": len(self.result.seeds(t)), f"{t}_chance": round(TASKS[t].chance, 2),
                        f"{t}_n_null": len(self.result.runs(t, NULL))})
            for name in CONDITIONS:
                c, p = self.conditions[(t, name)], f"{t}_{name}"
                out[f"{p}_outcome"] = self.outcome(t, name)
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
                        q, (lo, hi), (up, _, ties) = f"{p}_{'_'.join(pair)}_{m}", c.band(pair, m), signs(cmp)
                        out.update({q: r3(cmp.diff), f"{q}_lo": r3(lo), f"{q}_hi": r3(hi),
                                    f"{q}_agree": f"{up}/{cmp.n_seeds}", f"{q}_ties": ties,
                                    f"{q}_grade": c.grade(pair, m)})
                out[f"{p}_n_shown"] = sum(g == "shown" for g in c.grades().values())
                out[f"{p}_raw_outcome"] = c.raw_outcome()
        return out


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
    return (f"{c.statistic}, on {len(GRADED)} measures ({', '.join(SHORT_LABELS[m] for m in GRADED)}; the lens's "
            f"effective depths predict no direction and are not graded). Over seeds (ours): a comparison is shown when "
            f"its mean per-seed difference ± t(0.975) · σ/√seeds lies wholly above 0, σ the larger of its seeds' spread "
            f"and that of A − A′ (A on another draw of the examples, the null control), and every seed's difference "
            f"is above {TIE}; not shown in the mirror case; mixed otherwise; not tested without A′. A pair of "
            f"objectives is shown when at least {MAJORITY} of its {len(GRADED)} measures are shown and none is not "
            f"shown, not shown in the mirror case, mixed otherwise; the claim is shown when both pairs are. Graded "
            f"by the same rule, A − A′ must come out shown (either way) in at most {FALSE_SHOWN_MAX:.0%} of the null "
            f"comparisons, or a shown or not shown claim is reported as mixed. A step count counts only from "
            f"{MIN_COMPOSED} operations on, and only where every compared run (each seed of each objective, and A′) "
            f"reaches {LEARNED} on it at the snapshot read ({N_ACCURACY} held-out chains; chance "
            f"{TASKS[task].chance:.2f}); at matched accuracy every run must lie within {MATCH_TOL} of the level. "
            f"Graded only where the premise holds (at these lengths S5 needs more layers than C10: the sweep above), "
            f"on runs trained on the premise's tasks.")


def verdict(g: Grading, task: str, premise: Verdict | None = None) -> Verdict:
    """The verdict on ``task``, graded at matched accuracy; the same step's outcome is stated beside it. Not tested
    where ``premise`` (:func:`depthutils.book.claims.objectives.premise.verdict`) is given and is not shown: without
    a task that needs more depth than its control, the comparison cannot speak to the hypothesis; nor where the runs
    were trained on other tasks than the premise's (:func:`on_premise_tasks`)."""
    c, label = CLAIMS["objectives"], TASKS[task].label
    why = (f"{label}: the premise (chapter 10's first verdict) is {premise.outcome}"
           + (f" ({premise.value})" if premise.value else "") + ", so no objective is graded."
           if premise is not None and premise.outcome != "shown" else
           f"{label}: {OTHER_TASKS}." if premise is not None and not on_premise_tasks() else
           f"{label}: {NOT_RUN[0].lower()}{NOT_RUN[1:]}" if task not in g.result.tasks() else
           f"{label}: one seed only; the intervals are over seeds." if len(g.result.seeds(task)) < 2 else
           f"{label}: {g.conditions[(task, 'matched')].why}." if g.conditions[(task, "matched")].why else
           f"{label}: the null control (A′) was not run on this task, so no difference has a null to be graded "
           f"against." if not g.result.has_null(task) else None)
    if why:
        also = g.conditions.get((task, "matched"))
        notes = [f"Apart from the premise, at matched accuracy: {also.why}."] if also and also.why and "premise" in why \
            else []
        return verdict_of(c, "not tested", why, notes, criterion=criterion(task))
    m = g.conditions[(task, "matched")]
    parts = []
    for pair in PAIRS:
        cells = []
        for mm in GRADED:
            x = m.comparisons[(pair, mm)]
            cells.append(f"{SHORT_LABELS[mm]} {cell(x.diff, m.band(pair, mm), '+.3f')} "
                         f"({agreement(x, ' seeds above')}, {m.grade(pair, mm)})")
        parts.append(f"{SHORT[pair[0]]} − {SHORT[pair[1]]}: {m.pair(pair)} ({'; '.join(cells)})")
    n = len(g.result.seeds(task))
    numbers = (f"{label}, {n} seeds, at matched accuracy (every run read at its first snapshot with accuracy "
               f"≥ {m.match_level:.2f} on {m.match_k} operations; step counts {', '.join(map(str, m.levels))}): "
               + "; ".join(parts) + f". At the same step (the last), the claim would be {g.outcome(task, 'final')}.")
    read = _read_at(g.result, task, m.steps, m.match_k)
    null = m.null_grades()
    notes = [f"Matched accuracy, each run's on {m.match_k} operations at its snapshot (level {m.match_level:.2f}, "
             f"tolerance {MATCH_TOL}): " + ", ".join(f"{n.removeprefix('objective-')} {a:.2f}"
                                                     for n, a in sorted(read.items())) + ".",
             "Null control, A − A′ at matched accuracy graded by the same rule: " + "; ".join(
                 f"{SHORT_LABELS[mm]} {cell(m.null[mm].diff, seed_band(m.null[mm], m.null[mm]), '+.3f')} ({x})"
                 for mm, x in null.items()) + f". Over every task and condition, the rule grades "
             f"{g.false_shown_words()} null comparisons shown (at most {FALSE_SHOWN_MAX:.0%} allowed)"
             + ("." if g.calibrated() else f", so the rule's {m.raw_outcome()} is reported as mixed."
                if m.raw_outcome() in ("shown", "not shown") else ": the rule is not calibrated.")]
    return verdict_of(c, g.outcome(task, "matched"), numbers, notes, criterion=criterion(task),
                      value=f"{TASKS[task].name.upper()}: A − Q+A {m.pair(PAIRS[0])}, Q+A − LM {m.pair(PAIRS[1])}",
                      parts=m.parts())
