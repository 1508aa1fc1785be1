"""Does a model answer a prompt: the book's one rule, read on the text its greedy decoding gives.

A continuation *gives* an answer when, at the answer's place, it starts with one of the answer's forms and
stops there. Surrounding whitespace, letter case, a leading article ("the", "a", "an") and a dollar sign are
aside; the next character must not continue a word or a number (``" 281"`` and ``" 28.5"`` do not give ``"28"``,
``" Parisian"`` does not give ``"Paris"``). The answer's place is the continuation's start or, for an answer
stated after reasoning, the text after the first ``marker`` (``"The answer is"``); a ``final`` answer (MATH's
boxed one) also counts when it stands boxed anywhere.

The depth score's accuracy (:func:`depthutils.measures.depth_score.accuracies`), the fact check
(:mod:`depthutils.analysis.known_facts`), the start token's measurement (:mod:`depthutils.models.start_token`)
and the embedded models' evaluation (:func:`depthutils.ladder.evaluate.score`) all read it here.
"""
from __future__ import annotations

import re

__all__ = ["ANSWER_MARGIN", "given", "answers", "may_give", "new_tokens"]

#: tokens decoded beyond the answer's own, so that a continuation that goes on past the answer is seen to
ANSWER_MARGIN = 2

_LEAD = r"\s*(?:(?:the|an?)\s+)?\$?"
_STOP = r"\$?(?!\w)(?![.,/]\d)"


def given(text: str, forms, *, marker: str | None = None, final: str | None = None) -> str | None:
    """The start of ``text`` (from the answer's place) that gives one of ``forms`` (the answer, or a list of its
    accepted forms), as written; None when it gives none.

    ``marker``: a regular expression after whose first match the answer stands (a chain of thought's
    "The answer is"); ``final``: an answer that may instead stand boxed anywhere (``\\boxed{final}``)."""
    if final is not None:
        boxed = f"\\boxed{{{final}}}"
        if boxed in text:
            return text[:text.index(boxed) + len(boxed)]
        forms = [final]
    if marker is not None:
        m = re.search(marker, text)
        if m is None:
            return None
        text = text[m.end():]
    for form in [forms] if isinstance(forms, str) else forms:
        form = form.strip()
        if form:
            m = re.match(_LEAD + re.escape(form) + _STOP, text, flags=re.IGNORECASE)
            if m:
                return text[:m.end()]
    return None


def answers(text: str, forms, **where) -> bool:
    """Whether ``text`` gives the answer (:func:`given`)."""
    return given(text, forms, **where) is not None


def may_give(text: str, forms) -> bool:
    """Whether ``text`` (a continuation so far) or a longer one could still give one of ``forms`` at its start
    (:func:`given` without a ``marker`` or ``final``): False only when no continuation of it can, so a greedy
    decoding may stop there. Whitespace runs count as one space; a character cut in two by the tokens
    (``"\\ufffd"``) keeps it open."""
    if "\ufffd" in text:
        return True
    t = re.sub(r"\s+", " ", text.lstrip()).lower()
    for form in [forms] if isinstance(forms, str) else forms:
        f = re.sub(r"\s+", " ", form.strip()).lower()
        if f and any((lead + f).startswith(t) or t.startswith(lead + f)
                     for article in ("", "the ", "a ", "an ") for lead in (article, article + "$")):
            return True
    return False


def new_tokens(n_answer: int, final: bool, max_new_tokens: int) -> int:
    """How many tokens a greedy decoding generates to be judged: up to ``max_new_tokens`` for a ``final`` (boxed)
    answer, else the answer's ``n_answer`` tokens plus :data:`ANSWER_MARGIN` (the cost model counts the same)."""
    return max_new_tokens if final else n_answer + ANSWER_MARGIN
