"""float32 against bfloat16 on a real model: the agreement rule (depthutils.perf.precision) and a small real slice."""
from __future__ import annotations

import pytest

from depthutils import data
from depthutils.book import claims
from depthutils.measures.contributions import contributions
from depthutils.measures.logit_lens import logit_lens
from depthutils.models.handle import load_model
from depthutils.models.real.catalog import cache_root
from depthutils.perf import precision

pytestmark = pytest.mark.slow  # bfloat16 against float32 on a slice of SmolLM2: about two minutes


def _row(outcome, value, prompts=()):
    return {"outcome": outcome, "value": value, "prompts": list(prompts)}


def test_agreement_needs_the_same_verdict_prompts_and_every_value_inside_its_interval():
    f32 = _row("mixed", "0.66 [0.61, 0.77]; on the output 1.2e-01 [1.0e-01, 1.5e-01]")
    assert precision.values(f32["value"]) == [(0.66, 0.61, 0.77), (0.12, 0.10, 0.15)]
    assert precision.agrees(f32, _row("mixed", "0.70 [0.60, 0.80]; 1.4e-01 [1.0e-01, 2.0e-01]")) == (True, "")
    assert precision.agrees(f32, _row("mixed", "0.70 [0.60, 0.80]; 1.6e-01 [1.0e-01, 2.0e-01]")) == \
        (False, "value 2 outside the float32 interval")
    assert precision.agrees(f32, _row("shown", "0.66 [0.61, 0.77]; 1.2e-01 [1.0e-01, 1.5e-01]")) == \
        (False, "verdict mixed -> shown")
    assert precision.agrees(_row("shown", "1", ["a"]), _row("shown", "1", ["b"])) == (False, "other prompts chosen")
    assert precision.values("sums: -0.005 [-0.011, +0.001]") == [(-0.005, -0.011, 0.001)]  # a signed bound


def test_bfloat16_agrees_with_float32_on_a_slice_of_smollm2():
    """Chapters 1 and 3's statistics on a sample of 10 of their 20 GSM8K problems (the lens on every position of
    every layer is most of this test's time): the bfloat16 run's verdict and value agree with the float32 run's
    (its value inside float32's 95% bootstrap interval). The table at the book's N, every chapter and both models:
    ``depthutils.perf.precision.dtype_rows``. Decided when it runs, not when it is collected: the chapters, which run
    first, fetch the model."""
    if not (cache_root() / "smollm2-135m" / "depthutils-manifest.json").exists():
        pytest.skip("SmolLM2-135M is not cached here (the chapters' run under nbval fetches it)")
    prompts = data.load("gsm8k", 10)
    rows = {}
    for dtype in precision.DTYPES:
        lm = load_model("smollm2-135m", dtype=dtype)
        assert lm.dtype_name == dtype
        vs = [claims.contributions.verdict(contributions(lm, prompts, progress_bar=False)),
              claims.logit_lens.verdict(logit_lens(lm, prompts, progress_bar=False))]
        rows[dtype] = [_row(v.outcome, v.value) for v in vs]
        del lm
    for f32, b16 in zip(rows["float32"], rows["bfloat16"]):
        ok, why = precision.agrees(f32, b16)
        assert ok, f"{why}: float32 {f32}, bfloat16 {b16}"
