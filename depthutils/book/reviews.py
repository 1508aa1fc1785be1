"""Verdicts on the reviewers' questions: experiments P1's reviewers asked for, graded like the papers' claims
(their rows in :mod:`depthutils.book.claim_table` state each question in our words, since reviews are not the
paper)."""
from __future__ import annotations

from depthutils.analysis.early_exit import EarlyExitResult
from depthutils.analysis.known_facts import KINDS, FactPrompts
from depthutils.analysis.norm_growth import NormGrowthResult
from depthutils.book.claim_table import CLAIMS, MIN_HALF
from depthutils.book.grading import Verdict, _verdict, combine, interval_text, judge, not_tested

__all__ = ["norm_growth", "early_exit", "ladder_table", "MIN_CORRECT"]

#: the fewest answer tokens the full model must get right for the share it loses to mean something (ours: below
#: five one token moves the share by more than a fifth)
MIN_CORRECT = 5


def norm_growth(result: NormGrowthResult) -> Verdict:
    """Chapter 1's claim once norm growth is taken out: the second half's mean ‖Δₗ‖ over the first half's."""
    c, f = CLAIMS["norm_growth"], result.facts()
    if f["half_size"] < MIN_HALF:
        return not_tested("norm_growth", f"{f['L']} layers: layers 1–{f['L'] - 1} cannot form two halves of at "
                                         f"least {MIN_HALF} layers each.")
    outcome, value, lo, hi = judge(c, result, c.fact)
    rel, grow = interval_text(f["rel_ratio"]), interval_text(f["growth"])
    return _verdict(c, outcome,
                    f"second half {f['abs_second']:.3f}, first half {f['abs_first']:.3f}, ratio "
                    f"{interval_text(value, lo, hi)}; the residual's norm grows {grow}× from the first half to the "
                    f"second, and the relative contribution's ratio (chapter 1's, position 0 apart) is {rel}.",
                    value=interval_text(value, lo, hi),
                    rows={"norm growth": f"‖hₗ‖ second half over first {grow}; ‖Δₗ‖ / ‖hₗ‖ ratio {rel}"})


def early_exit(results: dict[str, EarlyExitResult], facts: FactPrompts | None = None) -> Verdict:
    """Per set of prompts (``{name: result}``), the share of the full model's correct answer tokens that the
    model without its second half gets wrong; a set where the full model gets fewer than :data:`MIN_CORRECT`
    answer tokens right is not tested, and so are the facts when ``facts`` (the check that chose them) found
    none the model answers."""
    c = CLAIMS["early_exit"]
    outcomes, parts, values, notes = [], [], [], []
    if facts is not None and not facts.prompts:
        outcomes.append("not tested")
        parts.append("facts it knows: not tested")
        notes.append("facts it knows: the model answers none of the sums and two-hop questions it was given. "
                     + " ".join(facts.sentence(k) for k in KINDS))
    for name, r in results.items():
        f = r.facts()
        correct = int(round(float(r.correct_by_prompt.sum())))
        if correct < MIN_CORRECT:
            outcomes.append("not tested")
            parts.append(f"{name}: not tested")
            notes.append(f"{name}: the full model gets {correct} answer token(s) right, fewer than {MIN_CORRECT} "
                         "(ours: below that one token moves the share by more than a fifth), so the share it loses "
                         "says nothing.")
            continue
        outcome, value, lo, hi = judge(c, r, c.fact)
        outcomes.append(outcome)
        parts.append(f"{name}: {interval_text(value, lo, hi)} of {correct} correct answer tokens lost (full model "
                     f"{f['full_gold']:.2f}, second half skipped {f['skip_gold']:.2f} gold accuracy; {outcome})")
        values.append(f"{name} {interval_text(value, lo, hi)}")
    return _verdict(c, combine(outcomes), "; ".join(parts) + ".", notes, value="; ".join(values))


def ladder_table(results: dict, keys: dict[str, str], grade=None) -> str:
    """A Markdown table, one row per model (``{model: result}``, or ``{model: {set: result}}``): each fact of
    ``keys`` (``{fact: column}``) with its 95% bootstrap interval over prompts, and the verdict of ``grade``
    (a function of one model's result(s)) where given."""
    head = ["model", "set", *keys.values()] + (["verdict"] if grade else [])
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, rs in results.items():
        many = rs if isinstance(rs, dict) else {"": rs}
        outcome = grade(rs).outcome if grade else None
        for name, r in many.items():
            f, iv = r.facts(), r.intervals()
            cells = [interval_text(f[k], iv.get(f"{k}_lo"), iv.get(f"{k}_hi")) for k in keys]
            rows.append("| " + " | ".join([f"{model} ({f['L']} layers)", name or "—", *cells]
                                          + ([outcome] if grade else [])) + " |")
    return "\n".join(rows)
