"""The mutation table of chapter 10's stretch exercise (10.3), as in ``tests/teaching/test_exercise_mutations.py``:
each mutation is the reference solution with one thing changed, and the checker must fail it with a sentence that
names the mistake."""
from __future__ import annotations

import pytest
import torch
from conftest import assert_named  # every mutation table's check

from depthutils.teaching import exercises

STRETCH = ("answer_only_loss",)


def _loss(keep="answer", shift=True, reduce="mean"):
    """:func:`solutions.answer_only_loss` with one step written wrong."""
    def answer_only_loss(lm, input_ids, answer_mask):
        with torch.no_grad():
            log_p = lm.hf(input_ids=input_ids).logits.float().log_softmax(-1)
        if shift:
            token = -log_p[:, :-1].gather(-1, input_ids[:, 1:, None])[..., 0]
            mask = answer_mask[:, 1:]
        else:
            token = -log_p.gather(-1, input_ids[..., None])[..., 0]
            mask = answer_mask
        picked = token[mask] if keep == "answer" else token
        return float(picked.sum() if reduce == "sum" else picked.mean())
    return answer_only_loss


MUTATIONS = [
    ("answer_only_loss", "the mean over every position", _loss(keep="all"), "mean over every position"),
    ("answer_only_loss", "the sum of the answer losses", _loss(reduce="sum"), "take their mean"),
    ("answer_only_loss", "each position's own token", _loss(shift=False), "position p predicts token p + 1"),
    ("answer_only_loss", "the sum over every position", _loss(keep="all", reduce="sum"), "summed over every position"),
]


def test_every_stretch_exercise_has_mutations():
    assert set(STRETCH) <= set(exercises.EXERCISES)
    assert {m[0] for m in MUTATIONS} == set(STRETCH)
    assert all(sum(m[0] == id for m in MUTATIONS) >= 4 for id in STRETCH)


@pytest.mark.parametrize("id, mistake, fn, phrase", MUTATIONS, ids=[f"{m[0]}: {m[1]}" for m in MUTATIONS])
def test_the_checker_fails_the_mistake_and_names_it(id, mistake, fn, phrase):
    assert_named(id, mistake, fn, phrase)
