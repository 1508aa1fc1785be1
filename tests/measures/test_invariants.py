"""The spec's invariants, the shape guard, and the direct-only (local) variant."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import REAL_EFFECT, zero_tol

import depthutils
from depthutils.core.prompts import encode
from depthutils.models.architectures import ShapeError, check_residual, unwrap


@pytest.mark.parametrize("part", ["layer", "attn", "mlp"])
@pytest.mark.parametrize("local,method", [(False, "stack"), (False, "batched"), (True, "batched")])
def test_skipping_nothing_changes_nothing(tiny, prompts, part, local, method):
    """Skipping positions [1, 1) is no intervention: every effect is 0 up to fp32 rounding (the
    intervened rows and the clean row are different batch rows, so not bitwise 0)."""
    handle, _ = tiny("llama")
    got = depthutils.future_effects(handle, prompts, part=part, positions=[1], local=local, method=method)
    upper = np.triu(np.ones_like(got.layer_effect, bool), 1)
    tol = zero_tol(handle.n_layers)
    assert np.abs(got.layer_effect[upper]).max() < tol
    assert np.abs(got.output_effect).max() < tol
    assert np.isnan(got.layer_effect[~upper]).all()


@pytest.mark.parametrize("part", ["layer", "mlp"])
@pytest.mark.parametrize("local,method", [(False, "stack"), (False, "batched"), (True, "batched")])
def test_skipping_one_position_is_far_above_the_zero_tolerance(tiny, prompts, part, local, method):
    """The same call with one position skipped must clear the tolerance by orders of magnitude,
    so a leak in an intervention cannot hide under it."""
    handle, _ = tiny("llama")
    got = depthutils.future_effects(handle, prompts, part=part, positions=[2], local=local, method=method)
    upper = np.triu(np.ones_like(got.layer_effect, bool), 1)
    assert np.nanmax(got.layer_effect[upper]) > max(REAL_EFFECT, 100 * zero_tol(handle.n_layers))


@pytest.mark.parametrize("method", ["stack", "batched"])
def test_the_same_call_twice_is_bitwise_identical(tiny, prompts, method):
    """Exactness where it is real: the same code path on the same batch, twice."""
    handle, _ = tiny("llama")
    runs = [depthutils.future_effects(handle, prompts, positions=[2, 5], method=method) for _ in range(2)]
    np.testing.assert_array_equal(runs[0].layer_effect, runs[1].layer_effect)
    np.testing.assert_array_equal(runs[0].output_effect, runs[1].output_effect)


@pytest.mark.parametrize("family", ["llama", "gpt_neox", "gpt2"])
def test_the_lens_after_the_last_layer_is_the_output(tiny, prompts, family):
    """The lens reads h_0 … h_{L-1} (L rows, the output is the reference, not a row); one step further, the lens
    on h_L, the last layer's output, is the model's own output distribution: KL 0 and overlap 1."""
    import importlib

    ll = importlib.import_module("depthutils.measures.logit_lens")
    handle, _ = tiny(family)
    got = depthutils.logit_lens(handle, prompts)
    assert got.kl.shape == got.overlap.shape == (handle.n_layers,)
    enc = encode(handle.tokenizer, prompts[0])
    with torch.no_grad(), handle.trace(enc.input_ids):
        last = torch.stack(list(ll.read_lens(handle, [handle.layers_output(handle.n_layers - 1)], 5))).save()
    assert last.shape == (1, 2, enc.n_tokens)
    assert float(last[0, 0].abs().max()) < zero_tol(handle.n_layers) and float(last[0, 1].min()) == 1.0


def test_erasing_with_the_original_residual_does_nothing(tiny, prompts):
    handle, _ = tiny("qwen2")
    p = prompts[0]
    T = encode(handle.tokenizer, p).n_tokens
    L = handle.n_layers
    hs = []
    with torch.no_grad(), handle.trace(encode(handle.tokenizer, p).input_ids):
        for l in range(L):
            hs.append(handle.layers_input(l)[0].save())
        hs.append(handle.layers_output(L - 1)[0].save())
    own = torch.stack(hs).numpy()  # [L+1, T, H]: the original residual at every position
    for method in ("stack", "batched"):
        got = depthutils.residual_erasure(handle, p, baseline=own, method=method)
        assert got.effect.shape == (L + 1, T)
        assert np.abs(got.effect).max() < zero_tol(L)
    mean = depthutils.residual_means(handle, prompts)
    assert np.abs(depthutils.residual_erasure(handle, p, baseline=mean).effect).max() > REAL_EFFECT


@pytest.mark.parametrize("family,method", [("llama", "stack"), ("gpt_neox", "stack"), ("llama", "batched")])
def test_integrated_gradients_completeness(tiny, prompts, family, method):
    handle, _ = tiny(family)
    got = depthutils.integrated_gradients(handle, prompts[1], steps=256, method=method)
    delta = got.f_x - got.f_b
    assert np.all(np.abs(delta) > 1e-6), "f(x) - f(b) must be non-zero for the check to mean anything"
    np.testing.assert_array_less(np.abs(got.attribution.sum(1) - delta), 0.05 * np.abs(delta))
    np.testing.assert_allclose(got.completeness_gap, np.abs(got.attribution.sum(1) - delta) / np.abs(delta))


def test_local_variant_on_adjacent_layers_equals_the_propagated_one(tiny, prompts):
    """For j = s + 1 nothing lies between s and j, so the direct and total effects coincide."""
    handle, _ = tiny("llama")
    kw = dict(positions=[4, 9])
    full = depthutils.future_effects(handle, prompts[2:], **kw)
    local = depthutils.future_effects(handle, prompts[2:], local=True, **kw)
    L = handle.n_layers
    for s in range(L - 1):
        assert local.layer_effect[s, s + 1] == pytest.approx(full.layer_effect[s, s + 1], abs=1e-5)
    assert np.abs(local.output_effect).max() < zero_tol(L)  # future mode: no direct path from p < t to p ≥ t
    all_local = depthutils.future_effects(handle, prompts[2:], local=True, mode="all")
    assert np.all(all_local.output_effect > REAL_EFFECT)


def test_unwrap_never_takes_batch_row_zero_of_a_tensor():
    x = torch.randn(2, 5, 8)
    assert unwrap(x) is x
    assert unwrap((x, None)) is x
    with pytest.raises(ShapeError):
        check_residual(x[0], 2, 5)


def test_shape_guard_catches_output_zero(tiny, prompts, monkeypatch):
    """If a layer output were read as output[0] (batch row 0), every measurement must fail loudly."""
    handle, _ = tiny("llama")
    monkeypatch.setattr(type(handle), "layers_output", lambda self, l: self.layer(l).output[0])
    with pytest.raises(ShapeError):
        depthutils.contributions(handle, prompts[:1])
    with pytest.raises(ShapeError):
        depthutils.future_effects(handle, prompts[:1], positions=[2], method="batched")
    monkeypatch.setattr(type(handle), "layers_input", lambda self, l: self.layer(l).input[0])  # the lens reads inputs
    with pytest.raises(ShapeError):
        depthutils.logit_lens(handle, prompts[:1])


def test_shape_guard_catches_output_zero_on_the_fast_path(tiny, prompts, monkeypatch):
    import depthutils.models.stack

    handle, _ = tiny("llama")
    monkeypatch.setattr(depthutils.models.stack, "unwrap", lambda value: value[0])
    for call in (lambda: depthutils.future_effects(handle, prompts[:1], positions=[2], method="stack"),
                 lambda: depthutils.residual_erasure(handle, prompts[0], baseline=np.zeros((4, 32)), method="stack"),
                 lambda: depthutils.integrated_gradients(handle, prompts[0], steps=2, method="stack")):
        with pytest.raises(ShapeError):
            call()


def test_gauss_rule_converges_faster_than_p1s_riemann_sum(tiny, prompts):
    """Against a converged reference (Gauss–Legendre, K = 64), 16 Gauss nodes beat 256 Riemann points;
    both rules agree on f(b) and satisfy completeness."""
    handle, _ = tiny("llama")
    ref = depthutils.integrated_gradients(handle, prompts[1], steps=64, rule="gauss")
    riemann = depthutils.integrated_gradients(handle, prompts[1], steps=256)
    gauss = depthutils.integrated_gradients(handle, prompts[1], steps=16, rule="gauss")
    err = lambda r: np.abs(r.attribution - ref.attribution).max() / np.abs(ref.attribution).max()  # noqa: E731
    assert err(gauss) < err(riemann)
    assert err(riemann) > 1e-4  # the Riemann sum's O(1/K) error is real, so the comparison means something
    np.testing.assert_allclose(gauss.f_b, riemann.f_b, atol=zero_tol(handle.n_layers))
    assert gauss.completeness_gap.max() < 1e-3
