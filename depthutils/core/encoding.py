"""A prompt list tokenised for one model and fitted to its context, never silently."""
from __future__ import annotations

from depthutils.core.errors import DepthError, NothingFits
from depthutils.core.prompts import Encoded, Fit, Prompt, as_prompt, encode, fit_to_context

__all__ = ["as_prompts", "resolve_max_tokens", "encode_all"]


def as_prompts(prompts) -> list[Prompt]:
    """A list of :class:`Prompt` from one prompt, one string, or a list of either."""
    if isinstance(prompts, (Prompt, str)):
        prompts = [prompts]
    prompts = [as_prompt(p) for p in prompts]
    if not prompts:
        raise DepthError("No prompts were given; pass at least one prompt.")
    return prompts


def resolve_max_tokens(handle, max_tokens: int | None) -> int | None:
    """``max_tokens`` checked against the model's context; ``None`` means the whole context."""
    context = handle.max_length
    if max_tokens is None:
        return context
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 2:
        raise DepthError(f"max_tokens must be a whole number ≥ 2 (or None for the model's context), got {max_tokens!r}.")
    if context is not None and max_tokens > context:
        raise DepthError(f"max_tokens={max_tokens} exceeds the model's context of {context} tokens; "
                         f"use max_tokens ≤ {context} (or None).")
    return max_tokens


def encode_all(handle, prompts, need_answer: bool = False, max_tokens: int | None = None,
               limit: int | None = None, rule: str | None = None) -> tuple[list[Prompt], list[Encoded], Fit]:
    """Tokenise the prompts for ``handle`` and fit them to its context, never silently.

    Text-only measurements (``rule="cut"``, the default without ``need_answer``) cut a
    longer prompt to its first ``max_tokens`` tokens; measurements that need an answer
    (``rule="skip"``) skip a prompt whose answer would fall outside them. ``limit`` keeps
    the first ``limit`` prompts that fit. Returns the kept prompts, their encodings and the
    :class:`~depthutils.core.prompts.Fit` (used / cut / skipped) that every result records.
    """
    prompts = as_prompts(prompts)
    max_tokens = resolve_max_tokens(handle, max_tokens)
    rule = rule or ("skip" if need_answer else "cut")
    bos = getattr(handle, "prepend_bos", True)
    lazy = (encode(handle.tokenizer, p, need_answer, bos) for p in prompts)
    kept, encs, fit = fit_to_context(lazy, max_tokens, rule, limit)
    if not encs:
        shortest = min(max(e.answer_positions, default=e.n_tokens - 1) + 1
                       for e in (encode(handle.tokenizer, p, need_answer, bos) for p in prompts))
        context = handle.max_length
        fix = (f"raise max_tokens (up to the model's context, {context})" if context and max_tokens < context
               else "use shorter prompts or a model with a longer context")
        raise NothingFits(f"None of the {len(prompts)} prompt(s) fits: the shortest answer ends at token {shortest} "
                         f"but max_tokens is {max_tokens}; {fix}.")
    return [prompts[i] for i in kept], encs, fit
