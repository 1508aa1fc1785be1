"""Prompts fitted to the model's context (cut, skip, nothing fits) and one meaning for position 0."""
from __future__ import annotations

import numpy as np
import oracle
import pytest
from conftest import ATOL, build_tiny

import depthutils
from depthutils.core.prompts import Prompt, encode


@pytest.fixture(scope="module")
def nobos(tiny_root):
    """A tiny Llama with a 128-token context whose tokenizer adds no BOS (like GPT-2 or Qwen2.5)."""
    from transformers import AutoModelForCausalLM

    path = build_tiny("llama", tiny_root, context=128, add_bos=False)
    return depthutils.load_model(str(path), device="cpu", dtype="float32"), AutoModelForCausalLM.from_pretrained(path).eval()


def long_prompt(n_words: int = 80) -> Prompt:
    return Prompt.from_parts("Janet's ducks lay 16 eggs per day. " * (n_words // 7), "She eats 3.", "test")


def test_text_only_measurements_cut_to_the_first_tokens(tiny, prompts):
    handle, hf = tiny("llama")
    short, long = prompts[0], long_prompt()
    T_short, T_long = encode(handle.tokenizer, short).n_tokens, encode(handle.tokenizer, long).n_tokens
    assert T_short < 40 < handle.max_length < T_long
    got = depthutils.contributions(handle, [short, long], max_tokens=40)
    assert got.meta["fit"] == {"rule": "cut", "max_tokens": 40, "used": 2, "cut": 1, "skipped": 0}
    assert "2 used, 1 cut, 0 skipped" in got.summary()
    ids = [encode(handle.tokenizer, short).input_ids, encode(handle.tokenizer, long).input_ids[:, :40]]
    want = oracle.contributions(hf, "llama", ids)  # the cut prompt is exactly its first 40 tokens
    for key, value in want.items():
        np.testing.assert_allclose(getattr(got, key), value, atol=ATOL, err_msg=key)
    # by default the model's own context (128) is the limit: the long prompt is cut, never passed whole
    lens = depthutils.logit_lens(handle, [long])
    assert lens.meta["fit"]["cut"] == 1 and lens.meta["fit"]["max_tokens"] == handle.max_length


def test_measurements_that_need_an_answer_skip(tiny, prompts):
    handle, _ = tiny("llama")
    fits, too_long = prompts[0], long_prompt()
    ed = depthutils.effective_depth(handle, [too_long, fits, prompts[1]], max_tokens=40)
    assert ed.meta["fit"] == {"rule": "skip", "max_tokens": 40, "used": 2, "cut": 0, "skipped": 1}
    first = depthutils.effective_depth(handle, [too_long, fits, prompts[1]], max_tokens=40, n=1)
    assert first.meta["fit"]["used"] == 1  # n keeps the first prompts that fit
    r = depthutils.residual_erasure(handle, fits, baseline=np.zeros((handle.n_layers + 1, 32)), max_tokens=40)
    assert r.meta["fit"]["used"] == 1 and "1 used, 0 cut, 0 skipped" in r.summary()


@pytest.mark.parametrize("call", ["erasure", "ig", "effective_depth"])
def test_nothing_fits_is_one_clear_error_naming_max_tokens(tiny, call):
    handle, _ = tiny("llama")
    p = long_prompt()
    calls = {"erasure": lambda: depthutils.residual_erasure(handle, p, baseline=np.zeros((4, 32))),
             "ig": lambda: depthutils.integrated_gradients(handle, p, steps=2, max_tokens=20),
             "effective_depth": lambda: depthutils.effective_depth(handle, [p], max_tokens=20)}
    with pytest.raises(depthutils.DepthError) as info:
        calls[call]()
    msg = str(info.value)
    assert msg.startswith("None of the 1 prompt(s) fits") and "max_tokens" in msg and "\n" not in msg


def test_max_tokens_beyond_the_context_is_refused(tiny, prompts):
    handle, _ = tiny("llama")
    with pytest.raises(depthutils.DepthError, match=r"max_tokens=4096 exceeds the model's context of 128"):
        depthutils.contributions(handle, prompts, max_tokens=4096)


def test_bos_is_prepended_when_the_tokenizer_adds_none(nobos, prompts):
    handle, hf = nobos
    enc = encode(handle.tokenizer, prompts[0])
    raw = handle.tokenizer(prompts[0].text)["input_ids"]
    assert raw[0] != handle.tokenizer.bos_token_id  # this tokenizer adds no BOS ...
    assert enc.input_ids[0].tolist() == [handle.tokenizer.bos_token_id] + raw  # ... so one is prepended
    assert enc.answer_positions[0] == enc.n_tokens - 2  # "28": the answer still lies where it is
    assert handle.bos == "prepended"
    r = depthutils.contributions(handle, prompts)
    assert r.meta["bos"] == "prepended" and r.meta["prepend_bos"] is True
    want = oracle.contributions(hf, "llama", [encode(handle.tokenizer, p).input_ids for p in prompts])
    np.testing.assert_allclose(r.layer_ratio, want["layer_ratio"], atol=ATOL)


def test_prepending_can_be_turned_off_and_is_recorded(tiny_root, prompts):
    path = build_tiny("llama", tiny_root, context=128, add_bos=False)
    handle = depthutils.load_model(str(path), device="cpu", dtype="float32", prepend_bos=False)
    enc = encode(handle.tokenizer, prompts[0], prepend_bos=False)
    assert enc.input_ids[0].tolist() == handle.tokenizer(prompts[0].text)["input_ids"]
    r = depthutils.logit_lens(handle, prompts)
    assert r.meta["bos"] == "off" and r.meta["prepend_bos"] is False


def test_a_tokenizer_that_adds_bos_gets_no_second_one(tiny, prompts):
    handle, _ = tiny("llama")
    enc = encode(handle.tokenizer, prompts[0])
    assert enc.input_ids[0].tolist() == handle.tokenizer(prompts[0].text)["input_ids"]
    assert int((enc.input_ids[0] == handle.tokenizer.bos_token_id).sum()) == 1
    assert handle.bos == "tokenizer"


def test_eos_stands_in_where_there_is_no_bos(tiny_root, prompts):
    """Qwen2.5's tokenizers have no BOS token at all: TransformerLens prepends the EOS instead."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(build_tiny("llama", tiny_root, context=128, add_bos=False))
    tok.bos_token = None
    enc = encode(tok, prompts[0])
    assert enc.input_ids[0, 0] == tok.eos_token_id and enc.n_tokens == len(tok(prompts[0].text)["input_ids"]) + 1


@pytest.mark.parametrize("add_bos", [True, False])
def test_sentencepiece_style_tokenizers_keep_the_rules(tmp_path, add_bos):
    """Phi-3, Llama 2 and Gemma tokenize SentencePiece-style (a leading "▁" marks the space): the
    answer is still found through the offsets, and position 0 is the BOS either way."""
    from conftest import TEXT
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    tok.train_from_iterator([TEXT], trainers.BpeTrainer(vocab_size=200, show_progress=False,
                                                        special_tokens=["<unk>", "<s>", "</s>"]))
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    p = Prompt.from_parts("The spouse of the performer of Imagine is", " Yoko Ono", "test")
    enc = encode(fast, p, need_answer=True)
    assert enc.input_ids[0, 0] == fast.bos_token_id and int((enc.input_ids[0] == fast.bos_token_id).sum()) == 1
    answer = fast.decode(enc.input_ids[0, enc.answer_positions].tolist())
    assert answer.strip() == "Yoko Ono" and enc.answer_positions[-1] == enc.n_tokens - 1
    assert "Imagine" not in answer and enc.predict_positions[0] == enc.answer_positions[0] - 1
