"""Chapter 10, the objectives experiment: the answer-only objective's targets (10.2, core).

The chapter's prediction exercise is 10.1 (prose only, on the page); 10.2 is checked by
:func:`depthutils.teaching.exercises.check`.
"""
from __future__ import annotations

from functools import lru_cache

import torch

from depthutils.ladder import registry
from depthutils.ladder.objectives import IGNORE, ObjectiveBatches
from depthutils.teaching.exercises.core import Exercise, register


@lru_cache(maxsize=None)
def _batches(objective: str) -> ObjectiveBatches:
    from depthutils.ladder.tokenizer import load_tokenizer

    return ObjectiveBatches(load_tokenizer(registry.TOKENIZER_DIR), objective, seed=1)


def _cases(lm):
    """Two training steps' task rows: one of short chains only (step 0) and one of every trained length."""
    out = []
    for step in (0, 1500):
        ids, answer, _ = _batches("a").task_rows(step)
        out.append(dict(input_ids=ids[:8], answer_mask=answer[:8], _step=step))
    return out


def _reference(lm, case):
    return _batches("a").pairs(case["_step"])[0][1][:8]


def _mistakes(lm, case):
    ids, answer = case["input_ids"], case["answer_mask"]
    nxt = ids[:, 1:]
    masked = lambda keep, fill=IGNORE: torch.where(keep, nxt, torch.full_like(nxt, fill))  # noqa: E731
    eos = nxt == _batches("a").eos
    qa = _batches("qa").pairs(case["_step"])[0][1][:8]
    return {"you masked with answer_mask[:, :-1]: the target of position p is token p + 1, so its mask is "
            "answer_mask[:, 1:]": masked(answer[:, :-1]),
            "you filled the ignored targets with 0 (a real token id): use -100, cross_entropy's ignore_index":
            masked(answer[:, 1:], 0),
            "you kept the end-of-sequence token: the loss is on the answer tokens only": masked(answer[:, 1:] | eos),
            "these are the Q+A targets (every token of the example): keep only the answer tokens": qa,
            "you inverted the mask: keep the answer tokens and set every other target to -100":
            masked(~answer[:, 1:]),
            "you did not shift: the target of position p is the next token, input_ids[:, 1:], masked with "
            "answer_mask[:, 1:]": torch.where(answer[:, :-1], ids[:, :-1], torch.full_like(nxt, IGNORE))}


EXERCISE = Exercise(
    "answer_only_targets", "10_objectives", "The answer-only objective's targets",
    "answer_only_targets(input_ids, answer_mask) -> LongTensor [B, T − 1]",
    "the next token of every position, input_ids[:, 1:], with -100 (cross_entropy's ignore_index) wherever "
    "that next token is not an answer token; answer_mask [B, T] is True on the answer tokens",
    difficulty=2, importance=4,
    hints=("A causal model's position p predicts token p + 1, so targets and mask both drop their first column.",
           "`targets[~mask] = -100` sets the ignored targets in place; clone first, so input_ids is not changed."),
    cases=_cases, reference=_reference, mistakes=_mistakes, model=None, number="10.2")

register(EXERCISE)


# ------------------------------------------------------------------ 10.3, the objective's loss
def _loss_cases(lm):
    ids, answer, _ = _batches("a").task_rows(1500)
    return [dict(input_ids=ids[:16], answer_mask=answer[:16]), dict(input_ids=ids[16:24], answer_mask=answer[16:24])]


def _loss_reference(lm, case):
    from depthutils.ladder.train import loss_of

    targets = case["input_ids"][:, 1:].clone()
    targets[~case["answer_mask"][:, 1:]] = IGNORE
    with torch.no_grad():
        return float(loss_of(lm.hf, [(case["input_ids"][:, :-1], targets, None)]))


def _loss_mistakes(lm, case):
    ids, answer = case["input_ids"], case["answer_mask"]
    with torch.no_grad():
        log_p = lm.hf(input_ids=ids).logits.float().log_softmax(-1)
    shifted = -log_p[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
    unshifted = -log_p.gather(-1, ids[..., None])[..., 0]
    real = ids[:, 1:] != lm.tokenizer.pad_token_id
    return {"you took the mean over every position: only the answer tokens count (mask with answer_mask[:, 1:])":
            float(shifted.mean()),
            "you took the mean over the whole chain: the answer-only loss counts the answer tokens alone":
            float(shifted[real].mean()),
            "you summed the answer tokens' losses: take their mean": float(shifted[answer[:, 1:]].sum()),
            "you summed over every position: take the mean over the answer tokens only": float(shifted.sum()),
            "you scored each position's own token: position p predicts token p + 1, so compare logits[:, :-1] "
            "with input_ids[:, 1:]": float(unshifted[answer].mean())}


EXERCISE_LOSS = Exercise(
    "answer_only_loss", "10_objectives", "The answer-only objective's loss",
    "answer_only_loss(lm, input_ids, answer_mask) -> float",
    "the mean over the answer tokens of the next-token cross-entropy −log p(token p + 1 | tokens ≤ p), on a batch "
    "of chains (input_ids, answer_mask [B, T]), with the answer-only model objective-z10-a-1",
    difficulty=3, importance=3,
    hints=("`lm.hf(input_ids=...).logits` is [B, T, V]; position p's logits predict token p + 1.",
           "`log_softmax`, then `gather` the next token's log-probability, then keep the answer targets "
           "(`answer_mask[:, 1:]`) before the mean."),
    cases=_loss_cases, reference=_loss_reference, mistakes=_loss_mistakes, model="objective-z10-a-1", number="10.3")

register(EXERCISE_LOSS)

# a chapter's page imports this module as its ``exercises``: exercises.task(…), exercises.check(…), exercises.show(…)
from depthutils.teaching.exercises.core import check, show, solution, task  # noqa: E402, F401
