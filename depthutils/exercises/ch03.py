"""Chapter 3, the logit lens: the KL of the lens at one layer.

The chapter's prediction exercise is 3.1 (prose only, on the page); this is 3.2, checked by
:func:`depthutils.exercises.check`.
"""
from __future__ import annotations

import torch

from ..logit_lens import prompt_lens
from .core import _LAYER_INPUT, _NEXT_LAYER, Exercise, register
from .inputs import _rows, batch


def _lens_mistakes(lm, case):
    ids, l = case["input_ids"], case["layer"]
    with lm.no_grad(), lm.trace(ids):
        h = lm.layers_output(l)
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
    "KL(q_l ‖ q_L) at every token, [B, T], where q_l = softmax(unembed(final_norm(h_{l+1}))) is the "
    "lens on layer `layer`'s output and q_L the model's output distribution",
    difficulty=2, importance=5,
    hints=("In an nnsight trace, `lm.final_norm` and `lm.unembed` can be called on a tensor, "
           "and `lm.unembed.output` is the model's own logits.",
           "Work in log-probabilities (`log_softmax`): KL = Σ q_l (log q_l − log q_L). Note the direction."),
    cases=lambda lm: [dict(input_ids=batch(lm), layer=l) for l in (1, 5)],
    reference=lambda lm, case: torch.stack([prompt_lens(lm, (e, 5))[case["layer"], 0]
                                            for e in _rows(case["input_ids"])]),
    axes=("batch row", "position"), mistakes=_lens_mistakes,
    shifts={"layer": {-1: _LAYER_INPUT, 1: _NEXT_LAYER}},
    number="3.2")

register(EXERCISE)
