"""Chapter 2's shared-prefix fast path (``depthutils.measures.shared_prefix``) against the per-layer fast path and
the plain-PyTorch oracle, on every family, with groups and output chunks forced small; and the work it
saves, counted with bench's hooks (not timed)."""
from __future__ import annotations

import numpy as np
import oracle
import pytest
from conftest import ATOL, FAMILIES

from depthutils.core.prompts import encode
from depthutils.cost import chunks
from depthutils.measures import shared_prefix
from depthutils.measures.future_effects import fold, run, work
from depthutils.models import stack
from depthutils.perf.counting import Counter


def _both(handle, prompt, ts, part, mode):
    """(shared, per-layer) ``(D, O)`` of one prompt, and the shared path's layer-tokens."""
    enc = encode(handle.tokenizer, prompt)
    L = handle.n_layers
    counter = Counter(handle)
    shared = fold(L, w := work(handle, enc, ts, part=part, mode=mode, fast=True), run(handle, w))
    tokens = counter.tokens
    counter.close()
    per_layer = fold(L, w := work(handle, enc, ts, part=part, mode=mode, fast=True, shared=False),
                        run(handle, w))
    return shared, per_layer, tokens


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("part", ["layer", "attn", "mlp"])
def test_shared_path_equals_the_per_layer_path(tiny, prompts, family, part, monkeypatch):
    handle, _ = tiny(family)
    monkeypatch.setattr(chunks, "GROUP_BYTES", 1)  # one skipped layer per group
    monkeypatch.setattr(chunks, "UNEMBED_BYTES", 1)  # one position per output chunk
    T = encode(handle.tokenizer, prompts[2]).n_tokens
    for mode, ts in (("future", [4, 9, 13, T - 3]), ("all", [T])):
        (D, O), (D1, O1), _ = _both(handle, prompts[2], ts, part, mode)
        np.testing.assert_allclose(D, D1, atol=ATOL, err_msg=f"{family} {part} {mode}")
        np.testing.assert_allclose(O, O1, atol=ATOL, err_msg=f"{family} {part} {mode}")
        assert np.nanmax(D) > 1e-3


@pytest.mark.parametrize("family", ["llama", "gemma3_text", "gemma3", "gemma2", "olmo2"])
@pytest.mark.parametrize("part", ["layer", "mlp"])
def test_shared_path_matches_the_oracle_and_does_less(tiny, prompts, family, part):
    """The path is taken on these families (the suffix check holds), matches the oracle with four
    positions, and runs exactly ``Σ_s (layers above s)·(K·T − Σ t + t_max)`` layer-tokens beyond the
    clean run and the suffix check."""
    handle, hf = tiny(family)
    enc = encode(handle.tokenizer, prompts[2])
    T, L = enc.n_tokens, handle.n_layers
    st = stack.Stack(handle, enc.input_ids)
    ts = [3, 7, 12, T - 2]
    assert shared_prefix.applies(st, ts)
    (D, O), _, tokens = _both(handle, prompts[2], ts, part, "future")
    D0, O0 = oracle.future_effects(hf, family, enc.input_ids, ts, part=part)
    np.testing.assert_allclose(D, D0, atol=ATOL)
    np.testing.assert_allclose(O, O0, atol=ATOL)
    above = sum(L - 1 - s + (part != "layer") for s in range(L))
    shared = above * (len(ts) * T - sum(ts) + max(ts))
    # clean run (L·T) + the suffix check (a few layers: the clean keys and values, then T − T//2 positions)
    extra = tokens - L * T - shared
    check = 2 * T - T // 2
    assert 0 < extra <= L * check and extra % check == 0
    assert shared < above * len(ts) * T  # strictly less than the per-layer path's
