"""load_model: every family, clear errors, no remote code, no key argument; result files."""
from __future__ import annotations

import inspect
import json

import numpy as np
import pytest
import torch

import depthutils
from conftest import FAMILIES, build_tiny
from depthutils.core.results import Result


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_loads_with_its_adapter(tiny_root, family, prompts):
    handle = depthutils.load_model(str(build_tiny(family, tiny_root)), device="cpu")
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
