"""P2's metrics on hand-made curves, including the undefined case, and on a model."""
from __future__ import annotations

import numpy as np

import depthutils
from depthutils.effective_depth import EffectiveDepthResult, ed_cos, ed_kl, ed_overlap, ratio


def test_ed_cos_is_the_last_sign_change_to_non_negative():
    assert ed_cos([-0.2, 0.1, -0.3, -0.1, 0.0, 0.2]) == 3
    assert ed_cos([0.1, 0.2, 0.3]) is None
    assert ed_cos([-0.1, -0.2]) is None


def test_ed_kl_is_the_first_layer_below_half_the_max():
    assert ed_kl([8.0, 6.0, 4.1, 3.9, 0.0]) == 3
    assert ed_kl([0.0, 0.0, 0.0]) is None  # 0 < 0.5 * 0 never holds


def test_ed_overlap_is_the_first_layer_above_threshold():
    assert ed_overlap([0.0, 0.2, 0.3, 0.4, 1.0]) == 3
    assert ed_overlap([0.0, 0.1]) is None


def test_ratio_and_undefined():
    assert ratio(20, 28) == 21 / 28
    assert ratio(None, 28) is None
    r = EffectiveDepthResult.from_curves([0.1, 0.2], [1.0, 0.0], [0.0, 1.0])
    assert r.ed("cos") is None and r.ratio("cos") is None and r.ed("kl") == 1 and r.ratio("overlap") == 1.0


def test_effective_depth_on_a_model_uses_both_measurements(tiny, prompts):
    handle, _ = tiny("llama")
    r = depthutils.effective_depth(handle, prompts)
    c = depthutils.contributions(handle, prompts)
    lens = depthutils.logit_lens(handle, prompts)
    np.testing.assert_allclose(r.mean_cos, (c.attn_cos + c.mlp_cos + c.layer_cos) / 3)
    assert r.ed_kl == ed_kl(lens.kl) and r.ed_overlap == ed_overlap(lens.overlap) == handle.n_layers - 1 or r.ed_overlap < handle.n_layers


def test_ratio_draws_are_the_ratios_of_the_resamples():
    """The study's bootstrap reads one curve per draw: the same numbers as resampling the whole result."""
    rng = np.random.default_rng(1)
    n, L = 7, 6
    r = EffectiveDepthResult(meta={}, mean_cos_by_prompt=rng.normal(0, 0.2, (n, L)),
                             kl_by_prompt=rng.gamma(1.0, 1.0, (n, L)), overlap_by_prompt=rng.uniform(0, 0.6, (n, L)),
                             prompt_tokens=rng.integers(5, 50, n)).with_aggregates()
    for metric in ("cos", "kl", "overlap"):
        draws = np.random.default_rng(3)
        want = [r.resample(draws.integers(0, n, n)).ratio(metric) for _ in range(200)]
        want = np.array([np.nan if w is None else w for w in want])
        np.testing.assert_array_equal(r.ratio_draws(metric, 200, seed=3), want)
