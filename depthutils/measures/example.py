"""A measurement's example: one small call on a handle and the workload its cost is predicted from.

Every registered measurement's module defines ``example(model, **options) -> Example``: ``run()`` makes the
call (``options`` go to the measurement's function, e.g. ``method="batched"``), and ``work`` holds the
keyword arguments of the measurement's ``cost`` for exactly that call, so that
``cost(shape, dtype=..., remote=..., **work)`` predicts it (:meth:`depthutils.measures.Measurement.predict`).
``python -m depthutils plan --check`` times the examples against their predictions, and the remote tests run
them on NDIF's stand-in and locally. ``work`` holds plain numbers and lists (the check saves it as JSON).

The inputs are short and the same for every model: one GSM8K problem cut to :data:`TOKENS` tokens, P1's
arithmetic prompt, one three-operand addition prompt, and :data:`TEXTS` held-out windows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from depthutils import data
from depthutils.core.encoding import encode_all
from depthutils.core.prompts import P1_ARITHMETIC, Prompt

#: an example's prompts are cut to this many tokens; integrated gradients takes this many steps
TOKENS, STEPS = 40, 32
#: held-out windows of the mapping's example (the model is mapped onto itself)
TEXTS = 6


@dataclass
class Example:
    """One small call of a measurement (``run``) and its cost's keyword arguments (``work``)."""
    run: Callable[[], object]
    work: dict = field(default_factory=dict)


def gsm(model) -> tuple[list[Prompt], list[int]]:
    """One GSM8K problem and its token count on ``model`` after the cut to :data:`TOKENS`."""
    prompts = data.gsm8k(1)
    _, encs, _ = encode_all(model, prompts, max_tokens=TOKENS)
    return prompts, [e.n_tokens for e in encs]


def on_gsm(fn: Callable, model, options: dict, **work) -> Example:
    """The example of a measurement on prompts: ``fn(model, prompts, max_tokens=TOKENS, ...)`` on one GSM8K problem
    (:func:`gsm`), its ``work`` the prompt's token count (``Ts``) and ``work``'s other keyword arguments."""
    prompts, Ts = gsm(model)
    return Example(lambda: fn(model, prompts, max_tokens=TOKENS, progress_bar=False, **options), {"Ts": Ts, **work})


def arithmetic(model) -> tuple[Prompt, int, int]:
    """P1's arithmetic prompt, its token count on ``model`` and the number of positions that predict its answer."""
    prompt = Prompt.from_parts(*P1_ARITHMETIC, "example")
    _, (enc,), _ = encode_all(model, [prompt], need_answer=True)
    return prompt, enc.n_tokens, len(enc.predict_positions)


def addition(model) -> tuple[list[Prompt], object]:
    """One three-operand addition prompt of the project's tasks and its encoding on ``model``."""
    prompts = data.project_task("addition", 1, operands=3)
    _, (enc,), _ = encode_all(model, prompts, need_answer=True)
    return prompts, enc


def held_out_texts(model) -> tuple[list[Prompt], list[int]]:
    """:data:`TEXTS` held-out windows and their token counts on ``model`` after the cut to :data:`TOKENS`."""
    texts = data.heldout_text(TEXTS)
    _, encs, _ = encode_all(model, texts, max_tokens=TOKENS)
    return texts, [e.n_tokens for e in encs]


__all__ = ["Example", "STEPS", "TEXTS", "TOKENS", "addition", "arithmetic", "gsm", "held_out_texts", "on_gsm"]
