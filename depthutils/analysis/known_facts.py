"""Prompts a model can answer, for chapters 4 and 5.

P1 measures erasure (Fig. 6b) and integrated gradients (Fig. 6a) on one arithmetic chain and one two-hop
question that its models answer. A measurement of *how* a model computes an answer says nothing when the
model does not compute it, so on a real model the prompts are checked first:

* **two-hop**: P1's own example first, then the book's list of well-known two-hop facts
  (``data/prompts/two_hop_facts.json``: "The official language of the country where the Eiffel Tower is
  located is" → "French", each with its two single hops as clozes; :func:`curated_pairs`), then two consecutive
  hops of MQuAKE's chains (``../shared/data/MQuAKE-hard.json``; each case has four single hops, each with its
  cloze, answer and aliases), composed in P1's style ("The spouse of the performer of Imagine is"). One is
  graded only when the model answers it *and* both of its single hops;
* **arithmetic**: P1's "5 + 7 + 5 + 3 + 1 + 7 = " → "28" first, then generated sums of ``operands``
  one-digit numbers in the same format (a small model solves few six-operand chains, and many sums of two);
* **chains**: where asked (``chain_operands``), generated sums of that many one-digit numbers, a kind of their
  own beside the two-number sums.

"Answers" is decided in two steps. (1) Greedy continuation: the prompt's context is decoded greedily
(:meth:`ModelHandle.greedy_batch`, batched) for ``max_new`` tokens, and the continuation must begin with the
answer or one of its MQuAKE aliases, by the book's one rule (:func:`depthutils.core.answers.given`). The
matched text, as the model wrote it, becomes the answer. (2) Teacher-forced: the prompt is then tokenised
as the measurement tokenises it (context and answer together, with the model's start token), and every
answer token must be the model's top-1 prediction at the position before it: the measurements read the answer
there, so the check is that the encoding they read is the model's own. Both must hold; answers may be several
tokens.

An embedded (ladder) model knows its own invented world only: it is tried on the chapter's two prompts first,
then on addition chains of 3–6 operands and two-hop compositions held out of its training, each checked the same
way (:func:`depthutils.analysis.fact_candidates.ladder_candidates`). The candidates are built in
:mod:`depthutils.analysis.fact_candidates`.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from depthutils.analysis.fact_candidates import (  # noqa: F401 (callers read them here)
    CURATED,
    HELDOUT,
    Candidate,
    candidates,
    curated_pairs,
    ladder_candidates,
    mquake_pairs,
)
from depthutils.core.answers import given
from depthutils.core.cache import code_version
from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError
from depthutils.core.progress import progress
from depthutils.core.prompts import P1_ARITHMETIC, Prompt  # noqa: F401 (callers read P1_ARITHMETIC here)
from depthutils.core.results import atomic_write
from depthutils.cost import budget
from depthutils.ladder.registry import is_embedded

#: chapters 4 and 5 (and chapter 3's early exit on a real model) grade only prompts the model answers, by greedy decoding (the fact check), and a prompt near
#: that decision can flip with the dtype's rounding: in bfloat16 SmolLM2 "answers" a two-hop prompt it does not
#: answer in float32 (``bench --only dtype``), so these sections run in float32, the faithful computation of
#: the dequantized weights
FACT_CHECK_DTYPE = "float32"

#: the candidates the book tries on a real model: sums of two one-digit numbers, the well-known facts, MQuAKE's
SAMPLE_CANDIDATES = dict(tried=40, tried_arithmetic=40, operands=2, curated=True)
#: the kinds of prompt graded, as the verdict names them
KINDS = {"arithmetic": "arithmetic", "chains": "sums of three or more numbers", "multihop": "two-hop"}
#: on a real model, the sums of more than two numbers tried beside the two-number sums (chapters 4 and 5)
CHAIN_OPERANDS = 3


@dataclass
class FactPrompts:
    """What :func:`prompts_for` returns: the ``prompts`` to grade (name → :class:`Prompt`: ``"arithmetic"``,
    ``"multihop"``, then ``"multihop_2"`` …), every candidate tried (``candidates``, for :meth:`table`), and
    for a kind with nothing to grade, why (``untested``, one sentence each, with the accuracy)."""

    prompts: dict
    candidates: list
    untested: dict = field(default_factory=dict)

    def kinds(self) -> list:
        """The kinds of :data:`KINDS` that were tried, in its order."""
        return [k for k in KINDS if any(c.kind == k for c in self.candidates)]

    def accuracy(self, kind: str) -> dict:
        """``tried``, ``answered``, ``both`` (answers it and both of its single hops; arithmetic: = answered)
        and ``graded``, over the candidates of ``kind``."""
        cs = [c for c in self.candidates if c.kind == kind]
        return {"tried": len(cs), "answered": sum(c.answered for c in cs),
                "both": sum(c.answered and c.knows_hops is not False for c in cs),
                "graded": sum(1 for k in self.prompts if k.split("_")[0] == kind)}

    def facts(self) -> dict:
        """The accuracies as flat numbers, for a chapter's glued prose (``multihop_tried`` …)."""
        return {f"{kind}_{k}": v for kind in KINDS for k, v in self.accuracy(kind).items()}

    def sentence(self, kind: str) -> str:
        """The accuracy of ``kind`` in words."""
        a = self.accuracy(kind)
        ladder = any(c.source == HELDOUT for c in self.candidates)
        if kind == "multihop":
            known = any(c.source == "well-known fact" for c in self.candidates)
            where = ("the chapter's, then compositions held out of its training" if ladder else
                     "P1's, the book's well-known facts and MQuAKE's" if known else "P1's and MQuAKE's")
            return (f"two-hop: the model answers {a['answered']} of {a['tried']} prompts tried ({where}) "
                    f"and knows both single hops of {a['both']} of those; {a['graded']} in the sample.")
        if kind == "chains":
            return (f"{KINDS[kind]}: the model answers {a['answered']} of {a['tried']} sums of {CHAIN_OPERANDS} "
                    f"numbers tried; {a['graded']} in the sample.")
        first = ("the chapter's chain first, then chains of 3–6 numbers held out of its training" if ladder
                 else "P1's chain first")
        return f"arithmetic: the model answers {a['answered']} of {a['tried']} sums tried ({first}); {a['graded']} in the sample."

    def summary(self) -> str:
        return "\n".join(self.sentence(k) for k in self.kinds()) + (
            " An answer counts when the greedy continuation begins with it (or an alias) and, teacher-forced, each "
            "of its tokens is the model's top prediction.")

    def table(self):
        """Every candidate tried, one row each: prompt, answer, whether the model answers it, its hops."""
        rows = []
        for c in self.candidates:
            row = {"kind": c.kind, "source": c.source, "prompt": c.context, "gold": c.forms[0],
                   "continuation": c.continuation.strip()[:40], "answers": c.answered}
            for i, h in enumerate(c.hops[:2], start=1):
                row[f"hop {i}"] = f"{h.context} → {h.forms[0]}"
                row[f"knows hop {i}"] = h.answered if h.checked else None
            row["graded"] = c.graded
            rows.append(row)
        return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------ the checks

def _greedy(lm, contexts: list, max_new: int, batch_size: int | None, max_memory, progress_bar: bool) -> dict:
    """Step 1: the greedy continuation (text) of each distinct context, batched by length (``batch_size``
    contexts, or the most the plan fits in ``max_memory``: :func:`depthutils.cost.budget.decode_batch`)."""
    contexts = list(dict.fromkeys(contexts))
    _, encs, _ = encode_all(lm, [Prompt(c, len(c)) for c in contexts], max_tokens=None)
    if batch_size is None:
        batch_size = budget.decode_batch(lm, [e.n_tokens for e in encs], max_new, max_memory, progress_bar,
                                         "greedy answers", FACT_BATCH)
    order = sorted(range(len(contexts)), key=lambda i: encs[i].n_tokens)  # similar lengths share a batch
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    out = {}
    for batch in progress(batches, "greedy answers", enabled=progress_bar):
        for i, ids in zip(batch, lm.greedy_batch([encs[i].input_ids for i in batch], max_new)):
            out[contexts[i]] = lm.tokenizer.decode(ids[0, encs[i].n_tokens:].tolist(), skip_special_tokens=True)
    return out


def _forced(lm, cands, batch_size: int | None, max_memory, say: bool) -> None:
    """Step 2: teacher-forced, each answer token is the top prediction at the position before it
    (``batch_size`` prompts per forward, or the most the plan fits: :func:`depthutils.cost.budget.forward_batch`)."""
    prompts = [Prompt.from_parts(c.context, c.answer) for c in cands]
    _, encs, _ = encode_all(lm, prompts, need_answer=True, max_tokens=None)
    if batch_size is None:
        batch_size = budget.forward_batch(lm, [e.n_tokens for e in encs], FACT_BATCH, max_memory, say)
    for start in range(0, len(cands), batch_size):
        chunk = list(range(start, min(start + batch_size, len(cands))))
        T = max(encs[i].n_tokens for i in chunk)
        ids = torch.zeros(len(chunk), T, dtype=encs[0].input_ids.dtype)  # right padding: causal, never read
        for r, i in enumerate(chunk):
            ids[r, :encs[i].n_tokens] = encs[i].input_ids[0]
        with lm.no_grad(), lm.trace(ids):
            top = lm.logits().argmax(-1).save()
        for r, i in enumerate(chunk):
            e = encs[i]
            cands[i].forced = bool((top[r, e.predict_positions].cpu() == torch.tensor(e.answer_ids)).all())


def _decode(lm, group, max_new: int, batch_size: int | None, max_memory, progress_bar: bool) -> None:
    """Step 1 on ``group``: decode, then read the answer each continuation begins with."""
    continuations = _greedy(lm, [c.context for c in group], max_new, batch_size, max_memory, progress_bar)
    for c in group:
        c.checked, c.continuation = True, continuations[c.context]
        c.answer = given(c.continuation, c.forms)
        c.greedy = c.answer is not None


#: contexts per greedy decoding and prompts per teacher-forced forward at most (fewer where the plan does not
#: fit them)
FACT_BATCH = 16


def check(lm, cands, *, max_new: int = 8, batch_size: int | None = None, max_memory=None,
          progress_bar: bool = True) -> None:
    """Run both checks on ``cands``, then on the single hops of the two-hop prompts whose greedy continuation
    gives the answer (the others cannot be graded, so their hops are not decoded), in batches of
    ``batch_size`` (default: the most the cost model fits in ``max_memory``, bytes or a size such as
    ``"8GB"``, default what the device has free); fills each candidate's fields."""
    for c in list(cands) + [h for c in cands for h in c.hops]:
        c.graded, c.forced, c.checked, c.greedy, c.answer, c.continuation = False, None, False, False, None, ""
    _decode(lm, list(cands), max_new, batch_size, max_memory, progress_bar)
    hops = [h for c in cands if c.greedy for h in c.hops]
    if hops:
        _decode(lm, hops, max_new, batch_size, max_memory, progress_bar)
    matched = [c for c in list(cands) + hops if c.greedy]
    if matched:
        _forced(lm, matched, batch_size, max_memory, progress_bar)


#: what :func:`check` fills in on a candidate, as the check's cache stores it
CHECKED = ("checked", "continuation", "answer", "greedy", "forced")


def cached_check(lm, cands, cache_dir=None, *, max_new: int = 8, **check_args) -> bool:
    """:func:`check`, or its stored outcome: in ``cache_dir`` (None: no cache) one JSON file per model (its
    ``meta()``: name, revision, dtype, start token), measurement code version
    (:func:`depthutils.core.cache.code_version`), ``max_new`` and candidate list (contexts, answers and hops), so
    chapters 4 and 5 check a model once. An entry that cannot be read is checked again. Returns whether the
    stored outcome was used."""
    if cache_dir is None:
        check(lm, cands, max_new=max_new, **check_args)
        return False
    doc = json.dumps({"code": code_version(), "model": lm.meta(), "max_new": max_new,
                      "candidates": [[c.kind, c.context, c.forms, [[h.context, h.forms] for h in c.hops]]
                                     for c in cands]}, sort_keys=True, default=str)
    path = Path(cache_dir) / f"facts-{hashlib.sha256(doc.encode()).hexdigest()[:24]}.json"
    every = lambda: list(cands) + [h for c in cands for h in c.hops]  # noqa: E731
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        for c, row in zip(every(), stored, strict=True):
            for k in CHECKED:
                setattr(c, k, row[k])
            c.graded = False
        return True
    except (OSError, ValueError, KeyError, TypeError):
        pass
    check(lm, cands, max_new=max_new, **check_args)
    text = json.dumps([{k: getattr(c, k) for k in CHECKED} for c in every()])
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return False


# ------------------------------------------------------------------------------------ the entry point

def prompts_for(lm, *, synthetic: dict | None = None, n: int = 3, n_arithmetic: int = 1, tried: int = 120,
                tried_arithmetic: int = 20, operands: int = 6, chain_operands: int | None = None, curated: bool = False,
                seed: int = 0, max_new: int = 6, batch_size: int | None = None, max_memory=None, cache_dir=None,
                progress_bar: bool = True) -> FactPrompts:
    """The arithmetic and two-hop prompts to grade on ``lm``, and the check that chose them.

    Args:
        synthetic: ``{"arithmetic": (context, answer), "multihop": (context, answer)}``, the chapter's own
            prompts, of the ladder's invented world: an embedded model (which needs them) is tried on them first,
            then on the ladder's held-out chains and compositions (:func:`ladder_candidates`).
        n, n_arithmetic: at most this many two-hop / arithmetic prompts (and sums of ``chain_operands``) are
            graded (the first that pass, in the order tried: P1's own or the chapter's first, then the well-known
            facts, then MQuAKE's or the ladder's held-out ones).
        tried, tried_arithmetic: how many compositions / sums are checked (P1's or the chapter's prompt included).
        operands: how many one-digit numbers each generated sum adds (P1's chain: 6; a real model only).
        chain_operands: a real model is also tried on ``tried_arithmetic`` sums of this many one-digit numbers, a
            kind of their own (``"chains"``, :data:`KINDS`; None: not tried).
        curated: also try the book's well-known two-hop facts (:func:`curated_pairs`, all of them).
        seed: which MQuAKE compositions and generated sums are tried.
        max_new: tokens of greedy continuation (an answer must be complete within them).
        batch_size: contexts per batched decoding and per teacher-forced forward (default: the most the cost
            model fits in ``max_memory``, at most :data:`FACT_BATCH`; :mod:`depthutils.cost.budget`, which says so
            in a terminal).
        max_memory: the budget of that choice, bytes or a size such as ``"8GB"`` (default: what the device
            has free).
        cache_dir: where the check's outcome is stored and read again (:func:`cached_check`; None: checked
            every call).
    """
    for name, v in (("n", n), ("n_arithmetic", n_arithmetic), ("tried", tried), ("tried_arithmetic", tried_arithmetic),
                    ("max_new", max_new), ("batch_size", 1 if batch_size is None else batch_size)):
        if not isinstance(v, int) or isinstance(v, bool) or v < (0 if name.startswith("n") else 1):
            raise DepthError(f"{name} must be a whole number (≥ 1, or ≥ 0 for a count to grade), got {v!r}.")
    if is_embedded(lm):
        if not synthetic:
            raise DepthError("An embedded model is tried on the chapter's own prompts first: pass them as synthetic="
                             "{'arithmetic': (context, answer), 'multihop': (context, answer)}.")
        cands = ladder_candidates(synthetic, tried=tried, tried_arithmetic=tried_arithmetic, seed=seed)
    else:
        cands = candidates(tried=tried, seed=seed, n_arithmetic=tried_arithmetic, operands=operands,
                           chain_operands=chain_operands, curated=curated)
    cached_check(lm, cands, cache_dir, max_new=max_new, batch_size=batch_size, max_memory=max_memory,
                 progress_bar=progress_bar)
    prompts, out = {}, FactPrompts({}, cands)
    for kind, limit in (("arithmetic", n_arithmetic), ("chains", n_arithmetic), ("multihop", n)):
        if not any(c.kind == kind for c in cands):
            continue
        chosen = [c for c in cands if c.kind == kind and c.gradable][:limit]
        for k, c in enumerate(chosen):
            c.graded = True
            prompts[kind if k == 0 else f"{kind}_{k + 1}"] = Prompt.from_parts(c.context, c.answer, c.source)
        out.prompts = prompts
        if not chosen:
            out.untested[kind] = out.sentence(kind)
    return out
