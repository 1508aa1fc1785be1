"""P2's metrics on hand-made curves, including the undefined case, and on a model."""
from __future__ import annotations

import numpy as np

import depthutils
from depthutils.measures.effective_depth import EffectiveDepthResult, ed_cos, ed_kl, ed_overlap, ratio


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
    r = EffectiveDepthResult.from_curves([0.1, 0.2, 0.3], [1.0, 0.4, 0.0], [0.0, 0.5, 1.0])
    assert r.ed("cos") is None and r.ratio("cos") is None and r.ed("kl") == 1 and r.ratio("overlap") == 2 / 3


# P2's released effective-depth functions, written out from ../shared/reference/p2_effective_depth.md: curves of
# length L on h_0 … h_{L-1}, every search over l = 0 … L-2, -1 (or a failure) where none qualifies.
def p2_ed_cos(att_cos, mlp_cos, layer_cos):
    c = [(a + m + y) / 3 for a, m, y in zip(att_cos, mlp_cos, layer_cos)]
    found = -1
    for l in range(len(c) - 1):
        if c[l] < 0 and c[l + 1] >= 0:
            found = l
    return found


def p2_ed_kl(kl, threshold=0.5):
    top = max(kl)
    for l in range(len(kl) - 1):
        if kl[l] < threshold * top:
            return l
    return -1


def p2_ed_overlap(overlap, threshold=0.3):
    for l in range(len(overlap) - 1):
        if overlap[l] > threshold:
            return l
    return -1


def _none(ed):
    return None if ed == -1 else ed


def test_effective_depths_equal_p2s_functions_on_independent_curves():
    """Random curves, and the edge cases where the last entry alone would qualify (P2 never searches it)."""
    rng = np.random.default_rng(0)
    cases = [(rng.normal(0, 0.2, (3, L)), rng.gamma(1.0, 1.0, L), rng.uniform(0, 0.6, L))
             for L in rng.integers(2, 40, 300)]
    cases.append((np.array([[-0.1, -0.1, 0.2]] * 3), np.array([4.0, 3.0, 2.5, 1.0]), np.array([0.0, 0.1, 0.2, 0.9])))
    for cos3, kl, ov in cases:
        assert ed_cos(cos3.mean(0)) == _none(p2_ed_cos(*cos3))
        assert ed_kl(kl) == _none(p2_ed_kl(list(kl)))
        assert ed_overlap(ov) == _none(p2_ed_overlap(list(ov)))
    # the last entry (the lens on h_{L-1}) is never a hit, even when it is the only one that qualifies
    assert ed_kl([4.0, 3.0, 2.5, 1.0]) is None and ed_overlap([0.0, 0.1, 0.2, 0.9]) is None


def test_effective_depth_on_a_model_uses_both_measurements(tiny, prompts):
    handle, _ = tiny("llama")
    r = depthutils.effective_depth(handle, prompts)
    c = depthutils.contributions(handle, prompts)
    lens = depthutils.logit_lens(handle, prompts)
    np.testing.assert_allclose(r.mean_cos, (c.attn_cos + c.mlp_cos + c.layer_cos) / 3)
    assert r.ed_kl == ed_kl(lens.kl) and r.ed_overlap == ed_overlap(lens.overlap)


def test_effective_depth_on_a_model_equals_p2s_functions_on_the_oracle_curves(tiny, prompts):
    """The plain-PyTorch oracle's curves (lens on layer inputs, token means pooled over all prompts' tokens),
    through P2's functions: the same effective depths as the book's."""
    import oracle

    from depthutils.core.prompts import encode

    handle, hf = tiny("llama")
    r = depthutils.effective_depth(handle, prompts, progress_bar=False)
    ids = [encode(handle.tokenizer, p).input_ids for p in prompts]
    c = oracle.contributions(hf, "llama", ids)
    kl, ov = oracle.logit_lens(hf, "llama", ids, k=5)
    assert len(kl) == handle.n_layers
    np.testing.assert_allclose(r.kl, kl, atol=1e-4)
    np.testing.assert_allclose(r.overlap, ov, atol=1e-4)
    assert r.ed_cos == _none(p2_ed_cos(c["attn_cos"], c["mlp_cos"], c["layer_cos"]))
    assert r.ed_kl == _none(p2_ed_kl(list(kl))) and r.ed_overlap == _none(p2_ed_overlap(list(ov)))


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
