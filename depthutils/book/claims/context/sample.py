"""Chapters 4 and 5's sample and its grading: per prompt the deepest layer at which a context position still
matters, per kind of prompt the mean with its bootstrap interval, and the verdict (see
:mod:`depthutils.book.claims.context`)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from IPython.display import Markdown

from depthutils.analysis.known_facts import KINDS, FactPrompts
from depthutils.book.claim_table import CLAIMS, COMPLETENESS_LIMIT, LEVEL, OUTCOMES
from depthutils.book.grading import Verdict, grade, interval_text, verdict_of
from depthutils.core.depth import layer_depth
from depthutils.core.progress import progress
from depthutils.core.results import bootstrap
from depthutils.measures.integrated_gradients import IGResult

__all__ = ["CONTEXT_MEASURES", "MIN_PROMPTS", "NO_POSITION", "Drops", "KindSample", "SampleVerdict", "by_kind",
           "drop_table", "verdict", "extremes", "kind_of", "per_prompt", "run_sample", "sample_facts", "sample_mean", "worked"]

#: what chapters 4 and 5 measure at a context position, by the ``what`` they pass to :func:`context`
CONTEXT_MEASURES = {"erasing the residual": "the effect on the answer of erasing the residual (replacing it by "
                                            "its mean)",
                    "the |attribution|": "the |integrated-gradients attribution| to the answer"}
#: a kind of prompt is graded only on at least this many counted prompts (ours: below ten, a percentile bootstrap
#: over prompts rests on too few distinct resamples to say where the mean lies)
MIN_PROMPTS = 10
#: why a prompt whose statistic is undefined is not counted
NO_POSITION = "no context position ever matters"
#: why the adaptive rule stopped (its ``stopped``), as a dropped prompt's reason says it
_STOPPED = {"budget": "its budget of evaluations ran out", "rounds": "its rounds ran out",
            "tol": "it had reached its error target"}


def kind_of(name: str) -> str:
    """``"multihop_3"`` -> ``"multihop"``: the kind of a prompt named as :func:`~depthutils.analysis.known_facts.prompts_for`
    names them."""
    return name.split("_")[0]


def sample_mean(values, level: float = LEVEL, seed: int = 0) -> tuple[float, float | None, float | None]:
    """``(mean, lo, hi)``: the mean of ``values`` (one per prompt) and its percentile bootstrap interval over
    prompts (:func:`depthutils.core.results.bootstrap`); one value has no interval (``lo = hi = None``)."""
    v = np.asarray(values, float)
    if v.ndim != 1 or not len(v):
        raise ValueError(f"values must be a non-empty list of numbers, got {values!r}")
    if len(v) < 2:
        return float(v[0]), None, None
    lo, hi = bootstrap(len(v), lambda idx: v[idx].mean(), level=level, seed=seed)
    return float(v.mean()), lo, hi


def per_prompt(r) -> tuple[float | None, str | None]:
    """One prompt's statistic and, where it is not counted, why (a phrase): no context position ever matters,
    or (integrated gradients) the layer sums miss f(x) − f(b) by more than :data:`COMPLETENESS_LIMIT`."""
    f = r.facts()
    share = f.get("completeness") if isinstance(r, IGResult) else None
    if share is not None and share > COMPLETENESS_LIMIT:
        params = r.meta.get("params", {})
        stopped = f"; the rule stopped because {_STOPPED[params['stopped']]}" if params.get("stopped") in _STOPPED else ""
        again = ", after a retry at twice the budget" if r.meta.get("retried") else ""
        return None, f"completeness gap {share:.2f} > {COMPLETENESS_LIMIT}{again}{stopped}"
    if f["deepest_rel"] is None:
        return None, NO_POSITION
    return float(f["deepest_rel"]), None


def extremes(r) -> tuple[float, float]:
    """The least and the greatest value a prompt's statistic can take on ``r``'s model: integrated gradients reads
    layer outputs, from layer 0's at 1/L (:func:`~depthutils.core.depth.layer_depth`) to the last layer's at 1; an
    erasure reads residuals, from h_0 at 0 to h_L at 1. Rounded as the statistic is."""
    attribution = getattr(r, "attribution", None)
    return (round(layer_depth(0, attribution.shape[0]), 2) if attribution is not None else 0.0), 1.0


@dataclass(frozen=True)
class Drops:
    """One kind's prompts on one model: those the run measured (``drawn``: a kind's candidates past its sample are
    not), those it graded, and those it dropped, because their layer sums still miss completeness after the retry
    (``completeness``) or because no context position ever matters (``no_position``); and how many it retried
    at twice the budget (``retried``) and how many of those the retry brought within the limit (``recovered``).
    Every prompt drawn is graded or dropped for one reason: ``drawn = graded + completeness + no_position``."""

    drawn: int
    graded: int
    completeness: int
    no_position: int
    retried: int = 0
    recovered: int = 0


@dataclass
class KindSample:
    """One kind's graded prompts on one model (``results``: name → result), as a chapter shows them: one figure
    (:func:`sample_figure`) and one summary per kind."""

    kind: str
    results: dict

    def stats(self) -> dict:
        """``values`` (counted prompts), ``dropped`` (name → why), and ``mean``, ``lo``, ``hi``, ``n``."""
        values, dropped = [], {}
        for name, r in self.results.items():
            value, why = per_prompt(r)
            (values.append(value) if why is None else dropped.__setitem__(name, why))
        mean, lo, hi = sample_mean(values) if values else (None, None, None)
        return {"values": values, "dropped": dropped, "mean": mean, "lo": lo, "hi": hi, "n": len(values)}

    def drops(self) -> Drops:
        """How many prompts this kind measured, graded and dropped, and why (:class:`Drops`)."""
        why = {name: per_prompt(r)[1] for name, r in self.results.items()}
        retried = [name for name, r in self.results.items() if getattr(r, "meta", {}).get("retried")]
        return Drops(drawn=len(why), graded=sum(w is None for w in why.values()),
                     completeness=sum(w is not None and w.startswith("completeness") for w in why.values()),
                     no_position=sum(w == NO_POSITION for w in why.values()),
                     retried=len(retried), recovered=sum(why[name] is None for name in retried))

    def bounds(self, sampled: bool = True) -> dict:
        """The kind's mean and grade as if every dropped prompt had been counted at one end of the scale
        (:func:`extremes`): ``"favourable"``, the end the claim favours (the shallowest), and ``"unfavourable"``,
        the other; each ``(mean, lo, hi, grade)``. Between them lies every grade the drops could have given. With
        ``sampled``, fewer than :data:`MIN_PROMPTS` prompts in all are *not tested*, as in :func:`verdict`."""
        c, s = CLAIMS["context"], self.stats()
        ends = [extremes(self.results[name]) for name in s["dropped"]]
        out = {}
        for side, pick in (("favourable", 0 if c.below else 1), ("unfavourable", 1 if c.below else 0)):
            values = s["values"] + [end[pick] for end in ends]
            if not values or (sampled and len(values) < MIN_PROMPTS):
                out[side] = (None, None, None, "not tested")
                continue
            mean, lo, hi = sample_mean(values)
            out[side] = (mean, lo, hi, grade(mean, lo, hi, c.shown.value, c.against.value, c.below))
        return out

    def summary(self) -> str:
        s = self.stats()
        out = (f"prompts measured {len(self.results)}, counted {s['n']}; per prompt " +
               (", ".join(f"{v:.2f}" for v in s["values"]) or "—") + f"; mean {interval_text(s['mean'], s['lo'], s['hi'])}")
        return out + "".join(f"; {k} not counted ({why})" for k, why in s["dropped"].items())


def by_kind(results: dict) -> dict:
    """``{kind: KindSample}`` of a sample's ``{name: result}`` (names as :func:`kind_of` reads them), in
    :data:`~depthutils.analysis.known_facts.KINDS` order."""
    return {k: KindSample(k, {n: r for n, r in results.items() if kind_of(n) == k})
            for k in KINDS if any(kind_of(n) == k for n in results)}


def worked(results: dict) -> dict:
    """The first prompt of each kind (named as the kind itself: the chapter's own, or P1's): the worked example
    that a chapter draws in full, as P1's Fig. 6 does."""
    return {k: results[k] for k in KINDS if k in results}


def sample_facts(results: dict) -> dict:
    """Per kind, the sample's numbers for a chapter's glued prose: ``{kind}_measured``, ``{kind}_n`` (counted),
    and the mean with its bootstrap interval, ``{kind}_mean``, ``{kind}_lo``, ``{kind}_hi`` (two decimals)."""
    out = {}
    for k, sample in by_kind(results).items():
        s = sample.stats()
        out.update({f"{k}_measured": len(sample.results), f"{k}_n": s["n"]})
        out.update({f"{k}_{x}": None if s[x] is None else round(s[x], 2) for x in ("mean", "lo", "hi")})
    return out


def run_sample(prompts: dict, measure, desc: str = "prompts", enough: int | None = None, retry=None) -> dict:
    """``{name: measure(prompt)}`` over ``prompts`` (named as :func:`kind_of` reads them), one kind after another;
    a kind stops once so many of its prompts are not counted (:func:`per_prompt`) that the rest cannot bring it
    to :data:`MIN_PROMPTS`, so that no time is spent on a kind the verdict cannot grade. With ``enough``, a kind
    stops once that many of its prompts are counted, or once the rest cannot bring it to that many: a sample drawn
    larger than it grades, so that one prompt that is not counted does not end its kind.

    With ``retry`` (integrated gradients at twice the budget), a prompt whose layer sums miss completeness is
    measured once more by ``retry`` and the second result is kept, whatever it says, with ``meta["retried"]``
    holding the first one's completeness gap: the prompts that miss are the sharpest integrands, not a random few
    (:mod:`depthutils.book.claims.context.runs`), so each one dropped leaves a kind of prompt out of the sample."""
    out = {}
    target = MIN_PROMPTS if enough is None else enough
    for kind in dict.fromkeys(kind_of(n) for n in prompts):
        names = [n for n in prompts if kind_of(n) == kind]
        missed = counted = 0
        for name in progress(names, f"{desc}: {KINDS.get(kind, kind)}"):
            if len(names) - missed < target or (enough is not None and counted >= enough):
                break
            r = measure(prompts[name])
            why = per_prompt(r)[1]
            if retry is not None and why is not None and why.startswith("completeness"):
                first = r.facts()["completeness"]
                r = retry(prompts[name])
                r.meta["retried"] = {"first_completeness": first}
            out[name] = r
            dropped = per_prompt(r)[1] is not None
            missed, counted = missed + dropped, counted + (not dropped)
    return out


def _flatten(results: dict) -> dict:
    """``{name: result}`` from a chapter's dict, or from a real-model section's ``{kind: KindSample}``."""
    out = {}
    for name, r in results.items():
        out.update(r.results if isinstance(r, KindSample) else {name: r})
    return out


@dataclass
class SampleVerdict(Verdict):
    """A chapter 4 or 5 verdict, with what its sample dropped: per kind's label, its :class:`Drops` (``drops``)
    and its grade with the dropped prompts counted at the favourable and at the unfavourable end of the scale
    (``bounds``: ``(grade, favourable, unfavourable)``, :meth:`KindSample.bounds`); ``either``: the claim's
    outcome at each end."""

    drops: dict = field(default_factory=dict)
    bounds: dict = field(default_factory=dict)
    either: tuple = ()


def verdict(results: dict, what: str, facts: FactPrompts | None = None) -> SampleVerdict:
    """Chapters 4 and 5: per kind of prompt, the mean over its prompts of the relative depth of the deepest layer
    at which a context position still matters, graded with its bootstrap interval; the kinds are combined (shown
    if every kind is, not shown if one is, mixed otherwise). Beside it, per kind, the prompts it dropped and the
    grade they could have given (:meth:`KindSample.bounds`).

    ``results``: name → result (``"arithmetic"``, ``"multihop"``, ``"multihop_2"`` …), or kind → :class:`KindSample`.
    ``facts``: the :func:`depthutils.analysis.known_facts.prompts_for` that chose the prompts, and the kinds it
    tried. With ``facts``, a kind with fewer than :data:`MIN_PROMPTS` counted prompts is *not tested*, with the
    model's accuracy on it; without, results alone (a test's) are graded however many they are, one prompt on
    its point, with no interval."""
    c = CLAIMS["context"]
    sampled = facts is not None
    rows = {"prompts the model answers": " ".join(facts.sentence(k) for k in facts.kinds())} if sampled else {}
    grouped = {}
    for name, r in _flatten(results).items():
        grouped.setdefault(kind_of(name), {})[name] = r
    grades, parts, values, notes, drops, bounds, ends = [], [], [], [], {}, {}, []
    for kind in dict.fromkeys([*(facts.kinds() if sampled else []), *grouped]):
        sample = KindSample(kind, grouped.get(kind, {}))
        label, s = KINDS.get(kind, kind), sample.stats()
        drops[label] = sample.drops()
        b = sample.bounds(sampled) if s["dropped"] else None
        if s["dropped"]:
            gap = any(why.startswith("completeness") for why in s["dropped"].values())
            many = "s" * (len(s["dropped"]) > 1)
            notes.append(f"{label}: {len(s['dropped'])} prompt{many} not informative (not counted): " + "; ".join(
                f"{name}, {why}" for name, why in s["dropped"].items()) + (
                " (ours: past that gap the attribution is not the integral it stands for; more nodes, or "
                "rule=\"adaptive\", close it)." if gap else "."))
            ends.append(f"{label}: {_bound_text(b['favourable'])} with every one at {_end(sample, 0)}, "
                        f"{_bound_text(b['unfavourable'])} at {_end(sample, 1)}")
        either = (f", {len(s['dropped'])} dropped (at either end of the scale: {b['favourable'][3]}, "
                  f"{b['unfavourable'][3]})") if s["dropped"] else ""
        unrun = [n for n in (facts.prompts if sampled else {}) if kind_of(n) == kind and n not in grouped.get(kind, {})]
        if unrun:
            notes.append(f"{label}: {len(unrun)} of its {len(unrun) + len(grouped.get(kind, {}))} prompts were not "
                         "measured: the run stops a kind once it has the counted prompts its sample needs, or can "
                         f"no longer reach them ({MIN_PROMPTS} for a verdict; ours: a kind that cannot be graded, or "
                         "a prompt past the sample's size, is not worth its cost).")
        if not s["n"] or (sampled and s["n"] < MIN_PROMPTS):
            grades.append("not tested")
            bounds[label] = ("not tested", *((b["favourable"][3], b["unfavourable"][3]) if b else ("not tested",) * 2))
            parts.append(f"{label}: not tested ({s['n']} prompt{'' if s['n'] == 1 else 's'} counted)")
            values.append(parts[-1] + either)
            why = facts.sentence(kind) if facts is not None else ""
            notes.append(f"The {label} prompts are not graded: {s['n']} counted, " +
                         (f"fewer than the {MIN_PROMPTS} a sample needs (ours: below ten, a bootstrap interval over "
                          "prompts rests on too few distinct resamples). " if sampled else "none to grade. ") + why)
            continue
        g = grade(s["mean"], s["lo"], s["hi"], c.shown.value, c.against.value)
        grades.append(g)
        bounds[label] = (g, *((b["favourable"][3], b["unfavourable"][3]) if b else (g, g)))
        value = (f"mean {interval_text(s['mean'], s['lo'], s['hi'])} over {s['n']} prompts" if s["n"] > 1
                 else f"{s['mean']:.2f} (one prompt: no interval)")
        parts.append(f"{label}: {value}" + (f", per prompt {', '.join(f'{v:.2f}' for v in s['values'])}"
                                            if 1 < s["n"] <= 40 else "") + f" ({g})")
        values.append(f"{label}: {value}{either}")
    outcome = _combined(grades)
    either = tuple(_combined(b[i] for b in bounds.values()) for i in (1, 2))
    if ends:
        notes.append("Dropped prompts at either end of the scale (ours: the bounds of what they could do to the grade, "
                     "had they been counted at the shallowest depth they could take, which favours the claim most, "
                     "or at the deepest, which favours it least): " + "; ".join(ends) + f". The claim would then be "
                     f"{either[0]} at the one end and {either[1]} at the other: the drops " +
                     ("cannot change its grade." if either[0] == either[1] == outcome else "could change its grade."))
    statistic = (f"per prompt, the relative depth of the deepest layer at which {CONTEXT_MEASURES.get(what, what)} at "
                 "a context position is still more than 10% of its largest value (ours: what counts as mattering)")
    criterion = (f"{statistic}; per kind of prompt (arithmetic, sums of three or more numbers where tried, two-hop), its mean over the kind's prompts with its "
                 f"{100 * LEVEL:.0f}% bootstrap interval over prompts (ours: the mean, because the thresholds are "
                 f"relative depths): shown if the interval lies at or below {c.shown.value} ({c.shown.source}), not "
                 f"shown if it lies wholly above {c.against.value} ({c.against.source}), mixed otherwise. The claim "
                 f"is shown if every kind is, not shown if one is, mixed otherwise. A kind needs at least {MIN_PROMPTS} "
                 "counted prompts that the model answers (on an embedded model: the chapter's and others held out of "
                 "its training).")
    v = verdict_of(c, outcome, "; ".join(parts) + f" ({what}).", notes, value="; ".join(values), rows=rows,
                 criterion=criterion)
    return SampleVerdict(**vars(v), drops=drops, bounds=bounds, either=either)


def _combined(grades) -> str:
    """The kinds' grades combined as the claim's: its worst tested grade (*not tested* if none is)."""
    tested = [g for g in grades if g != "not tested"]
    return max(tested, key=OUTCOMES.index) if tested else "not tested"


def _bound_text(bound) -> str:
    mean, lo, hi, g = bound
    return g if mean is None else f"mean {interval_text(mean, lo, hi)} ({g})"


def _end(sample: KindSample, side: int) -> str:
    """The end of the scale its dropped prompts were put at, in words (one number when they share it)."""
    ends = sorted({extremes(sample.results[n])[side] for n in sample.stats()["dropped"]})
    return " or ".join(f"{e:.2f}" for e in ends)


def drop_table(verdicts: dict) -> Markdown:
    """Per model (``{name: SampleVerdict}``, the embedded model's then the real models' that ran) and kind: the
    prompts drawn (measured), graded and dropped (for completeness, after the retry; for no position mattering),
    the retries at twice the budget and how many they recovered, and the grade beside the grades with the dropped
    prompts counted at either end of the scale (:meth:`KindSample.bounds`)."""
    lines = ["| model | kind | drawn | graded | dropped: completeness | dropped: no position matters | retried at "
             "twice the budget: recovered | grade (drops at the favourable end, at the other) |", "|" + "---|" * 8]
    for name, v in verdicts.items():
        for label, d in getattr(v, "drops", {}).items():
            g, fav, unfav = v.bounds[label]
            either = f"{g} (no drop)" if not (d.completeness + d.no_position) else f"{g} ({fav}, {unfav})"
            lines.append(f"| {name} | {label} | {d.drawn} | {d.graded} | {d.completeness} | {d.no_position} | "
                         f"{d.retried}: {d.recovered} | {either} |")
    return Markdown("\n".join(lines))
