"""The logit lens of a local model in slices of the vocabulary (``logit_lens.chunked_lens``) against the
plain-PyTorch oracle and the traced per-layer path, with the blocks forced down to one token's layers and the
slices to ``k`` tokens."""
from __future__ import annotations

import importlib

import numpy as np
import oracle
import pytest
import torch
from conftest import ATOL, FAMILIES

import depthutils
from depthutils.core.prompts import encode

ll = importlib.import_module("depthutils.measures.logit_lens")
chunks = importlib.import_module("depthutils.cost.chunks")


@pytest.mark.parametrize("family", FAMILIES)
def test_chunked_lens_equals_the_traced_one_and_the_oracle(tiny, prompts, family, monkeypatch):
    handle, hf = tiny(family)
    monkeypatch.setattr(ll, "LENS_CHUNK_BYTES", 1)  # slices of k tokens: the running max and top-k merge often
    monkeypatch.setattr(chunks, "LENS_ROWS", 1)  # blocks of one token's layers: every block and slice meet
    got = depthutils.logit_lens(handle, prompts, k=5, progress_bar=False)
    ids = [encode(handle.tokenizer, p).input_ids for p in prompts]
    kl, ov = oracle.logit_lens(hf, family, ids, k=5)
    np.testing.assert_allclose(got.kl, kl, atol=ATOL)
    np.testing.assert_allclose(got.overlap, ov, atol=ATOL)
    enc = encode(handle.tokenizer, prompts[2])
    L, T = handle.n_layers, enc.n_tokens
    with torch.no_grad(), handle.trace(enc.input_ids):
        traced = torch.stack(list(ll.read_lens(handle, [handle.layers_input(l) for l in range(L)], 5))).save()
    chunked = ll.prompt_lens(handle, (enc, 5))
    assert chunked.shape == traced.shape == (L, 2, T)
    np.testing.assert_allclose(chunked.numpy(), traced.numpy(), atol=ATOL)
    assert got.kl[:-1].max() > 1e-3


def test_compiled_block_stats_equal_the_eager_ones():
    """The compiled reduction of a block (a real model's lens takes it) against the same function uncompiled, in
    both dtypes, with and without the output distribution of the output-first KL, on blocks of two sizes (one
    compilation serves both)."""
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.bfloat16, torch.float32):
        for t, L, w in ((3, 4, 1000), (2, 5, 77)):
            z = (torch.randn(t * L, w, generator=g) * 10).to(dtype).view(t, L, w)
            final = torch.randn(t, 1, w, generator=g) * 10
            for p in (None, torch.softmax(final, -1)):
                got, want = ll.block_stats(z, final, p), ll.block_stats.eager(z, final, p)
                for a, b in zip(got, want):
                    assert a.shape == b.shape == (t, L) and a.dtype == torch.float32
                    torch.testing.assert_close(a, b, atol=ATOL, rtol=1e-5)
    assert ll.block_stats.compiled is True, "torch.compile failed on this machine: the real models' lens runs eager"


def test_the_compiled_path_of_chunked_lens_equals_the_oracle(tiny, prompts, monkeypatch):
    handle, hf = tiny("llama")
    monkeypatch.setattr(ll, "LENS_FUSED_LOGITS", 0)  # every call compiled, as a real model's
    monkeypatch.setattr(ll, "LENS_CHUNK_BYTES", 64)
    got = depthutils.logit_lens(handle, prompts, k=5, progress_bar=False)
    ids = [encode(handle.tokenizer, p).input_ids for p in prompts]
    kl, ov = oracle.logit_lens(hf, "llama", ids, k=5)
    np.testing.assert_allclose(got.kl, kl, atol=ATOL)
    np.testing.assert_allclose(got.overlap, ov, atol=ATOL)
    assert ll.block_stats.compiled is True
