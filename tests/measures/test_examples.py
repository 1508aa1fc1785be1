"""Every registered measurement's example (:mod:`depthutils.measures.example`): it runs on a small model, gives
the measurement's result, and its cost, predicted from the example's ``work`` through the one cost signature,
counts the layer-passes the counter sees (what ``plan --check`` and the remote tests rely on). The counter's unit
is the longest sequence it saw; the tolerance is PLAN_PASSES_TOL's."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import PLAN_PASSES_TOL, build_tiny

from depthutils.core.results import Result
from depthutils.cost.accounting import Cost, Shape
from depthutils.measures import MEASUREMENTS
from depthutils.perf.counting import Counter


@pytest.mark.parametrize("name", list(MEASUREMENTS))
def test_every_example_runs_and_its_cost_counts_it(tiny, tiny_root, name):
    handle, _ = tiny("llama")
    s = Shape.from_config(json.loads((build_tiny("llama", tiny_root) / "config.json").read_text()))
    m = MEASUREMENTS[name]
    ex = m.example(handle)
    json.dumps(ex.work)  # plain numbers and lists: plan --check saves it
    counter = Counter(handle)
    try:
        got = ex.run()
    finally:
        counter.close()
    assert isinstance(got, (Result, np.ndarray)), type(got)
    c = m.predict(s, ex.work, "float32")
    assert isinstance(c, Cost) and c.peak > 0
    counted, pred = counter.layer_passes, c.layer_passes
    assert counted > 0
    # greedy decoding may stop before its last step (an end of text): the plan counts every step, one layer call
    # of a token per layer each, in the counter's unit (the longest sequence seen)
    stops_early = c.gen_steps * s.layers / counter.longest
    assert counted * (1 - PLAN_PASSES_TOL) <= pred <= counted * (1 + PLAN_PASSES_TOL) + stops_early, (counted, pred)
