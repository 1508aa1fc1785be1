"""One truth for every family: what the adapter calls a sublayer's contribution is what the layer adds,
and the lens at the last layer is the model's own output distribution (tiny random models, fp32)."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import ATOL, FAMILIES, REAL_EFFECT, build_tiny

import depthutils
from depthutils.core.prompts import Prompt, encode

TEXT = "The spouse of the performer of Imagine is Yoko Ono. 5 + 7 + 5 = 17"


@pytest.fixture(scope="module")
def loaded(tiny_root):
    from transformers import AutoModelForCausalLM

    cache = {}

    def get(family):
        if family not in cache:
            path = build_tiny(family, tiny_root)
            cache[family] = (depthutils.load_model(str(path), device="cpu", dtype="float32"),
                             AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval())
        return cache[family]
    return get


def read(handle, ids):
    """h_l, a_l, m_l, h_{l+1} of every layer and the lens at the last layer, through the adapter."""
    rows = []
    with torch.no_grad(), handle.trace(ids):
        for l in range(handle.n_layers):
            h = handle.layers_input(l).save()
            a = handle.attentions_output(l).save()
            m = handle.mlps_output(l).save()
            out = handle.layers_output(l).save()
            rows.append((h, a, m, out))
        lens = handle.lens(out).float().log_softmax(-1).save()
    return rows, lens


def identity_error(handle, ids) -> float:
    rows, _ = read(handle, ids)
    return max(float((out - h - a - m).abs().max()) for h, a, m, out in rows)


@pytest.mark.parametrize("family", FAMILIES)
def test_sublayers_add_up_and_the_last_lens_is_the_output(loaded, family):
    handle, hf = loaded(family)
    ids = encode(handle.tokenizer, Prompt(TEXT, len(TEXT))).input_ids
    rows, lens = read(handle, ids)
    assert all(x.shape == rows[0][0].shape for row in rows for x in row)
    assert max(float((out - h - a - m).abs().max()) for h, a, m, out in rows) < ATOL
    assert min(float(a.abs().max()) for _, a, _, _ in rows) > REAL_EFFECT  # both sublayers really write
    with torch.no_grad():
        want = hf(ids).logits.float().log_softmax(-1)
    assert float((lens.exp() - want.exp()).abs().max()) < ATOL  # the spec's check, on probabilities
    assert float((lens - want).abs().max()) < 10 * ATOL  # and on log-probabilities


def _without(handle, **change):
    """The same model under an adapter that lacks one of its family's corrections."""
    clone = object.__new__(type(handle))
    clone.__dict__.update(handle.__dict__)
    clone.arch = dataclasses.replace(handle.arch, **change)
    if "residual_scale" in change:
        clone.residual_scale = 1.0
    return clone


@pytest.mark.parametrize("family,change", [
    ("falcon", dict(inplace=False)),                    # its MLP output is added into in place
    ("granite", dict(residual_scale=None)),             # residual_multiplier
    ("gemma2", dict(attn="self_attn", mlp="mlp")),      # raw outputs before the post-norms (what nnterp reads)
    ("olmo2", dict(attn="self_attn", mlp="mlp")),
])
def test_each_correction_is_needed(loaded, family, change):
    """Without its correction the identity breaks: the tests above can fail."""
    handle, _ = loaded(family)
    ids = encode(handle.tokenizer, Prompt(TEXT, len(TEXT))).input_ids
    assert identity_error(handle, ids) < ATOL
    assert identity_error(_without(handle, **change), ids) > REAL_EFFECT


@pytest.mark.parametrize("family", ["gemma2", "granite", "cohere"])
def test_the_lens_needs_the_models_logit_transform(loaded, family):
    handle, hf = loaded(family)
    ids = encode(handle.tokenizer, Prompt(TEXT, len(TEXT))).input_ids
    _, lens = read(_without(handle, logits=None), ids)
    with torch.no_grad():
        want = hf(ids).logits.float().log_softmax(-1)
    assert float((lens - want).abs().max()) > REAL_EFFECT  # log-probabilities: tiny models are near uniform


def test_every_adapter_is_tested_here():
    from depthutils.models.handle import ARCHITECTURES

    assert set(FAMILIES) == set(ARCHITECTURES)  # the unsupported-family message lists exactly these
