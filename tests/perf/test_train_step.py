"""The trainer-step bench table (``depthutils.perf.train_step``): its two routes agree, and the reference is the
loss the trainer computed before (every position's logits)."""
from __future__ import annotations

import pytest


def test_the_bench_times_two_routes_that_agree():
    from depthutils.perf.train_step import train_step

    rows = train_step(layers=(2,), steps=2, warmup=1)
    r = rows[2]
    assert r["reference_ms"] > 0 and r["ours_ms"] > 0 and r["speedup"] == pytest.approx(r["reference_ms"] / r["ours_ms"])
    assert r["loss_diff"] < 1e-5 and r["grad_rel_diff"] < 1e-4
