"""Chapter 0's measurement against hooks on the plain transformers model (tests/oracle.py): the
decomposition h_(l+1) = h_l + a_l + m_l, the raw-module error that post-norm families leave, position 0's
attention share and the residual norms."""
from __future__ import annotations

import numpy as np
import oracle
import pytest
from conftest import ATOL, REAL_EFFECT, zero_tol

import depthutils
from depthutils.book import claims
from depthutils.core.prompts import encode


@pytest.mark.parametrize("family", ["llama", "olmo2", "gemma2"])
def test_residual_stream_against_hooks(tiny, prompts, family):
    handle, hf = tiny(family)
    r = depthutils.residual_stream(handle, prompts, progress_bar=False)
    ref = oracle.residual_stream(hf, family, [encode(handle.tokenizer, p, prepend_bos=True).input_ids for p in prompts])
    L = handle.n_layers
    assert r.error.max() < zero_tol(L)  # the adapter's reading adds up, in every family
    np.testing.assert_allclose(r.raw_error, ref["raw_error"].numpy(), rtol=1e-4, atol=zero_tol(L))
    np.testing.assert_allclose(r.sink, ref["sink"].numpy(), atol=ATOL)
    np.testing.assert_allclose(r.norm0, ref["norm0"].numpy(), rtol=1e-5)
    np.testing.assert_allclose(r.norm_rest, ref["norm_rest"].numpy(), rtol=1e-5)
    if family == "llama":  # the raw outputs are what is added
        assert r.raw_error.max() < zero_tol(L)
    else:  # post-norms: the raw outputs miss what is added
        assert r.raw_error.max() > REAL_EFFECT
    assert np.allclose(r.uniform, np.mean([np.mean(1 / (np.arange(1, n) + 1)) for n in
                                           (encode(handle.tokenizer, p).n_tokens for p in prompts)]))


def test_the_verdict_can_fail(tiny, prompts):
    """Graded on the raw outputs of a post-norm family, the decomposition would be not shown."""
    handle, _ = tiny("olmo2")
    r = depthutils.residual_stream(handle, prompts, progress_bar=False)
    assert claims.residual_stream.verdict(r).outcome == "shown"
    r.error_by_prompt = r.raw_error_by_prompt
    r.with_aggregates()
    v = claims.residual_stream.verdict(r)
    assert v.outcome == "not shown" and "e+" not in v.numbers, v.numbers  # an error of order 1 reads "6", not "6.0e+00"
