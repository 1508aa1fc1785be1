"""Prompts that know where their answer is, and their tokenisation for one model."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .errors import DepthError


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


def encode(tokenizer, prompt: Prompt, max_length: int | None = None, need_answer: bool = False) -> Encoded:
    """Tokenise ``prompt.text`` once and locate the answer tokens through the offset mapping."""
    enc = tokenizer(prompt.text, return_offsets_mapping=True, return_tensors="pt")
    ids = enc["input_ids"]
    T = ids.shape[1]
    if max_length is not None and T > max_length:
        raise DepthError(
            f"The prompt has {T} tokens but the model's context is {max_length}; shorten it or lower max_tokens."
        )
    offsets = enc["offset_mapping"][0].tolist()
    start, end = prompt.answer_start, len(prompt.text)
    answer_pos = [i for i, (a, b) in enumerate(offsets) if b > a and b > start and a < end and i > 0]
    if need_answer and (not answer_pos or start >= end):
        raise DepthError(
            f"No answer tokens were found in the prompt {prompt.text[:60]!r}: give a non-empty answer "
            "that is part of the text (context + answer)."
        )
    tokens = tokenizer.convert_ids_to_tokens(ids[0].tolist())
    return Encoded(ids, tokens, answer_pos, [p - 1 for p in answer_pos], [int(ids[0, p]) for p in answer_pos])
