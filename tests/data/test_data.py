"""Loaders on ../shared/data, the answer positions they carry, and the offline error."""
from __future__ import annotations

import pytest
from conftest import SHARED_DATA

from depthutils import data
from depthutils.core.prompts import encode

needs_data = pytest.mark.skipif(not SHARED_DATA.exists(), reason="../shared/data is not beside the project")


@needs_data
def test_gsm8k_is_in_p1_format():
    p = data.gsm8k(3)[0]
    assert p.text.startswith("Given the following problem, reason and give a final answer to the problem.\nProblem: Janet")
    assert "Your response should end with \"The final answer is [answer]\"" in p.text
    assert p.context.endswith("She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer’s market.\nThe final answer is ")
    assert p.answer == "18" and "####" not in p.text


@needs_data
@pytest.mark.parametrize("name,kw,check", [
    ("math", dict(type="Intermediate Algebra", level=5), lambda p: p.meta["level"] == "Level 5" and p.context.startswith("Problem: ")),
    ("aime24", {}, lambda p: p.context.startswith("Problem: ") and p.context.endswith("\nAnswer: ") and p.answer.isdigit()),
    ("hellaswag", {}, lambda p: len(p.answer) > 0 and p.context.endswith(" ")),
    ("mquake", dict(hops=4), lambda p: p.context.startswith("Question: ") and p.answer.startswith(" ")),
    ("mquake", dict(hops=1), lambda p: p.meta["hops"] == 1),
    ("simple_arithmetic", {}, lambda p: p.context.endswith("=")),
    ("arithmetic", dict(operands=6), lambda p: p.context.count("+") == 5 and p.answer == str(eval(p.context[:-3]))),
])
def test_loaders(name, kw, check):
    ps = data.load(name, 4, **kw)
    assert len(ps) == 4
    assert all(check(p) for p in ps)
    assert all(p.text[p.answer_start:] == p.answer for p in ps)


@needs_data
def test_hellaswag_answer_is_the_gold_ending():
    import json

    row = json.loads((SHARED_DATA / "hellaswag_val.jsonl").read_text().splitlines()[0])
    p = data.hellaswag(1)[0]
    assert p.answer == row["endings"][int(row["label"])].strip()


def test_answer_positions_point_at_the_answer_tokens(tiny):
    handle, _ = tiny("llama")
    p = data.arithmetic(1, operands=6, seed=3)[0]
    enc = encode(handle.tokenizer, p)
    assert enc.input_ids[0, 0] == handle.tokenizer.bos_token_id
    assert handle.tokenizer.decode(enc.answer_ids) == p.answer
    assert enc.predict_positions == [q - 1 for q in enc.answer_positions]
    assert enc.answer_positions[-1] == enc.n_tokens - 1


def test_depthutils_data_variable_is_used(monkeypatch, tmp_path):
    (tmp_path / "gsm8k_test.jsonl").write_text('{"question": "Q?", "answer": "because\\n#### 7"}\n')
    monkeypatch.setenv("DEPTHUTILS_DATA", str(tmp_path))
    (p,) = data.gsm8k(1)
    assert p.answer == "7" and "Problem: Q?" in p.text


