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
