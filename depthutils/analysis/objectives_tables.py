"""The objectives experiment's tables: every run's card, every snapshot's accuracy and every prompt's measures.

Thirty-five runs do not fit the repository as models, so the training command measures each run once, its kept
snapshots and its final model, and writes three tables to ``data/experiments/objectives/``:

* ``cards.json``: one card per run (task, objective, seed, steps, tokens, time, threads, the snapshots kept,
  the final model's accuracy per step count, whether it is shipped);
* ``snapshots.csv``: per run and snapshot, the greedy accuracy on 100 held-out chains of each step count 1–8;
* ``rows.csv.gz``: per run, snapshot and prompt, the measures at the answer-predicting position
  (:mod:`depthutils.analysis.at_answer`) on :data:`N_PER_LEVEL` held-out chains of each trained step count.

The last snapshot of a run is measured on its stored (float16) final model, the weights a shipped run's folder
holds, so a live measurement of a shipped run equals its rows. A run's own measurements are kept beside its
checkpoint (``<ckpt>/<run>/measured/``) until :func:`write_tables` gathers them.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import numpy as np

from depthutils.analysis.at_answer import ARRAYS, AtAnswerResult, at_answer
from depthutils.core.progress import progress
from depthutils.core.prompts import Prompt
from depthutils.ladder import registry
from depthutils.ladder.objectives import EVAL_STEPS, TRAIN_STEPS, accuracy, card, current_recipe, write_readme
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


def prompt_rows(run: str, step: int, result: AtAnswerResult, levels) -> list[dict]:
    """``result``'s per-prompt measures as rows of ``rows.csv.gz``."""
    out, seen = [], {}
    for n, k in enumerate(levels):
        i = seen[k] = seen.get(k, -1) + 1
        row = {"run": run, "step": step, "k": int(k), "i": i}
        for a in ARRAYS:
            row.update({f"{a}_{l}": float(v) for l, v in enumerate(getattr(result, a)[n])})
        row["depth"] = float(result.depth[n])
        out.append(row)
    return out


def measure_run(name: str, ckpt_root: Path = registry.DEFAULT_CKPT_DIR) -> Path:
    """Measure every kept snapshot of the trained run ``name`` and its stored final model (in place of the last
    snapshot), and write its card, snapshot rows and prompt rows to ``<ckpt>/<name>/measured/``; returns that
    folder. A run measured before is left as it is."""
    from depthutils.ladder.runs import out_dir

    spec, root = registry.SPECS[name], Path(ckpt_root) / name
    done = root / "measured"
    if (done / "rows.csv").is_file():
        return done
    final = out_dir(name, ckpt_root)
    steps = sorted(int(p.name.split("-")[1]) for p in (root / "snapshots").glob("step-*"))
    snaps, rows = [], []
    levels = [k for k in TRAIN_STEPS for _ in range(N_PER_LEVEL)]
    for step in steps:
        folder = final if step == spec["steps"] else root / "snapshots" / f"step-{step:06d}"
        acc, res = measure_model(folder, spec["task"])
        snaps.append(dict(run=name, task=spec["task"], objective=spec["objective"], seed=spec["seed"], step=step,
                          **{f"accuracy_{k}": acc[k] for k in EVAL_STEPS}))
        rows += prompt_rows(name, step, res, levels)
    tmp = root / "measured.tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "card.json").write_text(json.dumps(card(name, final, ckpt_root), indent=2) + "\n")
    _write_csv(tmp / "snapshots.csv", SNAPSHOT_FIELDS, snaps)
    _write_csv(tmp / "rows.csv", ROW_FIELDS, rows)
    tmp.replace(done)
    return done


def _write_csv(path: Path, fields, rows, opener=open) -> None:
    with opener(path, "wt", newline="") as fh:
        w = csv.DictWriter(fh, fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def write_tables(ckpt_root: Path = registry.DEFAULT_CKPT_DIR, out: Path = TABLES_DIR, runs=None) -> dict:
    """Gather every measured run's card and rows under ``ckpt_root`` into the tables at ``out``, and write each
    shipped run's ``card.json`` and ``README.md`` into its model folder; returns how many runs, snapshots and
    prompt rows were written. A run the tables at ``out`` already hold and ``ckpt_root`` has no measurement of
    (measured on another machine) keeps its rows, so the tables grow run by run wherever the runs were trained,
    unless it was trained on another recipe (:func:`current_recipe`)."""
    names = [n for n in (runs or registry.OBJECTIVE_RUNS) if (Path(ckpt_root) / n / "measured" / "rows.csv").is_file()]
    out = Path(out)
    cards, snaps, rows = [], [], []
    if (out / "rows.csv.gz").is_file():
        cards = [c for c in json.loads((out / "cards.json").read_text())
                 if c["name"] not in names and current_recipe(c)]
        held = {c["name"] for c in cards}
        kept = lambda r: r["run"] in held  # noqa: E731
        snaps = [r for r in _read_csv(out / "snapshots.csv") if kept(r)]
        rows = [r for r in _read_csv(out / "rows.csv.gz", opener=gzip.open) if kept(r)]
    for n in names:
        folder = Path(ckpt_root) / n / "measured"
        cards.append(json.loads((folder / "card.json").read_text()))
        snaps += _read_csv(folder / "snapshots.csv")
        rows += _read_csv(folder / "rows.csv")
    order = {n: i for i, n in enumerate(registry.OBJECTIVE_RUNS)}
    cards.sort(key=lambda c: order.get(c["name"], len(order)))
    snaps.sort(key=lambda r: (order.get(r["run"], len(order)), int(r["step"])))
    rows.sort(key=lambda r: (order.get(r["run"], len(order)), int(r["step"]), int(r["k"]), int(r["i"])))
    out.mkdir(parents=True, exist_ok=True)
    (out / "cards.json").write_text(json.dumps(cards, indent=1) + "\n")
    _write_csv(out / "snapshots.csv", SNAPSHOT_FIELDS, snaps)
    buf = io.StringIO()  # gzip with a fixed mtime: the same rows give the same bytes
    _write_csv(buf, ROW_FIELDS, rows, opener=lambda b, *a, **k: _Keep(b))
    (out / "rows.csv.gz").write_bytes(gzip.compress(buf.getvalue().encode(), mtime=0))
    for c in cards:
        if c["shipped"]:
            write_readme(c, registry.MODELS_DIR / c["name"])
    return {"runs": len(cards), "snapshots": len(snaps), "rows": len(rows)}


class _Keep:
    """A context manager that hands back a buffer without closing it."""

    def __init__(self, buf):
        self.buf = buf

    def __enter__(self):
        return self.buf

    def __exit__(self, *exc):
        return False


def _read_csv(path: Path, opener=open) -> list[dict]:
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
    for r in _read_csv(folder / "snapshots.csv"):
        snaps.setdefault(r["run"], {})[int(r["step"])] = {k: float(r[f"accuracy_{k}"]) for k in EVAL_STEPS}
    grouped: dict = {}
    for r in _read_csv(folder / "rows.csv.gz", opener=gzip.open):
        grouped.setdefault((r["run"], int(r["step"])), []).append(r)
    rows = {}
    for key, rs in grouped.items():
        rs.sort(key=lambda r: (int(r["k"]), int(r["i"])))
        arrays = {a: np.array([[float(r[f"{a}_{l}"]) for l in range(8)] for r in rs]) for a in ARRAYS}
        rows[key] = arrays | {"depth": np.array([float(r["depth"]) for r in rs]),
                              "k": np.array([int(r["k"]) for r in rs])}
    return {"cards": cards, "snapshots": snaps, "rows": rows}


def measure_runs(names=None, ckpt_root: Path = registry.DEFAULT_CKPT_DIR, progress_bar: bool = True) -> list[str]:
    """Measure every trained run of ``names`` (default: all) not measured yet; returns those measured."""
    from depthutils.ladder.runs import is_trained

    todo = [n for n in (names or registry.OBJECTIVE_RUNS) if is_trained(n, ckpt_root)
            and not (Path(ckpt_root) / n / "measured" / "rows.csv").is_file()]
    for n in progress(todo, "measuring runs", enabled=progress_bar):
        measure_run(n, ckpt_root)
    return todo
