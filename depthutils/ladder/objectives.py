"""The objectives experiment: one k-step task, three training objectives (ours; P1's authors' follow-up).

**The task: a chain of operations mod 10.** A start digit, then ``k`` operations, each ``+d`` (``d`` in
0–9) or ``*d`` (``d`` in 3, 7, 9), applied left to right modulo 10; the answer is the final digit::

    "7 +3 *9 +2 = "  ->  "2"        ((7 + 3) * 9 + 2) mod 10 = 92 mod 10 = 2

Why it needs depth: the operations are invertible maps of the ten digits (multipliers prime to 10), so
every operation changes the answer and no operand can be ignored; ``+`` and ``*`` do not commute, so the
chain is not a sum or a product that one attention layer could pool. A causal transformer computes it
either step by step along the positions (the value after operation ``i`` at a position needs the value
after ``i − 1``, computed at a lower layer of an earlier position: about one layer per step) or by
composing operations in a parallel scan (about ``log2 k`` rounds), so the layers needed grow with ``k``.

**The three objectives**, on the same task examples, in the same order, from the same initial weights
(per seed):

* ``a``: the loss is on the answer token only; the question is never modelled.
* ``qa``: the loss is on every token of the example, question and answer (P1's "Q+A" models).
* ``lm``: ``qa`` plus rows of public-domain English text (the ladder's corpus) in every batch, loss on
  everything.

The loss is a sum of one mean per modelled part (answer; question; text), so the answer weighs the same under
every objective (:meth:`ObjectiveBatches.pairs` says why).

Every run sees the same task tokens, one example per row; ``lm`` also trains on rows of English text, apart
from the task rows (rows do not attend to each other).

A batch is a deterministic function of ``(seed, step)``: resuming at step ``s`` sees the batches an
uninterrupted run would have seen.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from depthutils.ladder.examples import HELDOUT_MOD, Example, stable_hash

#: the objectives, in the order of the authors' hypothesis (most depth used first)
OBJECTIVES = ("a", "qa", "lm")
#: how each objective is named in the book
OBJECTIVE_LABELS = {"a": "A (answer only)", "qa": "Q+A", "lm": "LM (Q+A + text)"}
#: step counts trained on, and the longer chains only evaluated (outside the training range)
TRAIN_STEPS = (1, 2, 3, 4, 5, 6)
#: the curriculum: chains of up to ``1 + step // CURRICULUM`` operations at training step ``step``, drawn
#: uniformly; every trained length from step ``5 * CURRICULUM`` on. Measured here: 1-step chains alone are
#: learned in about 250 steps of 128 examples, while all six lengths from the start stayed at chance for 400.
CURRICULUM = 200
EVAL_STEPS = (1, 2, 3, 4, 5, 6, 7, 8)
MOD = 10
#: the operations, each an invertible map of the digits 0 … MOD-1 (multipliers prime to MOD, no identity)
OPS = tuple([("+", d) for d in range(1, 10)] + [("*", d) for d in (3, 7, 9)])

IGNORE = -100  # cross_entropy's ignore_index: targets outside the objective's loss


def apply(start: int, ops) -> int:
    """The answer: ``ops`` (``[("+", 3), ("*", 9)]``) applied to ``start`` left to right, mod 10."""
    x = start
    for op, d in ops:
        x = (x + d) % MOD if op == "+" else (x * d) % MOD
    return x


def chain_prompt(start: int, ops) -> str:
    """``7, [("+", 3), ("*", 9)]`` -> ``"7 +3 *9 = "`` (the last prompt token, the space, predicts the answer)."""
    return f"{start} " + " ".join(f"{op}{d}" for op, d in ops) + " = "


def is_heldout(start: int, ops) -> bool:
    """Held-out rule: chains of 2 or more operations whose prompt hashes to 0 mod 5 (about 20 %) are never
    trained on; every 1-step chain (130 of them) is."""
    return len(ops) >= 2 and stable_hash("opchain:" + chain_prompt(start, ops)) % HELDOUT_MOD == 0


def chain_example(start: int, ops) -> Example:
    ops = [tuple(o) for o in ops]
    return Example("opchain", chain_prompt(start, ops), str(apply(start, ops)), str(apply(start, ops)),
                   dict(steps=len(ops), heldout=is_heldout(start, ops)))


def _random_op(rng: random.Random) -> tuple[str, int]:
    return rng.choice(OPS)


def sample_chain(rng: random.Random, steps: int, heldout: bool = False) -> Example:
    """One chain of ``steps`` operations, from the training split or the held-out one."""
    if heldout and steps < 2:
        raise ValueError("1-step chains are all trained; held-out chains have 2 or more steps")
    while True:
        start, ops = rng.randrange(MOD), [_random_op(rng) for _ in range(steps)]
        if is_heldout(start, ops) == heldout:
            return chain_example(start, ops)


def eval_chains(n: int, steps: int, seed: int = 0) -> list[Example]:
    """``n`` distinct held-out chains of ``steps`` operations (1-step chains: ``n`` trained ones, all 130
    at most), the same for every call with the same arguments."""
    rng, seen, out = random.Random(f"opchain-eval:{seed}:{steps}"), set(), []
    for _ in range(200 * n):
        ex = sample_chain(rng, steps, heldout=steps >= 2)
        if ex.prompt not in seen:
            seen.add(ex.prompt)
            out.append(ex)
        if len(out) == n:
            break
    return out


@dataclass(frozen=True)
class Geometry:
    """Batch geometry: ``examples`` task rows, one example each (padded on the right to the step's longest),
    and, for ``lm``, ``text_rows`` rows of ``text_len`` tokens of English."""
    examples: int = 128
    text_rows: int = 8
    text_len: int = 128


@lru_cache(maxsize=2)
def _text_ids(tokenizer, corpus_dir: str):
    """The training part of the English corpus as one array of token ids (tokenized once per process)."""
    import numpy as np

    from depthutils.ladder.corpus import load_texts

    return np.concatenate([np.asarray(tokenizer(t, add_special_tokens=False)["input_ids"], dtype=np.int32)
                           for t, _ in load_texts(corpus_dir, "train")])


class ObjectiveBatches:
    """Training pairs ``(inputs, targets)`` of one objective: rows ``[BOS] chain answer [EOS]``, one example
    each (a causal model's right padding changes no real position), the targets outside the objective's loss
    set to :data:`IGNORE`; for ``lm`` a second pair of English rows."""

    def __init__(self, tokenizer, objective: str, seed: int, geometry: Geometry = Geometry(), corpus_dir=None):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        self.tok, self.objective, self.seed, self.geo = tokenizer, objective, seed, geometry
        self.bos, self.eos, self.pad = tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
        self.text_ids = _text_ids(tokenizer, str(corpus_dir)) if objective == "lm" else None

    def task_rows(self, step: int):
        """``(ids, answer, real)``: the task rows of ``step`` (the same for every objective of a seed), where
        their answer tokens are, and which tokens are not padding."""
        import torch

        rng = random.Random(f"opchain:{self.seed}:{step}")
        longest = min(TRAIN_STEPS[-1], 1 + step // CURRICULUM)
        exs = [sample_chain(rng, rng.randint(1, longest)) for _ in range(self.geo.examples)]
        qs = self.tok([e.prompt for e in exs], add_special_tokens=False)["input_ids"]
        ans = self.tok([e.continuation for e in exs], add_special_tokens=False)["input_ids"]
        rows = [[self.bos, *q, *a, self.eos] for q, a in zip(qs, ans)]
        width = max(map(len, rows))
        ids = torch.full((len(rows), width), self.pad)
        answer = torch.zeros((len(rows), width), dtype=torch.bool)
        real = torch.zeros((len(rows), width), dtype=torch.bool)
        for i, (row, q, a) in enumerate(zip(rows, qs, ans)):
            ids[i, :len(row)] = torch.tensor(row)
            answer[i, 1 + len(q):1 + len(q) + len(a)] = True
            real[i, :len(row)] = True
        return ids, answer, real

    def text_rows(self, step: int):
        """The ``lm`` objective's English rows of ``step``: ``[BOS]`` and a window of the corpus."""
        import torch

        rng = random.Random(f"opchain-text:{self.seed}:{step}")
        n = self.geo.text_len
        rows = []
        for _ in range(self.geo.text_rows):
            s = rng.randrange(len(self.text_ids) - n)
            rows.append([self.bos, *self.text_ids[s:s + n].tolist()])
        return torch.tensor(rows)

    def pairs(self, step: int) -> list:
        """The ``(inputs, targets, weights)`` of training step ``step``: the task rows, and for ``lm`` the text
        rows (a second triple, since their length differs).

        The loss is the sum of one mean per part the objective models: the answer tokens; the rest of each
        example (its question and end token); the English text. So every objective weighs the answer alike: a
        mean over every target would give the answer about a fourteenth of Q+A's loss (one target of about
        fourteen per 6-operation chain), and such a Q+A run stayed at chance on every step count after 2400 steps
        where A reached 0.42 on 6 operations."""
        import torch

        ids, answer, real = self.task_rows(step)
        targets = ids[:, 1:].clone()
        is_answer, rest = answer[:, 1:], real[:, 1:] & ~answer[:, 1:]
        keep = is_answer if self.objective == "a" else real[:, 1:]
        targets[~keep] = IGNORE
        weights = is_answer / is_answer.sum()
        if self.objective != "a":
            weights = weights + rest / rest.sum()
        out = [(ids[:, :-1], targets, weights)]
        if self.objective == "lm":
            text = self.text_rows(step)
            out.append((text[:, :-1], text[:, 1:], torch.full(text[:, 1:].shape, 1 / text[:, 1:].numel())))
        return out


def accuracy(model, tokenizer, steps=EVAL_STEPS, n: int = 100) -> dict[int, float]:
    """Greedy exact-match accuracy per step count on :func:`eval_chains` (``n`` each; held out of training
    from 2 steps on): the answer is one digit token, so the argmax after the prompt is the model's answer.
    Prompts of one step count have the same length, so each count is one unpadded forward pass."""
    import torch

    out = {}
    with torch.no_grad():
        for k in steps:
            exs = eval_chains(n, k)
            ids = torch.tensor([tokenizer(e.prompt)["input_ids"] for e in exs])
            top = model(input_ids=ids).logits[:, -1].argmax(-1).tolist()
            out[k] = sum(tokenizer.decode([t]) == e.answer for t, e in zip(top, exs)) / len(exs)
    return out


def float16_check(folder, final_snapshot, tokenizer) -> dict:
    """What storing the weights in float16 changes: the largest logit difference on 100 held-out 6-operation
    chains and the accuracy per step count of the float32 weights (the run's last snapshot) against the
    float16 ones (``folder``, upcast)."""
    import torch
    from transformers import AutoModelForCausalLM

    models = [AutoModelForCausalLM.from_pretrained(str(f), dtype=torch.float32).eval() for f in (final_snapshot, folder)]
    ids = torch.tensor([tokenizer(e.prompt)["input_ids"] for e in eval_chains(100, TRAIN_STEPS[-1])])
    with torch.no_grad():
        diff = (models[0](input_ids=ids).logits - models[1](input_ids=ids).logits).abs().max().item()
    acc32 = accuracy(models[0], tokenizer)
    return dict(max_abs_logit_difference=round(diff, 5), accuracy_float32={str(k): v for k, v in acc32.items()})


def write_card(name: str, ckpt_root=None) -> dict:
    """Evaluate the run ``name``'s final model (accuracy per step count, 100 chains each) and write its
    ``card.json`` and ``README.md`` beside it; with the run's float32 last snapshot under ``ckpt_root``
    (default: the trainer's), also what the float16 storage changes (:func:`float16_check`)."""
    import json
    from pathlib import Path

    import torch
    from transformers import AutoModelForCausalLM

    from depthutils.ladder import registry
    from depthutils.ladder.tokenizer import load_tokenizer

    folder = registry.MODELS_DIR / name
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    tok = load_tokenizer(folder)
    info = json.loads((folder / "training.json").read_text())
    acc = accuracy(model, tok)
    card = dict(name=name, objective=info["objective"], objective_label=OBJECTIVE_LABELS[info["objective"]],
                seed=info["seed"], layers=info["layers"], params=info["params_total"], params_total=info["params_total"],
                params_unique=info["params_unique"], steps=info["steps"], task_tokens=info["task_tokens"],
                text_tokens=info["text_tokens"], wall_time_s=info["wall_time_s"],
                stored_dtype=info["stored_dtype"], trained_steps=list(TRAIN_STEPS),
                accuracy={str(k): round(v, 3) for k, v in acc.items()}, n_per_step=100,
                size_mb=round((folder / "model.safetensors").stat().st_size / 2**20, 2))
    last = Path(ckpt_root or registry.DEFAULT_CKPT_DIR) / name / "snapshots" / f"step-{info['steps']:06d}"
    if last.is_dir():
        card["float16_check"] = float16_check(folder, last, tok)
    (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    threads = " then ".join(map(str, info["threads"])) if isinstance(info["threads"], list) else info["threads"]
    rows = "\n".join(f"| {k} | {'trained' if k in TRAIN_STEPS else 'longer than trained'} | {v:.2f} |"
                     for k, v in acc.items())
    (folder / "README.md").write_text(
        f"# {name}\n\n{registry.SPECS[name]['description']}.\n\n"
        f"- Objective: {OBJECTIVE_LABELS[info['objective']]}; seed {info['seed']} (initial weights and task "
        f"examples).\n- {info['layers']} layers, {info['params_total']:,} parameters, stored in "
        f"{info['stored_dtype']}.\n- {info['steps']} steps of {info['batch_size']} chains: "
        f"{info['task_tokens']:,} task tokens, {info['text_tokens']:,} text tokens; {info['wall_time_s'] / 60:.1f} "
        f"min on {threads} CPU thread(s).\n\n"
        "Greedy accuracy on 100 chains per step count (held out of training from 2 operations on; chance is 0.10):\n\n"
        "| operations | range | accuracy |\n|---|---|---|\n" + rows + "\n\n"
        + (f"Stored in float16: the largest logit difference from the float32 weights on 100 held-out "
           f"6-operation chains is {card['float16_check']['max_abs_logit_difference']:g}.\n\n"
           if "float16_check" in card else "") +
        "Retrain: `python -m depthutils.ladder train " + name + "` (resumes from its checkpoint).\n")
    return card
