"""The project's own depth ladder (data/models): loading, tokenizer, cards, book prompts.

CPU only, offline, well under a minute.  Re-measures 50 held-out addition
chains per model and compares them with the figure in the model's card.json.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "data" / "models"
PROMPTS = ROOT / "data" / "prompts"
SHIPPED = sorted(p.parent.name for p in MODELS.glob("*/config.json"))

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from depthutils.ladder import evaluate as ev  # noqa: E402
from depthutils.ladder import registry, tasks  # noqa: E402

#: 50 chains, binomial std at most sqrt(0.25 / 50) = 7.1 points; +-15 points is
#: about 2.1 std in the worst case (p = 0.5), so a correct model fails < 4 % of
#: the time even before counting that the sample is part of the card's set.
TOLERANCE = 0.15
MAX_BYTES = 20 * 10**6


@pytest.fixture(scope="module")
def loaded():
    cache = {}

    def get(name):
        if name not in cache:
            torch.set_num_threads(1)  # tiny models; robust when other processes hold a core
            cache[name] = ev.load_model(name)
        return cache[name]
    return get


def test_every_model_is_shipped():
    assert set(registry.SPECS) <= set(SHIPPED)
    for name in SHIPPED:
        assert (MODELS / name / "model.safetensors").stat().st_size <= MAX_BYTES
        assert (MODELS / name / "card.json").is_file()
    assert registry.resolve_alias("default") == MODELS / registry.ALIASES["default"]
    assert registry.resolve_alias("no-such-model") is None
    rows = {r["folder"]: r for r in registry.list_models()}
    assert rows["ladder-16"]["layers"] == 16 and rows["ladder-4"]["layers"] == 4


@pytest.mark.parametrize("name", SHIPPED)
def test_tokenizer(name):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast.from_pretrained(str(MODELS / name))
    auto = AutoTokenizer.from_pretrained(str(MODELS / name))
    text = "And God said, Let there be light: 5 + 7 + 5 + 3 + 1 + 7 = 28\nThe spouse of X is"
    ids = fast(text)["input_ids"]
    assert ids == auto(text)["input_ids"]
    assert ids[0] == fast.bos_token_id and fast.bos_token == "<|bos|>"
    assert fast.decode(ids, skip_special_tokens=True) == text
    assert len(fast("0123456789", add_special_tokens=False)["input_ids"]) == 10
    prompt, answer = "5 + 7 + 5 = ", "17"
    assert fast(prompt + answer)["input_ids"] == fast(prompt)["input_ids"] + \
        fast(answer, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("name", SHIPPED)
def test_heldout_addition_matches_card(name, loaded):
    from transformers import LlamaForCausalLM

    model, tok, style = loaded(name)
    assert isinstance(model, LlamaForCausalLM)
    assert model.config.max_position_embeddings >= 1024
    card = json.loads((MODELS / name / "card.json").read_text())
    sample = ev.addition_test_sample()
    assert len(sample) == 50 and all(tasks.heldout_check("addition", r["prompt"]) for r in sample)
    hits = ev.score(model, tok, style, sample)
    measured = sum(hits) / len(hits)
    assert abs(measured - card["addition_heldout_mix"]["acc"]) <= TOLERANCE, (measured, card)


def test_default_model_meets_bars():
    card = json.loads((registry.resolve_alias("default") / "card.json").read_text())
    assert card["addition"]["2"]["acc"] >= 0.95
    assert card["addition"]["3"]["acc"] >= 0.80


def test_book_prompts_are_heldout_and_answered(loaded):
    book = json.loads((PROMPTS / "book_prompts.json").read_text())
    assert tasks.heldout_check("addition", book["arithmetic"]["prompt"])
    assert tasks.heldout_check("multihop", book["multihop"]["prompt"])
    assert book["arithmetic"]["prompt"].endswith("= ")
    model, tok, style = loaded("default")
    for key, task in (("arithmetic", "addition"), ("multihop", "multihop")):
        row = dict(task=task, **book[key])
        assert ev.score(model, tok, style, [row]) == [True], key


def test_training_sampler_never_emits_heldout():
    rng = random.Random(0)
    for _ in range(2000):
        ex = tasks.sample_addition(rng)
        assert not ex.meta["heldout"]
        ex = tasks.sample_multihop(rng)
        assert not ex.meta["heldout"]
        ex = tasks.sample_word_problem(rng)
        assert not ex.meta["heldout"]
