"""The papers' measurements, one module per measurement, named as in the papers (spec:
``shared/spec/measurements.md``), each with the function of the same name, its ``cost`` and its ``example`` (:mod:`~depthutils.measures.example`); quadrature
(:mod:`~depthutils.measures.quadrature`) and P2's thresholds (:mod:`~depthutils.measures.curves`) apart."""
from __future__ import annotations

import functools
import importlib
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Measurement:
    """One measurement: the module that holds it, and the names there of its function, its cost and its example.

    ``cost(shape, dtype=..., remote=..., **work)`` is every measurement's cost signature: ``work`` is what an
    :class:`~depthutils.measures.example.Example` records of its call."""
    module: str
    function: str
    cost: str = "cost"
    chapter: str | None = None  #: the book's chapter that runs it
    example_name: str = "example"
    runs_remotely: bool = True  #: False: a local model only (on a remote handle it says so in a DepthError)
    #: the claim (a key of :data:`depthutils.book.claim_table.CLAIMS`) that grades it, or ``"feeds <name>"``: it
    #: gives another measurement its input (a baseline, a readout) and is graded through that one
    claim: str = ""

    def _attr(self, name: str) -> Callable:
        return getattr(importlib.import_module(self.module), name)

    def measure(self) -> Callable:
        """The measurement's function (``depthutils.<name>``)."""
        return self._attr(self.function)

    def cost_function(self) -> Callable:
        """The measurement's cost, looked up when called: what the run sizes its batches with is what the plan
        and its check count."""
        return self._attr(self.cost)

    def example(self, model, **options):
        """A small call of the measurement on ``model`` (an :class:`~depthutils.measures.example.Example`);
        ``options`` go to the measurement's function."""
        return self._attr(self.example_name)(model, **options)

    def predict(self, shape, work: dict, dtype: str, remote: bool = False):
        """The cost of an example's call from its ``work``."""
        return self.cost_function()(shape, dtype=dtype, remote=remote, **work)


#: every measurement of the book, one line each: the package root exports each function by its name
MEASUREMENTS = {
    "residual_stream": Measurement("depthutils.measures.residual_stream", "residual_stream", chapter="00", claim="residual_stream"),
    "contributions": Measurement("depthutils.measures.contributions", "contributions", chapter="01", claim="contributions"),
    "norm_growth": Measurement("depthutils.measures.norm_growth", "norm_growth", chapter="01", claim="norm_growth"),
    "massive_clamp": Measurement("depthutils.measures.massive_clamp", "massive_clamp", chapter="01", runs_remotely=False,
                                 claim="massive_clamp"),
    "future_effects": Measurement("depthutils.measures.future_effects", "future_effects", chapter="02", claim="future_effects"),
    "logit_lens": Measurement("depthutils.measures.logit_lens", "logit_lens", chapter="03", claim="logit_lens"),
    "early_exit": Measurement("depthutils.measures.early_exit", "early_exit", chapter="03", claim="early_exit"),
    "tuned_lens": Measurement("depthutils.measures.tuned_lens", "tuned_lens", chapter="03", runs_remotely=False, claim="feeds early_exit"),
    "residual_means": Measurement("depthutils.measures.residual_erasure", "residual_means", "means_cost", chapter="04",
                                  example_name="means_example", claim="feeds residual_erasure"),
    "residual_erasure": Measurement("depthutils.measures.residual_erasure", "residual_erasure", chapter="04", claim="context"),
    "integrated_gradients": Measurement("depthutils.measures.integrated_gradients", "integrated_gradients", chapter="05", claim="context"),
    "depth_score": Measurement("depthutils.measures.depth_score", "depth_score", chapter="06", claim="depth_score"),
    "cross_model_mapping": Measurement("depthutils.measures.cross_model_mapping", "cross_model_mapping", chapter="07", claim="mapping"),
    "effective_depth": Measurement("depthutils.measures.effective_depth", "effective_depth", chapter="09", claim="scale"),
}


#: the measurements called since :func:`depthutils.book.report.start` cleared it, by name: outermost calls only
#: (a measurement another one calls is part of that one's cost), none inside :func:`uncounted`
CALLS: Counter = Counter()
_DEPTH = [0]


def counted(function: Callable) -> Callable:
    """A measurement's function, counting its outermost calls in :data:`CALLS` (the tests check a chapter's run against
    the calls its plan counts)."""
    @functools.wraps(function)
    def measured(*args, **kwargs):
        if _DEPTH[0] == 0:
            CALLS[function.__name__] += 1
        with uncounted():
            return function(*args, **kwargs)
    return measured


@contextmanager
def uncounted():
    """Measurement calls inside are not counted in :data:`CALLS` (a chapter's sections on the real models, which
    its plan for its own models does not cover)."""
    _DEPTH[0] += 1
    try:
        yield
    finally:
        _DEPTH[0] -= 1


def cost_of(name: str) -> Callable:
    """The cost function of measurement ``name`` (a key of :data:`MEASUREMENTS`)."""
    return MEASUREMENTS[name].cost_function()


__all__ = ["Measurement", "MEASUREMENTS", "CALLS", "counted", "uncounted", "cost_of"]
