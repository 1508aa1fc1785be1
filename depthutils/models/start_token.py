"""What stands at position 0: the ``prepend_bos`` option, and its choice by measurement for the named real models.

``prepend_bos`` is ``True`` (the tokenizer's BOS, or its EOS where it has none: TransformerLens's rule and the
specification's default), ``False`` (no start token: position 0 is the prompt's first real token, which no
measurement intervenes on), one token of the vocabulary (e.g. ``"<|endoftext|>"``), or ``"auto"``.

``"auto"`` is ``True`` for every model except the named real models (:mod:`depthutils.models.real.catalog`). For those, a
chat tokenizer's BOS (SmolLM2's ``<|im_start|>``) is not a neutral start, and neither is none; so the start is
chosen by measurement: the accuracy of the chapters' kinds of task on held-out prompts (addition chains,
single-hop facts, GSM8K solutions) with each start — none, the BOS, the document separator — on the model's
float32 weights, and the best one is used (a near tie goes by :data:`ORDER`: :func:`pick`). The table is recorded in the model cache beside the model (``<name>.start.json``) and shown on its card.
"""
from __future__ import annotations

import copy
import datetime
import hashlib
import importlib
import json
from pathlib import Path

import torch

from depthutils import data
from depthutils.core.answers import answers, may_give, new_tokens
from depthutils.core.errors import DepthError
from depthutils.core.progress import progress
from depthutils.core.prompts import Prompt, bos_token_id, encode
from depthutils.core.results import atomic_write
from depthutils.models.real.catalog import REAL_MODELS, cache_root

__all__ = ["AUTO", "ORDER", "TIE", "candidates", "check_option", "measure", "pick", "recorded", "choose", "describe", "TASKS"]

AUTO = "auto"
#: the held-out prompts of the measurement: (task, loader) — none of them is a prompt a chapter runs
TASKS = {
    "addition": lambda: data.arithmetic(40, seed=991),   # 2-6 single digits, as the chapters' chains (seed 0)
    "facts": lambda: data.mquake(None, hops=1)[-40:],                      # the chapters take MQuAKE from the front
    "gsm8k": lambda: [_solution(p) for p in data.gsm8k(None)[-8:]],         # likewise GSM8K
}
#: starts whose mean accuracies are this close are tied, and the tie goes to the first in :data:`ORDER`: one answer
#: of one 40-prompt task moves the mean over the three tasks by 1/120. Measured on SmolLM2-135M, "none" and
#: "separator" came 0.0008 and 0.0083 apart in two measurements that chose differently before this rule.
TIE = 1 / 120
#: the tie-break order: the specification's default (the tokenizer's BOS) first, then a start token before none
ORDER = ("bos", "separator", "none")
#: a task's accuracy: the share of prompts answered (addition, facts: :func:`_accuracy`), or the mean over the
#: solution's tokens of the teacher-forced top-1 hits (GSM8K: a text task, where whole answers are rare at this size)
PER_TOKEN = {"gsm8k"}


def _solution(p: Prompt) -> Prompt:
    """A GSM8K prompt whose graded part is the whole written solution, not only the final number."""
    return Prompt(p.text, p.text.index("\n\n") + 2, p.source)


def check_option(value) -> None:
    """One sentence when ``prepend_bos`` is none of the allowed kinds."""
    if isinstance(value, bool) or value == AUTO or (isinstance(value, str) and value):
        return
    raise DepthError(f"prepend_bos must be 'auto', True, False or one token such as '<|endoftext|>', got {value!r}.")


def candidates(tokenizer, separator: str | None = None) -> dict[str, bool | str]:
    """The starts a measurement compares: ``{"none": False, "bos": True, "separator": token}`` without repeats.

    The document separator is ``separator`` when given (a named model's card), else ``<|endoftext|>`` where the
    vocabulary has it, else the EOS."""
    out: dict[str, bool | str] = {"none": False}
    bos = bos_token_id(tokenizer)
    if bos is not None:
        out["bos"] = True
    vocab = tokenizer.get_vocab()
    sep = separator or ("<|endoftext|>" if "<|endoftext|>" in vocab else tokenizer.eos_token)
    if sep and sep in vocab and vocab[sep] != bos:
        out["separator"] = sep
    return out


def _accuracy(module, tokenizer, prompts: list[Prompt], start, per_token: bool) -> float:
    """The share of ``prompts`` the model answers with ``start`` at position 0: its greedy continuation gives the
    answer by the book's one rule (:func:`depthutils.core.answers.given`); with ``per_token``, the mean over
    the answer's tokens of the teacher-forced top-1 hits (a solution's every token: a likelihood, not an answer)."""
    hits = []
    with torch.inference_mode():
        for p in prompts:
            enc = encode(tokenizer, p, need_answer=True, prepend_bos=start)
            if per_token:
                keep = torch.tensor(enc.predict_positions)
                logits = module(input_ids=enc.input_ids, logits_to_keep=keep).logits  # only where an answer token is predicted
                if logits.shape[:2] != (1, len(keep)):
                    raise DepthError(f"The model returned logits of shape {tuple(logits.shape)} for {len(keep)} kept positions.")
                hits += [a == b for a, b in zip(logits[0].argmax(-1).tolist(), enc.answer_ids)]
                continue
            context = enc.input_ids[:, :enc.answer_positions[0]]
            out = _greedy(module, context, new_tokens(len(enc.answer_ids), False, 0),
                          lambda ids: may_give(tokenizer.decode(ids, skip_special_tokens=True), p.answer))
            hits.append(answers(tokenizer.decode(out, skip_special_tokens=True), p.answer))
    return sum(hits) / len(hits)


def _greedy(module, context: torch.Tensor, n: int, viable=None) -> list[int]:
    """``n`` greedily decoded token ids after ``context`` (one row), with the model's key-value cache; fewer
    when ``viable(ids so far)`` turns False (the answer can no longer be given: the rest cannot change that)."""
    out, ids, past = [], context, None
    for _ in range(n):
        if out and viable is not None and not viable(out):
            break
        step = module(input_ids=ids, past_key_values=past, use_cache=True, logits_to_keep=1)
        if step.logits.shape[:2] != (1, 1):
            raise DepthError(f"The model returned logits of shape {tuple(step.logits.shape)} for one kept position.")
        past, ids = step.past_key_values, step.logits[:, -1].argmax(-1, keepdim=True)
        out.append(int(ids))
    return out


def _float32(module):
    """``module`` itself when it computes in float32, else a float32 copy of it: loaded again from its folder
    (a named real model's cache holds float32 weights, which a bfloat16 load has rounded), or cast from its own
    weights where it has no folder. ``module`` is left as it was."""
    if next(module.parameters()).dtype == torch.float32:
        return module
    folder = Path(str(getattr(module.config, "_name_or_path", "") or ""))
    if folder.is_dir() and (folder / "config.json").exists():
        return type(module).from_pretrained(str(folder), dtype=torch.float32).eval()
    return copy.deepcopy(module).to(torch.float32).eval()


def pick(mean: dict[str, float]) -> str:
    """The chosen start: the first in :data:`ORDER` whose mean accuracy is within :data:`TIE` of the best."""
    best = max(mean.values())
    return next(label for label in ORDER if label in mean and mean[label] >= best - TIE)


def measure(module, tokenizer, separator: str | None = None) -> dict:
    """Each start's accuracy on each task, and the chosen start (:func:`pick`).

    ``module`` is the plain ``transformers`` model. The measurement runs on its float32 weights whatever dtype it
    was loaded in (:func:`_float32`), so that the choice does not depend on which chapter loaded the model first.
    Returns ``{"table": {start: {task: acc}}, "choice": label, "tokens": {label: value}, "n": {task: prompts}}``."""
    starts = candidates(tokenizer, separator)
    prompts = {task: load() for task, load in TASKS.items()}
    items = [(label, task) for label in starts for task in prompts]
    table: dict[str, dict[str, float]] = {label: {} for label in starts}
    measured = _float32(module)
    for label, task in progress(items, desc="start token (prepend_bos='auto')"):
        table[label][task] = round(_accuracy(measured, tokenizer, prompts[task], starts[label], task in PER_TOKEN), 4)
    del measured
    mean = {label: sum(row.values()) / len(row) for label, row in table.items()}
    choice = pick(mean)
    return {"table": table, "mean": {k: round(v, 4) for k, v in mean.items()}, "choice": choice,
            "tokens": {k: (v if isinstance(v, str) else tokenizer.bos_token if v else None) for k, v in starts.items()},
            "values": starts, "n": {t: len(p) for t, p in prompts.items()}}


def _record_path(name: str, cache=None):
    return cache_root(cache) / f"{name}.start.json"


def rule_version() -> str:
    """A hash of the code the measurement's choice rests on (this module, the answer rule and the encoding): a
    record measured under another version is measured again."""
    h = hashlib.sha256()
    for module in (__name__, "depthutils.core.answers", "depthutils.core.prompts"):
        h.update(Path(importlib.import_module(module).__file__).read_bytes())
    return h.hexdigest()[:16]


def recorded(name: str, cache=None) -> dict | None:
    """The measured start of a named real model, or ``None`` before it is measured under this
    :func:`rule_version`."""
    try:
        doc = json.loads(_record_path(name, cache).read_text())
    except (OSError, ValueError):
        return None
    return doc if doc.get("rule") == rule_version() else None


def choose(name: str, module, tokenizer, cache=None) -> dict:
    """The recorded start of a named real model, measured and recorded on first use. Two processes that load the
    model at once on an empty cache (two chapters, two test workers) measure it once: the second waits for the
    first's record."""
    from filelock import FileLock

    doc = recorded(name, cache)
    if doc is not None:
        return doc
    path = _record_path(name, cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.parent / f".{name}.start.lock"):
        doc = recorded(name, cache)  # recorded while this process waited
        if doc is None:
            doc = measure(module, tokenizer, REAL_MODELS[name].separator)
            doc["measured_at"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            doc["rule"] = rule_version()
            atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(doc, indent=1) + "\n"))
    return doc


def resolve(value, name: str, module, tokenizer, cache=None) -> tuple[bool | str, str]:
    """``prepend_bos`` as :func:`depthutils.core.prompts.encode` takes it, and how it was chosen, in a few words."""
    check_option(value)
    if value != AUTO:
        return value, "as given"
    if name not in REAL_MODELS:
        return True, "auto: the tokenizer's BOS (the specification's rule)"
    doc = choose(name, module, tokenizer, cache)
    scores = ", ".join(f"{label} {doc['mean'][label]:.2f}" for label in doc["table"])
    tie = ("" if doc["mean"][doc["choice"]] == max(doc["mean"].values()) else
           f"; within {TIE:.3f} of the best, a tie, which goes to the first of {', '.join(ORDER)}")
    return doc["values"][doc["choice"]], f"auto: chosen by measurement (mean accuracy {scores}{tie})"


def describe(tokenizer, prepend_bos) -> str:
    """One sentence on what position 0 holds, for a page."""
    if prepend_bos is False:
        return ("No start token: position 0 is the prompt's first real token, which no measurement intervenes on "
                "(the measurements begin at position 1).")
    token = prepend_bos if isinstance(prepend_bos, str) and prepend_bos != AUTO else None
    if token is None:
        bos = bos_token_id(tokenizer)
        token = tokenizer.convert_ids_to_tokens(bos) if bos is not None else None
    if token is None:
        return "No start token: the tokenizer has neither a BOS nor an EOS; position 0 is the first real token."
    return f"Position 0 holds {token}, the start token, which no measurement intervenes on."
