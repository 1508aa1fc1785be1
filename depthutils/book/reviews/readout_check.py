"""Before the early exit's grade counts the tuned readout: does it beat the raw lens at every layer, on the prompts
it is graded on? (Issue 75: a readout fitted on other text kept fewer answers than the raw lens, so a grade that
counts an answer as lost only when both readouts lose it fell back to the raw lens.)

On the answer tokens of each set of prompts an early exit was measured on (:class:`EarlyExitResult`, with a tuned
readout), per layer ``l = 0 … L−1``:

* ``KL(q_L ‖ q_l)`` of the raw lens and ``KL(q_L ‖ q̃_l)`` of the tuned readout, in nats, the model's output first
  (the tuned lens's objective; the reverse of the logit lens's ``KL(q_l ‖ q_L)``, the lens chapter's direction),
  each a mean over the set's prompts of the mean over a prompt's answer tokens;
* the answers each keeps: the answer tokens the full model gets right that the readout on ``h_l`` gets right too,
  summed over the set's prompts.

The readout *beats* the raw lens at a layer when its KL is lower and it keeps at least as many answers (ours: a
tie in answers kept, such as none kept by either on the embedding, is not a loss; a tie in KL is not a win). The
early exit's grade counts only where it beats the raw lens at every layer on every set of the model's prompts, and
is *not tested* otherwise (:func:`depthutils.book.reviews.early_exit.verdict`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from depthutils.measures.early_exit import EarlyExitResult

__all__ = ["ReadoutCheck", "readout_checks", "passes", "sentence", "summary"]


@dataclass(frozen=True)
class ReadoutCheck:
    """The readout check on one set of prompts (see the module's docstring): per layer ``[L]``, ``kl`` and
    ``tuned_kl`` (nats), ``kept`` and ``tuned_kept`` (answer tokens), over ``prompts`` prompts whose full model gets
    ``correct`` answer tokens right."""

    name: str
    kl: np.ndarray
    tuned_kl: np.ndarray
    kept: np.ndarray
    tuned_kept: np.ndarray
    prompts: int
    correct: int

    @property
    def beats(self) -> np.ndarray:
        """``[L]`` booleans: the tuned readout beats the raw lens at layer ``l``."""
        return (self.tuned_kl < self.kl) & (self.tuned_kept >= self.kept)

    @property
    def passed(self) -> bool:
        """Whether it beats the raw lens at every layer."""
        return bool(self.beats.all())

    def failing(self) -> list[int]:
        """The layers where it does not beat the raw lens."""
        return [int(l) for l in np.flatnonzero(~self.beats)]

    def table(self) -> str:
        """The check, one aligned row per layer."""
        head = ("layer", "KL(q_L‖q_l) raw", "KL(q_L‖q̃_l) tuned", "kept raw", "kept tuned", "beats")
        rows = [(f"h_{l}", f"{self.kl[l]:.2f}", f"{self.tuned_kl[l]:.2f}", f"{self.kept[l]:.0f}",
                 f"{self.tuned_kept[l]:.0f}", "pass" if self.beats[l] else "FAIL") for l in range(len(self.kl))]
        widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
        return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in (head, *rows))


def readout_checks(results: dict) -> dict[str, ReadoutCheck]:
    """The readout check of each :class:`EarlyExitResult` of ``results`` (``{name: result}``, other results passed
    over), by name; empty when one was measured without a tuned readout."""
    exits = {k: r for k, r in results.items() if isinstance(r, EarlyExitResult)}
    if not exits or not all(np.isfinite(r.tuned_kl_by_prompt).all() for r in exits.values()):
        return {}
    return {k: ReadoutCheck(k, r.kl_by_prompt.mean(0), r.tuned_kl_by_prompt.mean(0), r.kept_at_by_prompt.sum(0),
                            r.tuned_kept_at_by_prompt.sum(0), len(r.kl_by_prompt),
                            int(round(float(r.correct_by_prompt.sum()))))
            for k, r in exits.items()}


def passes(checks: dict) -> bool:
    """Whether the tuned readout beats the raw lens at every layer on every set (False without a check)."""
    return bool(checks) and all(c.passed for c in checks.values())


def sentence(checks: dict) -> str:
    """The checks' outcome in one sentence."""
    if not checks:
        return "No tuned readout was measured, so there is no readout check."
    sets = "; ".join(f"{c.name}: {c.prompts} prompt{'s' * (c.prompts != 1)}, {c.correct} answer "
                     f"token{'s' * (c.correct != 1)} the full model gets right" for c in checks.values())
    if passes(checks):
        return (f"The tuned readout beats the raw lens at every layer on every set graded ({sets}): a lower "
                "KL(q_L ‖ ·) and at least as many answers kept.")
    where = "; ".join(f"on {c.name} not at {', '.join(f'h_{l}' for l in c.failing())}"
                      for c in checks.values() if not c.passed)
    return (f"The tuned readout does not beat the raw lens at every layer ({where}; a lower KL(q_L ‖ ·) and at "
            f"least as many answers kept are both needed; {sets}).")


def summary(checks: dict) -> str:
    """:func:`sentence`, then each set's table."""
    return "\n".join([sentence(checks)] + [f"{c.name}:\n{c.table()}" for c in checks.values()])
