"""The start token (``prepend_bos``): what encode puts at position 0, and its choice by measurement."""
from __future__ import annotations

import copy
import json

import pytest
import torch

import depthutils
from depthutils.core.answers import ANSWER_MARGIN, answers
from depthutils.core.errors import DepthError
from depthutils.core.prompts import bos_mode, encode
from depthutils.models import start_token


def test_a_named_token_takes_position_0_and_replaces_the_tokenizers_own_bos(tiny, prompts):
    handle, _ = tiny("llama")  # its tokenizer adds <|bos|> itself
    tok = handle.tokenizer
    plain = encode(tok, prompts[0], need_answer=True, prepend_bos=True)
    other = encode(tok, prompts[0], need_answer=True, prepend_bos="<|eos|>")
    none = encode(tok, prompts[0], need_answer=True, prepend_bos=False)
    assert plain.tokens[0] == "<|bos|>" and other.tokens[0] == "<|eos|>" and "<|bos|>" not in other.tokens
    assert none.tokens == plain.tokens[1:]  # no start token at all: position 0 is the first real token
    # the answer is the same tokens, shifted with position 0
    assert other.answer_ids == plain.answer_ids == none.answer_ids
    assert other.answer_positions == plain.answer_positions
    assert [p - 1 for p in plain.answer_positions] == none.answer_positions
    assert bos_mode(tok, "<|eos|>") == "<|eos|>" and bos_mode(tok, False) == "off" and bos_mode(tok, True) == "tokenizer"


def test_a_token_outside_the_vocabulary_is_one_sentence(tiny, prompts):
    handle, _ = tiny("llama")
    with pytest.raises(DepthError, match=r"prepend_bos='<\|im_start\|>' is not one token"):
        encode(handle.tokenizer, prompts[0], prepend_bos="<|im_start|>")
    with pytest.raises(DepthError, match="prepend_bos must be"):
        depthutils.load_model("default", prepend_bos=3)


def test_auto_is_the_bos_for_a_model_that_is_not_a_named_real_model(tiny, prompts):
    handle, _ = tiny("llama")
    assert handle.prepend_bos is True and "specification's rule" in handle.start_how
    r = depthutils.contributions(handle, prompts[:1])
    assert r.meta["start"] == handle.start_how and r.meta["prepend_bos"] is True


def test_accuracy_matches_a_plain_forward(tiny, prompts):
    """The measurement's accuracy (logits kept only where an answer token is predicted) against the argmax of
    a plain full forward pass."""
    handle, hf = tiny("llama")
    for start in (True, False, "<|eos|>"):
        for p in prompts:
            enc = encode(handle.tokenizer, p, need_answer=True, prepend_bos=start)
            with torch.no_grad():
                logits = hf(enc.input_ids).logits[0]
            want = float(all(int(logits[q].argmax()) == a for q, a in zip(enc.predict_positions, enc.answer_ids)))
            got = start_token._accuracy(hf, handle.tokenizer, [p], start, per_token=False)
            assert got == want
        per = start_token._accuracy(hf, handle.tokenizer, prompts, start, per_token=True)
        assert 0.0 <= per <= 1.0


def test_the_best_mean_wins_and_a_near_tie_goes_by_the_order(tiny, monkeypatch):
    handle, hf = tiny("llama")
    assert set(start_token.candidates(handle.tokenizer)) == {"none", "bos", "separator"}
    monkeypatch.setattr(start_token, "TASKS", {"a": lambda: [], "b": lambda: []})
    scores = {(False, "a"): 0.5, (False, "b"): 0.5, (True, "a"): 0.5, (True, "b"): 0.5,
              ("<|eos|>", "a"): 0.2, ("<|eos|>", "b"): 0.2}
    dtypes = []  # the modules measured

    def accuracy(m, t, p, start, per):
        dtypes.append(m)
        return scores[(start, "a" if not per else "b")]
    monkeypatch.setattr(start_token, "_accuracy", accuracy)
    monkeypatch.setattr(start_token, "PER_TOKEN", {"b"})
    low = copy.deepcopy(hf).to(torch.bfloat16)
    before = {k: v.clone() for k, v in low.state_dict().items()}
    doc = start_token.measure(low, handle.tokenizer)
    # measured in float32, and the model is left in its own dtype with its own weights
    assert all(next(m.parameters()).dtype == torch.float32 for m in dtypes)
    full = hf.state_dict()  # the folder's float32 weights, not the bfloat16 ones cast back up
    assert all(torch.equal(v, full[k]) for k, v in dtypes[0].state_dict().items())
    assert all(v.dtype == torch.bfloat16 and torch.equal(v, before[k]) for k, v in low.state_dict().items())
    assert doc["choice"] == "bos"  # none ties with the BOS: the spec's rule wins
    scores[(False, "b")] = 0.5 + start_token.TIE  # better by less than TIE on the mean: still a tie
    assert start_token.measure(hf, handle.tokenizer)["choice"] == "bos"
    scores[(False, "b")] = 0.9
    assert start_token.measure(hf, handle.tokenizer)["choice"] == "none"
    assert start_token.pick({"none": 0.36, "separator": 0.36 - start_token.TIE / 2, "bos": 0.32}) == "separator"
    assert start_token.pick({"none": 0.36, "separator": 0.36 - 2 * start_token.TIE, "bos": 0.32}) == "none"


def test_the_choice_is_recorded_and_read_back_without_measuring_again(tiny, tmp_path, monkeypatch):
    handle, hf = tiny("llama")
    calls = []
    monkeypatch.setattr(start_token, "measure", lambda *a: calls.append(1) or {
        "table": {"none": {"x": 0.1}, "separator": {"x": 0.3}}, "mean": {"none": 0.1, "separator": 0.3},
        "choice": "separator", "values": {"none": False, "separator": "<|eos|>"}, "tokens": {}, "n": {"x": 1}})
    value, how = start_token.resolve("auto", "smollm2-135m", hf, handle.tokenizer, cache=tmp_path)
    assert value == "<|eos|>" and "chosen by measurement" in how and "separator 0.30" in how
    assert json.loads((tmp_path / "smollm2-135m.start.json").read_text())["choice"] == "separator"
    assert start_token.resolve("auto", "smollm2-135m", hf, handle.tokenizer, cache=tmp_path)[0] == "<|eos|>"
    assert len(calls) == 1
    assert start_token.resolve(False, "smollm2-135m", hf, handle.tokenizer, cache=tmp_path) == (False, "as given")
    path = tmp_path / "smollm2-135m.start.json"  # measured under another rule (the answer rule changed): again
    path.write_text(json.dumps({**json.loads(path.read_text()), "rule": "an older rule"}))
    start_token.resolve("auto", "smollm2-135m", hf, handle.tokenizer, cache=tmp_path)
    assert len(calls) == 2 and json.loads(path.read_text())["rule"] == start_token.rule_version()


def test_two_processes_loading_a_model_at_once_measure_its_start_once(tiny, tmp_path, monkeypatch):
    """Two chapters (or two test workers) that load a real model at once on an empty cache: the second waits for the
    first's measurement and takes its record, instead of measuring beside it (SmolLM2: about 45 s of one core)."""
    import threading
    import time

    handle, hf = tiny("llama")
    calls = []

    def slow_measure(*_):
        calls.append(1)
        time.sleep(0.5)  # long enough for the second caller to arrive while the first measures
        return {"table": {"bos": {"x": 0.3}}, "mean": {"bos": 0.3}, "choice": "bos", "values": {"bos": True},
                "tokens": {}, "n": {"x": 1}}

    monkeypatch.setattr(start_token, "measure", slow_measure)
    got = []
    threads = [threading.Thread(target=lambda: got.append(start_token.choose("smollm2-135m", hf, handle.tokenizer,
                                                                             cache=tmp_path))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and len(got) == 2 and got[0]["choice"] == got[1]["choice"] == "bos"


def test_the_greedy_answer_is_transformers_own_greedy_decoding(tiny):
    """The measurement's decoding (its key-value cache loop) against ``generate(do_sample=False)``, and its
    accuracy against the answer rule applied to ``generate``'s text."""
    handle, hf = tiny("llama")
    prompts = depthutils.data.arithmetic(6, seed=3)
    hits = []
    for p in prompts:
        enc = encode(handle.tokenizer, p, need_answer=True, prepend_bos=True)
        ctx = enc.input_ids[:, :enc.answer_positions[0]]
        ref = hf.generate(ctx, attention_mask=torch.ones_like(ctx), do_sample=False, max_new_tokens=4,
                          min_new_tokens=4, pad_token_id=0)[0, ctx.shape[1]:].tolist()
        assert start_token._greedy(hf, ctx, 4) == ref
        n = len(enc.answer_ids) + ANSWER_MARGIN
        text = handle.tokenizer.decode(hf.generate(ctx, attention_mask=torch.ones_like(ctx), do_sample=False,
                                                   max_new_tokens=n, min_new_tokens=n, pad_token_id=0)[0, ctx.shape[1]:],
                                       skip_special_tokens=True)
        hits.append(answers(text, p.answer))
    assert start_token._accuracy(hf, handle.tokenizer, prompts, True, False) == sum(hits) / len(hits)


@pytest.mark.real("smollm2-135m")
def test_smollm2_uses_its_recorded_start():
    lm = depthutils.load_model("smollm2-135m")  # measures and records the start where it is not recorded yet
    doc = start_token.recorded("smollm2-135m")
    assert lm.prepend_bos == doc["values"][doc["choice"]]
    assert start_token.pick(doc["mean"]) == doc["choice"]
    enc = encode(lm.tokenizer, depthutils.data.arithmetic(1)[0], need_answer=True, prepend_bos=lm.prepend_bos)
    assert enc.tokens[0] == (doc["tokens"][doc["choice"]] if doc["choice"] != "none" else enc.tokens[0])
