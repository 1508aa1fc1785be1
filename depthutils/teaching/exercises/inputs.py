"""What the exercises' checks run on: the embedded model (loaded once) and the token ids of the cases."""
from __future__ import annotations

import functools

import nnsight
import torch

from depthutils import data
from depthutils.core.prompts import Encoded, Prompt, encode
from depthutils.measures.contributions import prompt_stats
from depthutils.models.architectures import check_residual
from depthutils.models.handle import load_model


@functools.lru_cache(maxsize=None)
def _model(name: str):
    """The model ``name``, loaded once per session."""
    return load_model(name)


def _encoded(lm, prompt: Prompt, max_tokens: int | None = None) -> Encoded:
    enc = encode(lm.tokenizer, prompt, need_answer=prompt.answer_start < len(prompt.text), prepend_bos=lm.prepend_bos)
    if max_tokens is not None:
        enc.input_ids = enc.input_ids[:, :max_tokens]
    return enc


def batch(lm, n: int = 2, tokens: int = 24) -> torch.Tensor:
    """``[n, tokens]`` ids of ``n`` different public-domain passages (BOS first), cut to the same length."""
    ids = [_encoded(lm, p).input_ids[:, :tokens] for p in data.heldout_text(n, words=40)]
    T = min(i.shape[1] for i in ids)
    return torch.cat([i[:, :T] for i in ids])


def _one(lm, tokens: int = 24) -> tuple[torch.Tensor, Prompt]:
    """One passage's ids ``[1, tokens]`` and its prompt (the library re-encodes it and cuts it the same way)."""
    p = data.heldout_text(1, words=40)[0]
    return _encoded(lm, p, tokens).input_ids, p


def _answer(lm, prompt: Prompt) -> dict:
    """A prompt with an answer as the exercises take it: ``input_ids``, ``predict_positions``, ``answer_ids``."""
    enc = _encoded(lm, prompt)
    return {"input_ids": enc.input_ids, "predict_positions": enc.predict_positions, "answer_ids": enc.answer_ids}


def _rows(ids: torch.Tensor) -> list[Encoded]:
    return [Encoded(ids[b:b + 1], [], [], [], []) for b in range(ids.shape[0])]


def _stats(lm, case) -> torch.Tensor:
    """The library's per-token contributions statistics ``[B, L, 6, T]``."""
    return torch.stack([prompt_stats(lm, e) for e in _rows(case["input_ids"])])


def _hidden(lm, ids: torch.Tensor) -> torch.Tensor:
    """``[L+1, B, T, d]``: ``h_0 … h_L`` through the library's accessors (``h_L``: the last layer's output)."""
    B, T = ids.shape
    with lm.no_grad(), lm.trace(ids):
        hs = nnsight.save([])  # made and saved inside the trace, filled in forward order
        for l in range(lm.n_layers):
            hs.append(check_residual(lm.layers_input(l), B, T, f"layer {l} input").save())
        hs.append(check_residual(lm.layers_output(lm.n_layers - 1), B, T, "last layer output").save())
    return torch.stack(list(hs))

