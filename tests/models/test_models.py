"""load_model: every family, clear errors, no remote code, no key argument; result files."""
from __future__ import annotations

import inspect
import json

import numpy as np
import pytest
import torch
from conftest import FAMILIES, build_tiny

import depthutils
from depthutils.core.results import Result


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_loads_with_its_adapter(tiny_root, family, prompts):
    handle = depthutils.load_model(str(build_tiny(family, tiny_root)), device="cpu", dtype="float32")
    assert handle.arch.family == family and handle.n_layers == 3
    r = depthutils.contributions(handle, prompts[:1])
    assert r.attn_ratio.shape == (3,) and np.isfinite(r.mlp_cos).all()


def test_trust_remote_code_is_off_and_the_key_is_no_argument():
    sig = inspect.signature(depthutils.load_model)
    assert sig.parameters["trust_remote_code"].default is False
    assert not any("key" in name.lower() for name in sig.parameters)


def test_results_round_trip_with_metadata(tiny, prompts, tmp_path):
    handle, _ = tiny("llama")
    r = depthutils.integrated_gradients(handle, prompts[0], steps=4)
    r.save(tmp_path / "ig")
    back = Result.load(tmp_path / "ig")
    assert type(back) is type(r)
    np.testing.assert_array_equal(back.attribution, r.attribution)
    assert list(back.tokens) == list(r.tokens) and back.f_x == r.f_x
    meta = json.loads((tmp_path / "ig.json").read_text())["meta"]
    assert meta["model"] == handle.name and meta["revision"].startswith("local-")
    assert meta["params"]["steps"] == 4 and meta["versions"]["nnsight"] == "0.8.1"
    assert not list(tmp_path.glob(".*tmp"))  # atomic writes leave no temporary files


def test_the_bf16_unembedding_gets_a_dense_input_on_cpu():
    """Greedy decoding hands the head a [B, 1, H] slice of the last position; torch's bf16 F.linear on such a
    slice runs ~100× slower on a CPU, so the handle's head sees a dense copy (same values)."""
    lm = depthutils.load_model("default", dtype="bfloat16")
    head = lm.hf.get_output_embeddings()
    seen = []
    hook = head.register_forward_hook(lambda module, args, out: seen.append(args[0].stride()))
    try:
        h = torch.randn(3, 7, lm.hf.config.hidden_size, dtype=torch.bfloat16)
        with torch.no_grad():
            got = head(h[:, -1:])
            want = head(h[:, -1:].clone())
    finally:
        hook.remove()
    assert seen[0] == (h.shape[-1], h.shape[-1], 1)
    torch.testing.assert_close(got, want, rtol=0, atol=0)  # one copy of the same values, one kernel


def test_auto_dtype_is_bfloat16_where_the_cpu_computes_it_natively(tiny_root, monkeypatch, prompts):
    """``dtype="auto"``: bfloat16 on a CPU with native bfloat16 (its flags), float32 on one without, forced either
    way by DEPTHUTILS_CPU_BF16; the embedded models stay float32; the handle and every result say which."""
    from depthutils.models import devices

    path = str(build_tiny("llama", tiny_root))
    monkeypatch.delenv(devices.BF16_ENV, raising=False)
    monkeypatch.setattr(devices, "_cpu_flags", lambda: {"fpu", "avx2", "avx512f"})
    lm = depthutils.load_model(path, device="cpu")
    assert lm.dtype == torch.float32 and lm.precision == "float32 (auto: the CPU has no bfloat16 instructions)"
    monkeypatch.setattr(devices, "_cpu_flags", lambda: {"fpu", "avx512f", "avx512_bf16"})
    lm = depthutils.load_model(path, device="cpu")
    assert lm.dtype == torch.bfloat16 and lm.precision == "bfloat16 (auto: the CPU has avx512_bf16)"
    r = depthutils.contributions(lm, prompts[:1])
    assert r.meta["dtype"] == "bfloat16" and r.meta["dtype_how"] == "auto: the CPU has avx512_bf16"
    assert depthutils.load_model("default").dtype == torch.float32  # the embedded models: float32 everywhere
    monkeypatch.setenv(devices.BF16_ENV, "0")  # the detection forced off, whatever the CPU
    lm = depthutils.load_model(path, device="cpu")
    assert lm.dtype == torch.float32 and lm.precision == "float32 (auto: DEPTHUTILS_CPU_BF16=0)"
    assert "dtype=float32 (auto: DEPTHUTILS_CPU_BF16=0)" in repr(lm)
    assert depthutils.load_model(path, device="cpu", dtype="bfloat16").precision == "bfloat16 (as given)"
    monkeypatch.delenv(devices.BF16_ENV)
    monkeypatch.setattr(devices, "_cpu_flags", lambda: None)  # no /proc/cpuinfo: a measured matmul decides
    monkeypatch.setattr(devices, "_bf16_speedup", lambda: 0.4)
    assert devices.native_bf16() == (False, "bfloat16 matmul 0.4x float32's speed here")
