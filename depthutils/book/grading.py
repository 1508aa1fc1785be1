"""The one rule that grades every claim, the verdict it produces, and the chapter's "paper vs this run" table.

:func:`grade` is the one grading rule, applied to a statistic and its bootstrap interval over prompts
(:func:`judge` draws that interval). Four outcomes:

* **shown**: the whole interval lies on the claim's side of the *shown* threshold;
* **not shown**: the whole interval lies past the *against* threshold;
* **mixed**: the interval straddles a threshold, so at this many prompts the run cannot tell (*inconclusive*),
  or, for a claim of several parts, one part is shown and another not (*both ways*, :meth:`Verdict.mixed_kind`);
* **not tested**: the run cannot speak to the claim (one model where two are needed, no group
  the model solves, too few layers to form halves, an undefined statistic). It is never counted
  for or against the claim.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from depthutils.book.claim_table import CLAIMS, LEVEL, OUTCOMES, WHOLE_LAYER, Claim
from depthutils.core.numbers import enclose, interval
from depthutils.core.results import Result


@dataclass
class Verdict:
    """A computed verdict on a paper's claim: the claim, the criterion, the outcome, this run's numbers,
    and what the run could not count (``notes``). Chapters end with one."""

    claim: str
    criterion: str
    outcome: str
    numbers: str
    notes: list = field(default_factory=list)
    key: str = ""
    rows: dict = field(default_factory=dict)  # this run's side of paper rows that have a counterpart here
    value: str = ""  # this run's value of the graded statistic, with its interval (every graded part)
    #: the chapter's other verdicts, whose claim and statistic rows its "paper vs this run" table shows after
    #: this one's (chapter 9: the chain-of-thought and difficulty verdicts beside the size verdict)
    also: list = field(default_factory=list)
    #: the outcomes of the graded parts it combines (every part of every level, where parts are combined twice);
    #: empty for a verdict on one statistic, whose only part is its outcome
    parts: tuple = ()

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    def mixed_kind(self) -> str:
        """Which kind of *mixed* this verdict is: "both ways" when one graded part is shown and another not shown,
        "inconclusive" otherwise (an interval between the thresholds or across one, nothing decided against the
        claim); "" for any other outcome. The parts are :attr:`parts`."""
        if self.outcome != "mixed":
            return ""
        parts = set(self.parts or (self.outcome,))
        return "both ways" if {"shown", "not shown"} <= parts else "inconclusive"


# ------------------------------------------------------------------------------------ the rule

def grade(value, lo, hi, shown: float, against: float, below: bool = True, shown_first: bool = False) -> str:
    """The one grading rule, on a statistic and its interval ``[lo, hi]`` (None: the point decides), widened to hold
    the statistic as the book prints it (:func:`depthutils.core.numbers.enclose`).

    ``below=True`` (smaller favours the claim): *not shown* if the interval lies wholly above ``against``,
    *shown* if it lies at or below ``shown``, *mixed* otherwise; ``below=False`` mirrors it. An undefined
    statistic (None or not finite) is *not tested*: the run cannot speak to the claim.

    The two tests can both hold only when the *shown* threshold lies past the *against* one (a tolerance
    above 0, as in chapter 6). Then ``shown_first`` decides: True, an interval inside the tolerance is
    *shown* even when it also lies wholly past ``against``; False, it is *not shown*.
    """
    if value is None or not np.isfinite(value):
        return "not tested"
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        lo = hi = value
    lo, hi = enclose(value, lo, hi)
    is_shown = hi <= shown if below else lo >= shown
    is_against = lo > against if below else hi < against
    if shown_first and is_shown:
        return "shown"
    return "not shown" if is_against else "shown" if is_shown else "mixed"


def band(result: Result, key: str, level: float = LEVEL) -> tuple[float | None, float | None]:
    """The percentile bootstrap interval over prompts of ``result.facts()[key]`` (None, None without one)."""
    if not result.n_prompts or result.facts()[key] is None:
        return None, None
    lo, hi = result.interval(lambda r: r.facts()[key], level=level)
    return (None, None) if np.isnan(lo) else (float(lo), float(hi))


def judge(claim: Claim, result: Result, key: str, *, shown: float | None = None,
          against: float | None = None) -> tuple[str, float | None, float | None, float | None]:
    """Bootstrap ``result.facts()[key]`` over prompts and grade it against the claim's thresholds (or the
    run's ``shown``/``against``). Returns ``(outcome, value, lo, hi)``."""
    value = result.facts()[key]
    lo, hi = band(result, key)
    s = claim.shown.value if shown is None else shown
    a = claim.against.value if against is None else against
    return grade(value, lo, hi, s, a, claim.below), value, lo, hi


#: :func:`combine`'s rule in the words a criterion states it with
COMBINED = ("shown if every part is, not shown if none is and one at least is not shown, mixed otherwise (both "
            "ways, or inconclusive)")


#: what each kind of *mixed* means (:meth:`Verdict.mixed_kind`)
MIXED_KINDS = {"both ways": "one part of the claim is shown and another is not",
               "inconclusive": "this run's interval does not decide, and nothing is against the claim"}


class Outcome(str):
    """An outcome combined from graded parts (:func:`combine`): the outcome's word, carrying the parts' outcomes
    (``parts``), from which :meth:`Verdict.mixed_kind` tells a *mixed* both ways from an inconclusive one."""

    parts: tuple = ()


def combine(outcomes) -> Outcome:
    """Several graded parts of one claim, by the book's words: the parts that are *not tested* are left out;
    *shown* if all the rest are shown; *not shown* if none is shown and one at least is not shown (nothing
    supports the claim and something contradicts it); *mixed* otherwise, either both ways (a part shown and a
    part not shown) or inconclusive (no part decided against, not every part shown); *not tested* if nothing is
    left. The result carries the parts (a part that was itself combined, by its own parts)."""
    outcomes = list(outcomes)
    tested = [o for o in outcomes if o != "not tested"]
    if not tested:
        word = "not tested"
    elif all(o == "shown" for o in tested):
        word = "shown"
    elif "not shown" in tested and "shown" not in tested:
        word = "not shown"
    else:
        word = "mixed"
    out = Outcome(word)
    out.parts = tuple(p for o in outcomes for p in (getattr(o, "parts", ()) or (str(o),)))
    return out


def interval_text(value, lo=None, hi=None, fmt=".2f") -> str:
    """``"0.66 [0.61, 0.77]"``, ``"0.66"`` without an interval, ``"undefined"`` for None: the package's one interval
    format (:func:`depthutils.core.numbers.interval`: the interval widened to hold its point, no negative zero)."""
    return interval(value, lo, hi, fmt)


def _claim_text(c: Claim) -> str:
    return f"{c.paper} ({c.where}): {c.sentence}"


def verdict_of(c: Claim, outcome: str, numbers: str, notes=(), criterion: str | None = None, rows=None,
             value: str = "", parts=None) -> Verdict:
    """A verdict on claim ``c``; ``value``: this run's value of the claim's statistic, with its interval;
    ``parts``: the outcomes of the graded parts ``outcome`` combines (:attr:`Verdict.parts`; by default those
    :func:`combine` recorded on it)."""
    notes = list(notes) + ([WHOLE_LAYER] if c.whole_layer else [])
    parts = getattr(outcome, "parts", ()) if parts is None else parts
    return Verdict(_claim_text(c), criterion or c.criterion(), str(outcome), numbers, notes, c.key, rows or {}, value,
                   parts=tuple(parts))


def not_tested(key: str, why: str) -> Verdict:
    """A verdict for a run that cannot test claim ``key``, saying why."""
    c = CLAIMS[key]
    return Verdict(_claim_text(c), c.criterion() if c.shown.value is not None else c.statistic, "not tested", why,
                   [], c.key)


def _prompt_text(meta: dict) -> str:
    """How a result's prompts read in the table: a single-prompt result (chapters 4 and 5) by its text and
    answer, as the paper's column gives P1's, so that each of a chapter's prompts has its own entry."""
    p = meta.get("params", {})
    if meta.get("n") == 1 and p.get("prompt") is not None and p.get("answer") is not None:
        text = f"`{p['prompt']}` → {p['answer'].strip()} ({meta['dataset']})"
        return text.replace("|", "\\|")
    return f"N = {meta['n']} ({meta['dataset']})"


def run_models(metas, embedded=lambda name: False) -> str:
    """The models a run's results (their ``meta``) ran on, in words: ``"ladder-8 (8 layers)"``, or ``"ladder-8 (8
    layers, embedded)"`` where ``embedded(name)`` says it is one of the book's own models; "—" for none."""
    return ", ".join(dict.fromkeys(f"{m['model']} ({m['n_layers']} layers{', embedded' * embedded(m['model'])})"
                                   for m in metas if m.get("model"))) or "—"


def paper_vs_run(verdict: Verdict, metas) -> str:
    """The "paper vs this run" table of a verdict's claim: the paper's facts (models, prompts, what its text
    gives) beside this run's, from the results' ``meta`` (a list; "—" where the run has no counterpart); the
    claim in the paper's words beside this run's outcome; and, in a row named by the graded statistic, the
    paper's value of that statistic (:meth:`Claim.paper_says`) beside this run's value with its interval; then
    the same two rows for each of the verdict's companions (:attr:`Verdict.also`), the claim rows then named by
    what each claim is about (:attr:`Claim.question`)."""
    c = CLAIMS[verdict.key]
    prompts = "; ".join(dict.fromkeys(_prompt_text(m) for m in metas if m.get("n")))
    run = {"models": run_models(metas), "prompts": prompts or "—", **verdict.rows}
    rows = {**dict(c.paper_facts), **{k: dict(c.paper_facts).get(k, "—") for k in run}}
    out = [f"| | {c.paper} ({c.where}) | this run |", "|---|---|---|"]
    out += [f"| {k} | {v} | {run.get(k, '—')} |" for k, v in rows.items()]
    for v in [verdict, *verdict.also]:
        c = CLAIMS[v.key]
        label = f"claim on {c.question}" if verdict.also and c.question else "claim"
        out.append(f"| {label} | {c.sentence} | graded in the verdict box below |")
        run_value = v.value or (f"— (not tested: {v.numbers})" if v.outcome == "not tested" else "—")
        out.append(f"| {c.short} | {c.paper_says()} | {run_value} |")
    return "\n".join(out)

