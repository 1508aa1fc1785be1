"""Chapters 4 and 5's sample and its grading: per prompt the deepest layer at which a context position still
matters, per kind of prompt the mean with its bootstrap interval, and the verdict (see
:mod:`depthutils.book.claims.context`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from depthutils.analysis.known_facts import KINDS, FactPrompts
from depthutils.book.claim_table import CLAIMS, COMPLETENESS_LIMIT, LEVEL, OUTCOMES
from depthutils.book.grading import Verdict, _verdict, grade, interval_text
from depthutils.core.progress import progress
from depthutils.core.results import bootstrap
from depthutils.measures.integrated_gradients import IGResult

__all__ = ["CONTEXT_MEASURES", "MIN_PROMPTS", "KindSample", "by_kind", "verdict", "kind_of", "per_prompt",
           "run_sample", "sample_facts", "sample_mean", "worked"]

#: what chapters 4 and 5 measure at a context position, by the ``what`` they pass to :func:`context`
CONTEXT_MEASURES = {"erasing the residual": "the effect on the answer of erasing the residual (replacing it by "
                                            "its mean)",
                    "the |attribution|": "the |integrated-gradients attribution| to the answer"}
#: a kind of prompt is graded only on at least this many counted prompts (ours: below ten, a percentile bootstrap
#: over prompts rests on too few distinct resamples to say where the mean lies)
MIN_PROMPTS = 10


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
        return None, f"completeness gap {share:.2f} > {COMPLETENESS_LIMIT}"
    if f["deepest_rel"] is None:
        return None, "no context position ever matters"
    return float(f["deepest_rel"]), None


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


def run_sample(prompts: dict, measure, desc: str = "prompts", enough: int | None = None) -> dict:
    """``{name: measure(prompt)}`` over ``prompts`` (named as :func:`kind_of` reads them), one kind after another;
    a kind stops once so many of its prompts are not counted (:func:`per_prompt`) that the rest cannot bring it
    to :data:`MIN_PROMPTS`, so that no time is spent on a kind the verdict cannot grade. With ``enough``, a kind
    stops once that many of its prompts are counted, or once the rest cannot bring it to that many: a sample drawn
    larger than it grades, so that one prompt that is not counted does not end its kind."""
    out = {}
    target = MIN_PROMPTS if enough is None else enough
    for kind in dict.fromkeys(kind_of(n) for n in prompts):
        names = [n for n in prompts if kind_of(n) == kind]
        missed = counted = 0
        for name in progress(names, f"{desc}: {KINDS.get(kind, kind)}"):
            if len(names) - missed < target or (enough is not None and counted >= enough):
                break
            out[name] = measure(prompts[name])
            dropped = per_prompt(out[name])[1] is not None
            missed, counted = missed + dropped, counted + (not dropped)
    return out


def _flatten(results: dict) -> dict:
    """``{name: result}`` from a chapter's dict, or from a real-model section's ``{kind: KindSample}``."""
    out = {}
    for name, r in results.items():
        out.update(r.results if isinstance(r, KindSample) else {name: r})
    return out


def verdict(results: dict, what: str, facts: FactPrompts | None = None) -> Verdict:
    """Chapters 4 and 5: per kind of prompt, the mean over its prompts of the relative depth of the deepest layer
    at which a context position still matters, graded with its bootstrap interval; the kinds are combined (shown
    if every kind is, not shown if one is, mixed otherwise).

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
    grades, parts, values, notes = [], [], [], []
    for kind in dict.fromkeys([*(facts.kinds() if sampled else []), *grouped]):
        label, s = KINDS.get(kind, kind), KindSample(kind, grouped.get(kind, {})).stats()
        if s["dropped"]:
            gap = any(why.startswith("completeness") for why in s["dropped"].values())
            many = "s" * (len(s["dropped"]) > 1)
            notes.append(f"{label}: {len(s['dropped'])} prompt{many} not informative (not counted): " + "; ".join(
                f"{name}, {why}" for name, why in s["dropped"].items()) + (
                " (ours: past that gap the attribution is not the integral it stands for; more nodes, or "
                "rule=\"adaptive\", close it)." if gap else "."))
        unrun = [n for n in (facts.prompts if sampled else {}) if kind_of(n) == kind and n not in grouped.get(kind, {})]
        if unrun:
            notes.append(f"{label}: {len(unrun)} of its {len(unrun) + len(grouped.get(kind, {}))} prompts were not "
                         "measured: the run stops a kind once it has the counted prompts its sample needs, or can "
                         f"no longer reach them ({MIN_PROMPTS} for a verdict; ours: a kind that cannot be graded, or "
                         "a prompt past the sample's size, is not worth its cost).")
        if not s["n"] or (sampled and s["n"] < MIN_PROMPTS):
            grades.append("not tested")
            parts.append(f"{label}: not tested ({s['n']} prompt{'' if s['n'] == 1 else 's'} counted)")
            values.append(parts[-1])
            why = facts.sentence(kind) if facts is not None else ""
            notes.append(f"The {label} prompts are not graded: {s['n']} counted, " +
                         (f"fewer than the {MIN_PROMPTS} a sample needs (ours: below ten, a bootstrap interval over "
                          "prompts rests on too few distinct resamples). " if sampled else "none to grade. ") + why)
            continue
        g = grade(s["mean"], s["lo"], s["hi"], c.shown.value, c.against.value)
        grades.append(g)
        value = (f"mean {interval_text(s['mean'], s['lo'], s['hi'])} over {s['n']} prompts" if s["n"] > 1
                 else f"{s['mean']:.2f} (one prompt: no interval)")
        parts.append(f"{label}: {value}" + (f", per prompt {', '.join(f'{v:.2f}' for v in s['values'])}"
                                            if 1 < s["n"] <= 40 else "") + f" ({g})")
        values.append(f"{label}: {value}")
    tested = [g for g in grades if g != "not tested"]
    outcome = max(tested, key=OUTCOMES.index) if tested else "not tested"
    statistic = (f"per prompt, the relative depth of the deepest layer at which {CONTEXT_MEASURES.get(what, what)} at "
                 "a context position is still more than 10% of its largest value (ours: what counts as mattering)")
    criterion = (f"{statistic}; per kind of prompt (arithmetic, sums of three or more numbers where tried, two-hop), its mean over the kind's prompts with its "
                 f"{100 * LEVEL:.0f}% bootstrap interval over prompts (ours: the mean, because the thresholds are "
                 f"relative depths): shown if the interval lies at or below {c.shown.value} ({c.shown.source}), not "
                 f"shown if it lies wholly above {c.against.value} ({c.against.source}), mixed otherwise. The claim "
                 f"is shown if every kind is, not shown if one is, mixed otherwise. A kind needs at least {MIN_PROMPTS} "
                 "counted prompts that the model answers (on an embedded model: the chapter's and others held out of "
                 "its training).")
    return _verdict(c, outcome, "; ".join(parts) + f" ({what}).", notes, value="; ".join(values), rows=rows,
                    criterion=criterion)
