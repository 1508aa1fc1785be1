"""Prompts that know where their answer is, and their tokenisation for one model."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import torch

from depthutils.core.errors import DepthError

#: P1's arithmetic prompt and its answer
P1_ARITHMETIC = ("5 + 7 + 5 + 3 + 1 + 7 = ", "28")


@dataclass(frozen=True)
class Prompt:
    """A teacher-forced text whose answer starts at character ``answer_start``.

    ``text`` is the whole text, answer included: measurements run one forward
    pass over it, and the logits at the positions just before the answer tokens
    are the ones that predict the answer.
    """

    text: str
    answer_start: int
    source: str = ""
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def answer(self) -> str:
        return self.text[self.answer_start:]

    @property
    def context(self) -> str:
        return self.text[: self.answer_start]

    @classmethod
    def from_parts(cls, context: str, answer: str, source: str = "", **meta) -> "Prompt":
        return cls(context + answer, len(context), source, meta)

    @classmethod
    def locate(cls, text: str, answer: str, source: str = "", **meta) -> "Prompt":
        """A prompt from a whole text whose answer is its last occurrence of ``answer``."""
        at = text.rfind(answer) if answer else -1
        if at < 0:
            raise DepthError(f"The answer {answer!r} was not found in the text {text[:60]!r}; "
                             "give the answer exactly as it appears in the text.")
        return cls(text, at, source, meta)


@dataclass
class Encoded:
    """Token ids ``[1, T]`` of a prompt and the positions that matter for it."""

    input_ids: torch.Tensor
    tokens: list[str]
    answer_positions: list[int]   # positions of the answer tokens
    predict_positions: list[int]  # positions whose logits predict them (answer_positions - 1)
    answer_ids: list[int]

    @property
    def n_tokens(self) -> int:
        return int(self.input_ids.shape[1])


def as_prompt(prompt: "Prompt | str", answer: str | None = None) -> Prompt:
    """Accept a :class:`Prompt`, or a context string plus an answer string."""
    if isinstance(prompt, Prompt):
        return prompt
    if not isinstance(prompt, str):
        raise DepthError(f"Expected a Prompt or a string, got {type(prompt).__name__}.")
    if answer is None:
        return Prompt(prompt, len(prompt))
    return Prompt.from_parts(prompt, answer)


def bos_token_id(tokenizer) -> int | None:
    """The token to prepend when a tokenizer adds no BOS: its BOS, else its EOS (TransformerLens's rule)."""
    for attr in ("bos_token_id", "eos_token_id"):
        value = getattr(tokenizer, attr, None)
        if isinstance(value, int):
            return value
    return None


def start_token_id(tokenizer, prepend_bos: bool | str = True) -> int | None:
    """The id :func:`encode` puts at position 0, or ``None`` for no start token.

    ``prepend_bos``: ``True`` (the tokenizer's BOS, or its EOS where it has none), ``False`` (none), one token of
    the vocabulary, or ``"auto"``, which outside a loaded model is ``True`` (see :mod:`depthutils.models.start_token`).
    """
    if prepend_bos is True or prepend_bos == "auto":
        return bos_token_id(tokenizer)
    if prepend_bos is False or prepend_bos is None:
        return None
    if isinstance(prepend_bos, str):  # one lookup, not get_vocab() (35 ms on SmolLM2, at every encoding)
        tid = tokenizer.convert_tokens_to_ids(prepend_bos)
        if not isinstance(tid, int) or tokenizer.convert_ids_to_tokens(tid) != prepend_bos:
            raise DepthError(f"prepend_bos={prepend_bos!r} is not one token of this tokenizer; give 'auto', True, "
                             "False or a token of its vocabulary such as its BOS or EOS.")
        return int(tid)
    raise DepthError(f"prepend_bos must be 'auto', True, False or one token, got {prepend_bos!r}.")


def encode(tokenizer, prompt: Prompt, need_answer: bool = False, prepend_bos: bool | str = True) -> Encoded:
    """Tokenise ``prompt.text`` once and locate the answer tokens through the offset mapping.

    Position 0 is the attention sink that no measurement intervenes on. When the
    tokenizer adds no BOS and ``prepend_bos`` is on, its BOS (or its EOS where it has
    no BOS) is prepended, as TransformerLens's ``prepend_bos`` does, so that position 0
    never holds the first real token. ``prepend_bos`` may also name one token (it takes the
    place of a BOS the tokenizer adds itself), or be ``False``: then a BOS the tokenizer adds is
    dropped too, and position 0 is the first real token.
    """
    enc = tokenizer(prompt.text, return_offsets_mapping=True, return_tensors="pt", verbose=False)
    ids = enc["input_ids"]
    offsets = [tuple(o) for o in enc["offset_mapping"][0].tolist()]
    start = start_token_id(tokenizer, prepend_bos)
    own = getattr(tokenizer, "bos_token_id", None)
    if own is not None and ids.shape[1] and int(ids[0, 0]) == own and offsets[0] == (0, 0) and start != own:
        ids, offsets = ids[:, 1:], offsets[1:]  # the tokenizer's own BOS, replaced or dropped on request
    if start is not None and (ids.shape[1] == 0 or int(ids[0, 0]) != start or offsets[0] != (0, 0)):
        ids = torch.cat([torch.tensor([[start]], dtype=ids.dtype), ids], dim=1)
        offsets = [(0, 0)] + offsets
    begin, end = prompt.answer_start, len(prompt.text)
    answer_pos = [i for i, (a, b) in enumerate(offsets) if b > a and b > begin and a < end and i > 0]
    if need_answer and (not answer_pos or begin >= end):
        raise DepthError(
            f"No answer tokens were found in the prompt {prompt.text[:60]!r}: give a non-empty answer "
            "that is part of the text (context + answer)."
        )
    tokens = tokenizer.convert_ids_to_tokens(ids[0].tolist())
    return Encoded(ids, tokens, answer_pos, [p - 1 for p in answer_pos], [int(ids[0, p]) for p in answer_pos])


def bos_mode(tokenizer, prepend_bos: bool | str = True) -> str:
    """What position 0 holds for this tokenizer: ``"tokenizer"`` (it adds a BOS itself),
    ``"prepended"`` (depthutils adds one), ``"off"`` (none, by request), ``"unavailable"``, or the
    token named by ``prepend_bos`` (e.g. ``"<|endoftext|>"``)."""
    bos = bos_token_id(tokenizer)
    if isinstance(prepend_bos, str) and prepend_bos != "auto":
        start = start_token_id(tokenizer, prepend_bos)
        if start != bos:
            return prepend_bos
    ids = tokenizer("a")["input_ids"]
    if prepend_bos is False:
        return "off"
    if bos is not None and ids and ids[0] == bos:
        return "tokenizer"
    if bos is None:
        return "unavailable"
    return "prepended"


#: how prompts that are longer than ``max_tokens`` are fitted: text-only measurements cut
#: them to their first tokens, measurements that need an answer skip them.
RULES = ("cut", "skip")


@dataclass
class Fit:
    """How a list of prompts was fitted to ``max_tokens`` (recorded in every result's metadata)."""

    rule: str
    max_tokens: int | None
    used: int = 0
    cut: int = 0
    skipped: int = 0

    def as_dict(self) -> dict:
        return {"rule": self.rule, "max_tokens": self.max_tokens, "used": self.used, "cut": self.cut,
                "skipped": self.skipped}


def fit_to_context(encs: Iterable[Encoded], max_tokens: int | None, rule: str, limit: int | None = None,
                   ) -> tuple[list[int], list[Encoded], Fit]:
    """Fit encoded prompts into ``max_tokens``; returns (kept indices, fitted encodings, :class:`Fit`).

    ``rule="cut"`` keeps the first ``max_tokens`` tokens of a longer prompt (its answer
    positions beyond the cut are dropped); ``rule="skip"`` drops a prompt whose answer
    ends beyond ``max_tokens`` and cuts only text that follows the answer. ``limit`` stops
    once that many prompts are kept (a task takes its first ``limit`` prompts that fit), so
    ``encs`` may be a lazy iterable. A prompt without an answer counts as all answer for "skip".
    """
    if rule not in RULES:
        raise DepthError(f"rule must be one of {RULES}, got {rule!r}.")
    fit, kept, out = Fit(rule, max_tokens), [], []
    for i, enc in enumerate(encs):
        if limit is not None and len(out) >= limit:
            break
        if max_tokens is None or enc.n_tokens <= max_tokens:
            kept.append(i)
            out.append(enc)
            continue
        last = max(enc.answer_positions) if enc.answer_positions else enc.n_tokens - 1  # no answer: all of it
        if rule == "skip" and last >= max_tokens:
            fit.skipped += 1
            continue
        keep = [k for k, p in enumerate(enc.answer_positions) if p < max_tokens]
        out.append(Encoded(enc.input_ids[:, :max_tokens], enc.tokens[:max_tokens],
                           [enc.answer_positions[k] for k in keep], [enc.predict_positions[k] for k in keep],
                           [enc.answer_ids[k] for k in keep]))
        kept.append(i)
        fit.cut += 1
    fit.used = len(out)
    return kept, out, fit
