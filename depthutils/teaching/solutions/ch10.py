"""Chapter 10, the objectives experiment: the reference solution of its implement-it exercise."""
from __future__ import annotations

import torch

__all__ = ["answer_only_targets", "answer_only_loss"]


def answer_only_targets(input_ids, answer_mask):
    """The answer-only objective's targets: the next token of every position (``input_ids[:, 1:]``), set to
    ``-100`` (``cross_entropy``'s ``ignore_index``) wherever that next token is not an answer token
    (``answer_mask[:, 1:]`` False). Returns ``[B, T − 1]`` for ``input_ids`` and ``answer_mask`` ``[B, T]``."""
    B, T = input_ids.shape
    assert answer_mask.shape == (B, T) and answer_mask.dtype == torch.bool
    targets = input_ids[:, 1:].clone()          # position p predicts token p + 1
    targets[~answer_mask[:, 1:]] = -100         # only the answer tokens count in the loss
    return targets


def answer_only_loss(lm, input_ids, answer_mask):
    """The answer-only objective's loss on a batch of chains: the mean, over the answer tokens only, of the
    next-token cross-entropy ``−log p(token p + 1 | tokens ≤ p)`` (``input_ids``, ``answer_mask`` ``[B, T]``)."""
    B, T = input_ids.shape
    with torch.no_grad():
        logits = lm.hf(input_ids=input_ids).logits               # [B, T, V]: position p predicts token p + 1
    assert logits.shape[:2] == (B, T)
    log_p = logits[:, :-1].float().log_softmax(-1)                # [B, T − 1, V]
    next_tokens = input_ids[:, 1:]                                 # [B, T − 1]
    token_loss = -log_p.gather(-1, next_tokens[..., None])[..., 0]  # [B, T − 1]
    counted = answer_mask[:, 1:]                                   # the answer tokens' targets only
    return float(token_loss[counted].mean())
