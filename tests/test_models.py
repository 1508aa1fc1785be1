"""load_model: every family, clear errors, no remote code, no key argument; result files."""
from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

import depthutils
from conftest import FAMILIES, build_tiny
from depthutils.errors import DepthError
from depthutils.results import Result


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_loads_with_its_adapter(tiny_root, family, prompts):
    handle = depthutils.load_model(str(build_tiny(family, tiny_root)), device="cpu")
    assert handle.arch.family == family and handle.n_layers == 3
    r = depthutils.contributions(handle, prompts[:1])
    assert r.attn_ratio.shape == (3,) and np.isfinite(r.mlp_cos).all()


def test_unsupported_family_lists_the_supported_ones(tmp_path):
    import transformers as tf

    from conftest import make_tokenizer

    tok = make_tokenizer(tmp_path)
    tf.BertForMaskedLM(tf.BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32)).save_pretrained(tmp_path)
    with pytest.raises(DepthError) as e:
        depthutils.load_model(str(tmp_path))
    assert "'bert'" in str(e.value) and "gpt2, gpt_neox, llama, mistral, olmo2, qwen2, qwen3" in str(e.value)


def test_unknown_model_is_one_clear_error():
    with pytest.raises(DepthError, match="not an embedded alias .* not a local folder"):
        depthutils.load_model("no-such-org/no-such-model-xyz")


def test_folder_without_config(tmp_path):
    with pytest.raises(DepthError, match="no config.json"):
        depthutils.load_model(str(tmp_path))


def test_trust_remote_code_is_off_and_the_key_is_no_argument():
    sig = inspect.signature(depthutils.load_model)
    assert sig.parameters["trust_remote_code"].default is False
    assert not any("key" in name.lower() for name in sig.parameters)


def test_remote_without_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("NDIF_API_KEY", raising=False)
    monkeypatch.setattr("transformers.AutoConfig.from_pretrained",
                        lambda *a, **k: type("C", (), {"model_type": "llama"})())
    monkeypatch.setattr("depthutils.models._tokenizer", lambda *a, **k: None)
    with pytest.raises(DepthError, match="NDIF_API_KEY"):
        depthutils.load_model("meta-llama/Llama-3.1-70B", remote=True)


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
