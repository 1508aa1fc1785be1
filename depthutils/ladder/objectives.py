"""The objectives experiment's training: one task, three objectives (ours; P1's authors' follow-up).

The tasks are word problems (:mod:`depthutils.ladder.word_problems`): S5, which needs depth, and the Z10 control,
which has a constant-depth shortcut. Each trains on chains of ``k`` = 1–6 operations (:data:`TRAIN_STEPS`) and is
evaluated on held-out chains of 1–8 (:data:`EVAL_STEPS`; 7 and 8 lie outside the training range).

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

A batch is a deterministic function of ``(task, seed, step)``: resuming at step ``s`` sees the batches an
uninterrupted run would have seen.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from depthutils.ladder.registry import NULL
from depthutils.ladder.word_problems import TASKS, Z10, WordTask

#: the objectives, in the order of the authors' hypothesis (most depth used first)
OBJECTIVES = ("a", "qa", "lm")
#: how each objective is named in the book
OBJECTIVE_LABELS = {"a": "A (answer only)", "qa": "Q+A", "lm": "LM (Q+A + text)"}
NULL_LABEL = "A′ (answer only, other examples)"
#: step counts trained on, and the longer chains only evaluated (outside the training range)
TRAIN_STEPS = (1, 2, 3, 4, 5, 6)
#: the curriculum: chains of up to ``1 + step // CURRICULUM`` operations at training step ``step``, drawn
#: uniformly; every trained length from step ``5 * CURRICULUM`` on. Measured on Z10: 1-step chains alone are
#: learned in about 250 steps of 128 examples, while all six lengths from the start stayed at chance for 400.
CURRICULUM = 200
EVAL_STEPS = (1, 2, 3, 4, 5, 6, 7, 8)
#: chains per step count in a model's accuracy
N_ACCURACY = 100

IGNORE = -100  # cross_entropy's ignore_index: targets outside the objective's loss


@dataclass(frozen=True)
class Geometry:
    """Batch geometry: ``examples`` task rows, one example each (padded on the right to the step's longest),
    and, for ``lm``, ``text_rows`` rows of ``text_len`` tokens of English."""
    examples: int = 64
    text_rows: int = 4
    text_len: int = 128


#: each task's batch geometry (the English rows keep one text row per 16 task rows). Z10 trains on 128 chains a
#: step: at 64, Q+A and LM stayed near chance even on one operation after 2400 steps (two seeds each: 0.28-0.62),
#: while at 128 every objective of three seeds reached 1.00 on it. S5's objectives learn at 64.
GEOMETRIES = {"s5": Geometry(), "z10": Geometry(examples=128, text_rows=8)}
GEOMETRIES.update(s5m=GEOMETRIES["s5"], z10m=GEOMETRIES["z10"], c10m=GEOMETRIES["z10"])  # structured questions


def geometry_of(spec: dict) -> Geometry:
    """A run's batch geometry: its task's (:data:`GEOMETRIES`), with the chains a step its spec sets (``examples``:
    the depth-necessity sweep trains both tasks on 128)."""
    geo = GEOMETRIES[spec["task"]]
    return Geometry(spec["examples"], geo.text_rows, geo.text_len) if spec.get("examples") else geo


def current_recipe(info: dict) -> bool:
    """Whether a run's ``training.json`` or card (``info``) records the recipe its spec has now: its steps, the
    task's chains a step (:data:`GEOMETRIES`), text rows, learning-rate schedule and longest chain. A run trained on
    another recipe is trained again and
    leaves the tables."""
    from depthutils.ladder import registry

    spec = registry.SPECS.get(info.get("name"))
    geo = geometry_of(spec) if spec is not None and spec.get("task") in GEOMETRIES else None
    return (spec is not None and geo is not None and info.get("steps") == spec["steps"]
            and info.get("batch_size") == geo.examples
            and info.get("text_rows") == (geo.text_rows if spec["objective"] == "lm" else 0)
            and info.get("schedule", "cosine") == spec.get("schedule", "cosine")
            and info.get("longest", TRAIN_STEPS[-1]) == spec.get("longest", TRAIN_STEPS[-1]))


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
    set to :data:`IGNORE`; for ``lm`` a second pair of English rows. Chains have 1 to ``longest`` operations
    (default :data:`TRAIN_STEPS`'s longest; the depth sweep's runs train longer ones, their spec's ``longest``)."""

    def __init__(self, tokenizer, objective: str, seed: int, geometry: Geometry | None = None, corpus_dir=None,
                 task: WordTask = Z10, longest: int = TRAIN_STEPS[-1]):
        if objective not in (*OBJECTIVES, NULL):
            raise ValueError(f"objective must be one of {(*OBJECTIVES, NULL)}, got {objective!r}")
        # the null control trains A on another draw of the examples
        self.objective, self.draw = ("a", f"{seed}:other") if objective == NULL else (objective, str(seed))
        self.tok, self.seed, self.task, self.longest = tokenizer, seed, task, longest
        self.geo = geometry or GEOMETRIES[task.name]
        self.bos, self.eos, self.pad = tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
        self.text_ids = _text_ids(tokenizer, str(corpus_dir)) if objective == "lm" else None

    def task_rows(self, step: int):
        """``(ids, answer, real)``: the task rows of ``step`` (the same for every objective of a seed; another
        draw for the null control's A′), where
        their answer tokens are, and which tokens are not padding."""
        import torch

        rng = random.Random(f"{self.task.key}:{self.draw}:{step}")
        longest = min(self.longest, 1 + step // CURRICULUM)
        exs = [self.task.sample(rng, rng.randint(1, longest)) for _ in range(self.geo.examples)]
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


def accuracy(model, tokenizer, steps=EVAL_STEPS, n: int = N_ACCURACY, task: WordTask = Z10) -> dict[int, float]:
    """Greedy exact-match accuracy per step count on ``task``'s held-out chains (``n`` each; held out of training
    from 2 steps on): the answer is one digit token, so the argmax after the prompt is the model's answer.
    Prompts of one step count have the same length, so each count is one unpadded forward pass."""
    import torch

    out = {}
    with torch.no_grad():
        for k in steps:
            exs = task.eval_chains(n, k)
            ids = torch.tensor([tokenizer(e.prompt)["input_ids"] for e in exs])
            top = model(input_ids=ids).logits[:, -1].argmax(-1).tolist()
            out[k] = sum(tokenizer.decode([t]) == e.answer for t, e in zip(top, exs)) / len(exs)
    return out


def float16_check(folder, final_snapshot, tokenizer, task: WordTask) -> dict:
    """What storing the weights in float16 changes: the largest logit difference on 100 held-out 6-operation
    chains and the accuracy per step count of the float32 weights (the run's last snapshot) against the
    float16 ones (``folder``, upcast)."""
    import torch
    from transformers import AutoModelForCausalLM

    models = [AutoModelForCausalLM.from_pretrained(str(f), dtype=torch.float32).eval() for f in (final_snapshot, folder)]
    ids = torch.tensor([tokenizer(e.prompt)["input_ids"] for e in task.eval_chains(100, TRAIN_STEPS[-1])])
    with torch.no_grad():
        diff = (models[0](input_ids=ids).logits - models[1](input_ids=ids).logits).abs().max().item()
    acc32 = accuracy(models[0], tokenizer, task=task)
    return dict(max_abs_logit_difference=round(diff, 5), accuracy_float32={str(k): v for k, v in acc32.items()})


def card(name: str, folder, ckpt_root=None) -> dict:
    """The card of the run ``name`` whose final model is in ``folder``: task, objective, seed, training (steps,
    tokens, time, threads), the snapshots kept, and the final model's accuracy per step count (100 chains
    each); with the run's float32 last snapshot under ``ckpt_root`` (default: the trainer's), also what the
    float16 storage changes (:func:`float16_check`)."""
    import json
    from pathlib import Path

    import torch
    from transformers import AutoModelForCausalLM

    from depthutils.ladder import registry
    from depthutils.ladder.tokenizer import load_tokenizer

    folder = Path(folder)
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    tok = load_tokenizer(folder)
    info = json.loads((folder / "training.json").read_text())
    task = TASKS[info["task"]]
    acc = accuracy(model, tok, task=task)
    out = dict(name=name, task=info["task"], task_label=task.label, objective=info["objective"],
               objective_label={**OBJECTIVE_LABELS, NULL: NULL_LABEL}[info["objective"]], seed=info["seed"], layers=info["layers"],
               params=info["params_total"], steps=info["steps"], batch_size=info["batch_size"],
               text_rows=info["text_rows"], task_tokens=info["task_tokens"], text_tokens=info["text_tokens"],
               wall_time_s=info["wall_time_s"], threads=info["threads"], stored_dtype=info["stored_dtype"],
               snapshots=info["snapshots"], trained_steps=list(TRAIN_STEPS), chance=round(task.chance, 2),
               accuracy={str(k): round(v, 3) for k, v in acc.items()}, n_per_step=N_ACCURACY,
               shipped=name in registry.SHIPPED_OBJECTIVE_RUNS,
               size_mb=round((folder / "model.safetensors").stat().st_size / 2**20, 2))
    last = Path(ckpt_root or registry.DEFAULT_CKPT_DIR) / name / "snapshots" / f"step-{info['steps']:06d}"
    if last.is_dir():
        out["float16_check"] = float16_check(folder, last, tok, task)
    return out


def write_readme(card: dict, folder) -> None:
    """A shipped run's ``README.md`` and ``card.json``, from its card."""
    import json
    from pathlib import Path

    from depthutils.ladder import registry

    folder = Path(folder)
    (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    threads = " then ".join(map(str, card["threads"])) if isinstance(card["threads"], list) else card["threads"]
    rows = "\n".join(f"| {k} | {'trained' if int(k) in TRAIN_STEPS else 'longer than trained'} | {v:.2f} |"
                     for k, v in card["accuracy"].items())
    check = card.get("float16_check")
    (folder / "README.md").write_text(
        f"# {card['name']}\n\n{registry.SPECS[card['name']]['description']}.\n\n"
        f"- Task: {card['task_label']}; objective: {card['objective_label']}; seed {card['seed']} (initial weights "
        f"and task examples).\n- {card['layers']} layers, {card['params']:,} parameters, stored in "
        f"{card['stored_dtype']}.\n- {card['steps']} steps of {card['batch_size']} chains: "
        f"{card['task_tokens']:,} task tokens, {card['text_tokens']:,} text tokens; {card['wall_time_s'] / 60:.1f} "
        f"min on {threads} CPU thread(s).\n\n"
        f"Greedy accuracy on {card['n_per_step']} chains per step count (held out of training from 2 operations "
        f"on; chance is {card['chance']:.2f}):\n\n"
        "| operations | range | accuracy |\n|---|---|---|\n" + rows + "\n\n"
        + (f"Stored in float16: the largest logit difference from the float32 weights on 100 held-out "
           f"6-operation chains is {check['max_abs_logit_difference']:g}.\n\n" if check else "") +
        "Retrain: `python -m depthutils.ladder train " + card["name"] + "` (resumes from its checkpoint).\n")
