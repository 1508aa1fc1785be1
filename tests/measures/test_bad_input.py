"""Bad input: each case gives one clear sentence naming the problem and the fix.

The catalogue: unknown model, unsupported architecture, folder
without config, data not available offline, n_examples ≤ 0, a prompt longer than the
context, a position out of range, an answer not in the text, half precision on a CPU
that cannot run it, NaN/inf activations, an invalid chapter, an unknown chapter
parameter, an unwritable output folder, remote without a key, and NDIF unreachable.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import build_tiny

import depthutils
from depthutils import data
from depthutils.book.runner import run_chapter
from depthutils.core.errors import DepthError
from depthutils.core.prompts import Prompt


def one_sentence(err: BaseException) -> str:
    msg = str(err)
    assert "\n" not in msg and "Traceback" not in msg and len(msg) < 400, msg
    return msg


def test_unsupported_family_lists_the_supported_ones(tmp_path):
    import transformers as tf
    from conftest import make_tokenizer

    tok = make_tokenizer(tmp_path)
    tf.BertForMaskedLM(tf.BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32)).save_pretrained(tmp_path)
    with pytest.raises(DepthError) as e:
        depthutils.load_model(str(tmp_path))
    from depthutils.models.architectures import supported_families

    msg = one_sentence(e.value)
    assert "'bert'" in msg and supported_families() in msg and "gemma2" in msg and "falcon" in msg


def test_unknown_model_is_one_clear_error():
    with pytest.raises(DepthError, match="not an embedded alias .* not a local folder"):
        depthutils.load_model("no-such-org/no-such-model-xyz")


def test_folder_without_config(tmp_path):
    with pytest.raises(DepthError, match="no config.json"):
        depthutils.load_model(str(tmp_path))


def test_remote_without_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("NDIF_API_KEY", raising=False)
    monkeypatch.setattr("transformers.AutoConfig.from_pretrained",
                        lambda *a, **k: type("C", (), {"model_type": "llama"})())
    monkeypatch.setattr("depthutils.models.handle._tokenizer", lambda *a, **k: None)
    with pytest.raises(DepthError, match="NDIF_API_KEY"):
        depthutils.load_model("meta-llama/Llama-3.1-70B", remote=True)


def test_offline_without_local_data_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DEPTHUTILS_DATA", str(tmp_path))
    monkeypatch.setattr(data, "local_dirs", lambda: [tmp_path])
    with pytest.raises(DepthError) as e:
        data.gsm8k(5)
    msg = str(e.value)
    assert "DEPTHUTILS_DATA" in msg and "hub" in msg and "openai/gsm8k" in msg


@pytest.mark.parametrize("n", [0, -3, 2.5])
def test_bad_n_examples(n, tmp_path):
    with pytest.raises(DepthError, match=r"^n must be a positive whole number"):
        data.arithmetic(n)
    with pytest.raises(DepthError, match=r"^n_examples must be a positive whole number"):  # the chapter's name
        run_chapter("01", params={"n_examples": n}, out=tmp_path)


def test_unknown_parameter_lists_the_valid_ones(tmp_path):
    with pytest.raises(DepthError, match=r"Unknown parameter\(s\) n_exampels .* valid parameters are: model, "):
        run_chapter("01", params={"n_exampels": 3}, out=tmp_path)


def test_unwritable_output_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(DepthError, match="Cannot write to the output folder"):
        run_chapter("01", out=blocker / "sub")


def test_cli_errors_are_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "depthutils", "run", "99", "--out", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: Unknown chapter '99'") and "Traceback" not in proc.stderr



def test_prompt_longer_than_the_context(tiny):
    """A text-only measurement cuts it (tests/core/test_fitting.py); one that needs the answer cannot."""
    handle, _ = tiny("llama")  # context of 128 positions
    long = Prompt.from_parts("5 + 7 + " * 60, "1")
    with pytest.raises(DepthError) as e:
        depthutils.integrated_gradients(handle, long, steps=2)
    msg = one_sentence(e.value)
    assert "max_tokens is 128" in msg and "model with a longer context" in msg


@pytest.mark.parametrize("t", [0, 999])
def test_position_out_of_range(tiny, prompts, t):
    handle, _ = tiny("llama")
    with pytest.raises(DepthError) as e:
        depthutils.future_effects(handle, prompts[:1], positions=[t])
    assert "out of range" in one_sentence(e.value) and "1 ≤ t <" in str(e.value)


def test_answer_not_found_in_the_text(tiny):
    with pytest.raises(DepthError) as e:
        Prompt.locate("5 + 7 = 12", "13")
    assert "not found" in one_sentence(e.value)
    handle, _ = tiny("llama")
    with pytest.raises(DepthError) as e:
        depthutils.residual_erasure(handle, "5 + 7 = 12", "", baseline=np.zeros((4, 32)))
    assert "No answer tokens" in one_sentence(e.value)


def test_half_precision_on_a_cpu_that_cannot_run_it(tiny_root, monkeypatch):
    monkeypatch.setattr("depthutils.models.devices.half_precision_works", lambda dtype: False)
    with pytest.raises(DepthError) as e:
        depthutils.load_model(str(build_tiny("llama", tiny_root)), device="cpu", dtype="bfloat16")
    assert "cannot run on this CPU" in one_sentence(e.value) and "float32" in str(e.value)


def test_nan_activations_are_reported_not_plotted(tiny_root, prompts):
    handle = depthutils.load_model(str(build_tiny("llama", tiny_root)), device="cpu", dtype="float32")
    with torch.no_grad():
        handle.nn._module.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
    for call in (lambda: depthutils.contributions(handle, prompts[:1]),
                 lambda: depthutils.logit_lens(handle, prompts[:1])):
        with pytest.raises(DepthError) as e:
            call()
        assert "non-finite" in one_sentence(e.value)


def test_unknown_dtype(tiny_root):
    with pytest.raises(DepthError) as e:
        depthutils.load_model(str(build_tiny("llama", tiny_root)), dtype="float8")
    assert "Unknown dtype" in one_sentence(e.value)


def test_invalid_chapter():
    with pytest.raises(DepthError) as e:
        run_chapter("nine")
    assert "valid chapters are: 00 (residual_stream), 01 (contributions)" in one_sentence(e.value)


def test_unreachable_ndif_with_a_fake_key_leaves_no_trace_of_it(tmp_path, monkeypatch):
    """A chapter executed with remote parameters, a fake key and no network."""
    secret = "fake-ndif-key-7f3a9c"
    monkeypatch.setenv("NDIF_API_KEY", secret)
    with pytest.raises(DepthError) as e:
        run_chapter("01", model="meta-llama/Llama-3.1-70B", params={"remote": True, "n_examples": 1}, out=tmp_path)
    assert "Cannot reach NDIF" in str(e.value) and secret not in str(e.value)
    nb_text = (tmp_path / "01_contributions.ipynb").read_text()
    assert "Cannot reach NDIF" in nb_text
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="ignore"), path
