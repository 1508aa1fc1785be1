"""The objectives experiment's tables: every run's card, every snapshot's accuracy and every prompt's measures.

Thirty-five runs do not fit the repository as models, so the training command measures each run once, its kept
snapshots and its final model (:mod:`depthutils.analysis.objectives_measure`), and writes three tables to
``data/experiments/objectives/``, which this module reads:

* ``cards.json``: one card per run (task, objective, seed, steps, tokens, time, threads, the snapshots kept,
  the final model's accuracy per step count, whether it is shipped);
* ``snapshots.csv``: per run and snapshot, the greedy accuracy on 100 held-out chains of each step count 1–8;
* ``rows.csv.gz``: per run, snapshot and prompt, the measures at the answer-predicting position
  (:mod:`depthutils.analysis.at_answer`) on :data:`N_PER_LEVEL` held-out chains of each trained step count.

The last snapshot of a run is measured on its stored (float16) final model, the weights a shipped run's folder
holds, so a live measurement of a shipped run equals its rows.
"""
from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np

from depthutils.analysis.at_answer import ARRAYS, AtAnswerResult, at_answer
from depthutils.core.prompts import Prompt
from depthutils.ladder import registry
from depthutils.ladder.objectives import EVAL_STEPS, TRAIN_STEPS, accuracy
from depthutils.ladder.word_problems import TASKS

#: where the tables live
TABLES_DIR = registry.REPO_ROOT / "data" / "experiments" / "objectives"
#: held-out chains per trained step count that every snapshot is measured on
N_PER_LEVEL = 10
#: the seed of those chains (the accuracy's chains are the held-out set's first 100, seed 0, another draw)
PROMPT_SEED = 1
SNAPSHOT_FIELDS = ("run", "task", "objective", "seed", "step", *(f"accuracy_{k}" for k in EVAL_STEPS))
ROW_FIELDS = ("run", "step", "k", "i", *(f"{a}_{l}" for a in ARRAYS for l in range(8)), "depth")


def prompts(task: str, n_per_level: int = N_PER_LEVEL, seed: int = PROMPT_SEED) -> list[Prompt]:
    """The measured prompts: ``n_per_level`` held-out chains of each trained step count, teacher-forced."""
    t = TASKS[task]
    return [Prompt.from_parts(e.prompt, e.answer, task, steps=k)
            for k in TRAIN_STEPS for e in t.eval_chains(n_per_level, k, seed)]


def measure_model(folder, task: str, *, n_per_level: int = N_PER_LEVEL, **load) -> tuple[dict, AtAnswerResult]:
    """One model's accuracy per step count and its measures at the answer position."""
    from depthutils.models import load_model

    lm = load_model(str(folder), **({"dtype": "float32"} | load))
    acc = accuracy(lm.hf, lm.tokenizer, task=TASKS[task])
    return acc, at_answer(lm, prompts(task, n_per_level), progress_bar=False)


def read_csv(path: Path, opener=open) -> list[dict]:
    with opener(path, "rt", newline="") as fh:
        return list(csv.DictReader(fh))


def read_tables(folder: Path = TABLES_DIR) -> dict | None:
    """The tables as ``{"cards": {run: card}, "snapshots": {run: {step: {k: accuracy}}}, "rows": {(run, step):
    {array: [N, L] or [N], "k": [N]}}}``, or None where they have not been written."""
    folder = Path(folder)
    if not (folder / "rows.csv.gz").is_file():
        return None
    cards = {c["name"]: c for c in json.loads((folder / "cards.json").read_text())}
    snaps: dict = {}
    for r in read_csv(folder / "snapshots.csv"):
        snaps.setdefault(r["run"], {})[int(r["step"])] = {k: float(r[f"accuracy_{k}"]) for k in EVAL_STEPS}
    grouped: dict = {}
    for r in read_csv(folder / "rows.csv.gz", opener=gzip.open):
        grouped.setdefault((r["run"], int(r["step"])), []).append(r)
    rows = {}
    for key, rs in grouped.items():
        rs.sort(key=lambda r: (int(r["k"]), int(r["i"])))
        arrays = {a: np.array([[float(r[f"{a}_{l}"]) for l in range(8)] for r in rs]) for a in ARRAYS}
        rows[key] = arrays | {"depth": np.array([float(r["depth"]) for r in rs]),
                              "k": np.array([int(r["k"]) for r in rs])}
    return {"cards": cards, "snapshots": snaps, "rows": rows}
