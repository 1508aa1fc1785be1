"""Chapter 6's few-shot families for pretrained models and the calibrated choice per model."""
from __future__ import annotations

import re

import pytest

import depthutils
from depthutils import data
from depthutils.book.claim_table import ACCURACY_FLOOR
from depthutils.data import depth_tasks
from depthutils.measures.depth_score import TASKS


@pytest.mark.parametrize("level", sorted(depth_tasks.SUM_LEVELS))
def test_sums_are_right_and_of_their_level(level):
    ps = depth_tasks.sums(level, 30, seed=3)
    assert len(ps) == 30 and ps == depth_tasks.sums(level, 30, seed=3) and ps != depth_tasks.sums(level, 30, seed=4)
    da, db = depth_tasks.SUM_LEVELS[level]
    for p in ps:
        assert p.answer.startswith(" ") and p.context.endswith(" =")
        lines = p.text.split("\n")
        assert len(lines) == depth_tasks.SHOTS + 1
        for line in lines:  # every example and the question: right, and of the level's digits
            a, b, c = map(int, re.fullmatch(r"(\d+) \+ (\d+) = (\d+)", line).groups())
            assert a + b == c and len(str(a)) == da and len(str(b)) == db
    with pytest.raises(depthutils.DepthError, match="sums has levels"):
        depth_tasks.sums(4, 3)


@pytest.mark.parametrize("hops", [1, 4])
def test_mquake_qa_examples_never_answer_a_hop_of_their_question(hops):
    rows = data.load_rows("MQuAKE-hard.json")
    own = {r["questions"][0]: r for r in rows}
    own.update({h["question"]: r for r in rows for h in r["single_hops"]})
    for p in depth_tasks.mquake_qa(hops, 25, seed=1):
        blocks = p.context.split("\n\n")
        assert len(blocks) == depth_tasks.SHOTS + 1 and blocks[-1].endswith("\nAnswer:")
        q = blocks[-1][len("Question: "):-len("\nAnswer:")]
        case = own[q]
        assert p.answer == " " + (case["answer"] if hops == 4 else
                                  next(h["answer"] for h in case["single_hops"] if h["question"] == q))
        hop_questions = {h["question"] for h in case["single_hops"]} if hops == 4 else {q}
        assert not any(b.split("\n")[0][len("Question: "):] in hop_questions for b in blocks[:-1])
    with pytest.raises(depthutils.DepthError, match="1- and 4-hop"):
        depth_tasks.mquake_qa(2, 3)


def test_tasks_for_names_real_families_and_keeps_the_ladder_default():
    for name, chosen in depth_tasks.CALIBRATED.items():
        got = depth_tasks.tasks_for(name)
        assert got == chosen and all(len(levels) >= 2 for levels in got.values())
        assert all(set(levels) <= set(TASKS[t][0]) for t, levels in got.items())
    assert depth_tasks.tasks_for("ladder-8") == depth_tasks.LADDER_TASKS
    assert depth_tasks.tasks_for("default") == depth_tasks.LADDER_TASKS
    assert 0 < ACCURACY_FLOOR < 1


def test_any_other_model_gets_real_tasks_not_the_ladders_invented_facts(tiny):
    """A hub id or an outside folder knows real facts only: "auto" gives it the few-shot families, every level."""
    for name in ("Qwen/Qwen2.5-1.5B", "/tmp/some/folder"):
        assert depth_tasks.tasks_for(name) == depth_tasks.PRETRAINED_TASKS
    assert all(set(levels) <= set(TASKS[t][0]) for t, levels in depth_tasks.PRETRAINED_TASKS.items())
    handle, _ = tiny("llama")  # a model outside the ladder
    r = depthutils.depth_score(handle, "auto", n=1, accuracy=False)
    assert {row["task"] for row in r.rows} == set(depth_tasks.PRETRAINED_TASKS)
    assert r.meta["params"]["tasks"] == list(depth_tasks.PRETRAINED_TASKS)


def test_levels_of_a_family_can_be_chosen(tiny):
    handle, _ = tiny("llama")
    r = depthutils.depth_score(handle, {"sums": (1, 2)}, n=2, accuracy=False)
    assert [(row["task"], row["level"], row["n"]) for row in r.rows] == [("sums", 1, 2), ("sums", 2, 2)]
    assert r.meta["params"]["levels"] == {"sums": [1, 2]} and r.meta["params"]["layer_passes"] == r.meta["params"]["layer_pass_floor"]
    L = handle.n_layers
    assert r.meta["params"]["layer_pass_floor"] == 4 * (L + L * (L - 1) // 2)  # 4 prompts, one position t each
    with pytest.raises(depthutils.DepthError, match=r"Task 'sums' has levels \[1, 2, 3\]; got \[5\]"):
        depthutils.depth_score(handle, {"sums": (5,)}, n=2)
