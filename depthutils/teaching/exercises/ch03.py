"""Chapter 3, the logit lens: the KL of the lens at one layer.

The chapter's prediction exercise is 3.1 (prose only, on the page); 3.2 (core) is the lens's KL at one layer
and 3.3 (stretch) its top-5 overlap with the output at every layer, both checked by
:func:`depthutils.teaching.exercises.check`.
"""
from __future__ import annotations

import torch

from depthutils.measures.logit_lens import prompt_lens
from depthutils.teaching.exercises.core import _LAYER_OUTPUT, _PREVIOUS_LAYER, Exercise, register
from depthutils.teaching.exercises.inputs import _rows, batch


def _lens_mistakes(lm, case):
    ids, l = case["input_ids"], case["layer"]
    with lm.no_grad(), lm.trace(ids):
        h = lm.layers_input(l)
        raw = lm.finish_logits(lm.unembed(h)).save()
        lens = lm.lens(h).save()
        final = lm.logits().save()
    log_q, log_p, log_raw = (x.float().log_softmax(-1) for x in (lens, final, raw))
    kl = (log_q.exp() * (log_q - log_p)).sum(-1)
    over_t = lens.float().log_softmax(1), final.float().log_softmax(1)
    return {"this is KL(q_L ‖ q_l), the other direction: chapter 3's KL puts the lens first, "
            "Σ q_l (log q_l − log q_L)": (log_p.exp() * (log_p - log_q)).sum(-1),
            "this is the lens without the final norm: apply final_norm to h before the unembedding":
            (log_raw.exp() * (log_raw - log_p)).sum(-1),
            "this is the lens of batch row 0 against every row's output: `output[0]` is batch row 0 of the "
            "tensor [B, T, d], not the first element of a tuple": (log_q[:1].exp() * (log_q[:1] - log_p)).sum(-1),
            "this KL is in bits (log base 2): the book's KL is in nats, with the natural log (`log_softmax`)":
            kl / torch.log(torch.tensor(2.0)),
            "these softmaxes run over the positions (dim=1): normalise over the vocabulary, `log_softmax(-1)`":
            (over_t[0].exp() * (over_t[0] - over_t[1])).sum(-1),
            "this is the mean KL over the positions: return one KL per token, [B, T]": kl.mean(-1)}


EXERCISE = Exercise(
    "lens_kl", "03_logit_lens", "The logit lens at one layer",
    "lens_kl(lm, input_ids, layer) -> torch.Tensor",
    "KL(q_l ‖ q_L) at every token, [B, T], where q_l = softmax(unembed(final_norm(h_l))) is the lens on "
    "h_l, the residual entering layer `layer` (its input), and q_L the model's output distribution",
    difficulty=2, importance=5,
    hints=("In an nnsight trace, `lm.final_norm` and `lm.unembed` can be called on a tensor, "
           "and `lm.unembed.output` is the model's own logits.",
           "Work in log-probabilities (`log_softmax`): KL = Σ q_l (log q_l − log q_L). Note the direction."),
    cases=lambda lm: [dict(input_ids=batch(lm), layer=l) for l in (1, 5)],
    reference=lambda lm, case: torch.stack([prompt_lens(lm, (e, 5))[case["layer"], 0]
                                            for e in _rows(case["input_ids"])]),
    axes=("batch row", "position"), mistakes=_lens_mistakes,
    shifts={"layer": {-1: _PREVIOUS_LAYER, 1: _LAYER_OUTPUT}},
    number="3.2")


def _overlap_mistakes(lm, case):
    ids, L, k = case["input_ids"], lm.n_layers, 5
    outs, ins, raws = [], [], []
    with lm.no_grad(), lm.trace(ids):
        for l in range(L):
            h = lm.layers_input(l)
            ins.append(lm.lens(h).save())
            raws.append(lm.finish_logits(lm.unembed(h)).save())
            outs.append(lm.lens(lm.layers_output(l)).save())
        final = lm.logits().save()
    top_final = final.topk(k, dim=-1).indices

    def overlap(lens, per="set", scale=1 / k, against=top_final):
        rows = []
        for z in lens:
            top = z.topk(k, dim=-1).indices
            hit = (top == against) if per == "rank" else (top[..., :, None] == against[..., None, :]).any(-1)
            rows.append(hit.float().sum(-1) * scale)
        return torch.stack(rows, dim=1)
    return {"this counts the shared tokens (0 … 5): the overlap is that count divided by 5": overlap(ins, scale=1),
            "this compares the two top-5 lists rank by rank: the overlap is the size of the intersection of the "
            "two *sets*, |top5(q_l) ∩ top5(q_L)|, whatever their order": overlap(ins, per="rank"),
            "this is the lens without the final norm: apply final_norm to h before the unembedding": overlap(raws),
            "these lenses read each layer's output (h_{l+1}) instead of its input (h_l): read `.input`, the "
            "residual entering the layer, as NDIF's reproduction notebook of P1 and P2's code do": overlap(outs),
            "this is the overlap with batch row 0's output for every row: `output[0]` is batch row 0 of the "
            "tensor [B, T, V], not the first element of a tuple": overlap(ins, against=top_final[:1]),
            "this is top-1 agreement: compare the top 5 of each, `topk(5)`": torch.stack(
                [(z.argmax(-1) == final.argmax(-1)).float() for z in ins], dim=1)}


STRETCH = Exercise(
    "lens_overlap", "03_logit_lens", "The lens's top-5 overlap at every layer",
    "lens_overlap(lm, input_ids) -> torch.Tensor",
    "[B, L, T]: |top5(q_l) ∩ top5(q_L)| / 5 at every layer l = 0 … L−1 and every token, where q_l is the lens "
    "on h_l, the residual entering layer l (h_0 is the embedding), and q_L the model's output distribution",
    difficulty=3, importance=4,
    hints=("One trace: the lens of every layer's input, `lm.unembed(lm.final_norm(lm.layer(l).input))`, and the "
           "model's own logits, `lm.unembed.output`. The top 5 of logits are those of the probabilities.",
           "The overlap is of two *sets* of token ids: compare every pair, "
           "`(top[..., :, None] == top_final[..., None, :]).any(-1)`, never a vocabulary-wide one-hot.",
           "Stack the layers on dim 1, and divide the count by 5."),
    cases=lambda lm: [dict(input_ids=batch(lm))],
    reference=lambda lm, case: torch.stack([prompt_lens(lm, (e, 5))[:, 1] for e in _rows(case["input_ids"])]),
    axes=("batch row", "layer", "position"), mistakes=_overlap_mistakes,
    number="3.3")

register(EXERCISE, STRETCH)

# a chapter's page imports this module as its ``exercises``: exercises.task(…), exercises.check(…), exercises.show(…)
from depthutils.teaching.exercises.core import check, show, solution, task  # noqa: E402, F401
