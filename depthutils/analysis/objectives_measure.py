"""The training command's side of the objectives tables (:mod:`depthutils.analysis.objectives_tables`, which the
chapter reads): measure each trained run once, beside its checkpoint (``<ckpt>/<run>/measured/``), and gather those
measurements into the tables.

    python -m depthutils objectives ...     # trains, then measure_runs and write_tables
"""
from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

from depthutils.analysis.at_answer import ARRAYS, AtAnswerResult
from depthutils.analysis.objectives_tables import (
    N_PER_LEVEL,
    ROW_FIELDS,
    SNAPSHOT_FIELDS,
    TABLES_DIR,
    measure_model,
    read_csv,
)
from depthutils.core.progress import progress
from depthutils.ladder import registry
from depthutils.ladder.objectives import EVAL_STEPS, TRAIN_STEPS, card, current_recipe, write_readme

__all__ = ["measure_runs", "measure_run", "write_tables", "write_csv", "prompt_rows"]


def measure_runs(names=None, ckpt_root: Path = registry.DEFAULT_CKPT_DIR, progress_bar: bool = True) -> list[str]:
    """Measure every trained run of ``names`` (default: all) not measured yet; returns those measured."""
    from depthutils.ladder.runs import is_trained

    todo = [n for n in (names or registry.OBJECTIVE_RUNS) if is_trained(n, ckpt_root)
            and not (Path(ckpt_root) / n / "measured" / "rows.csv").is_file()]
    for n in progress(todo, "measuring runs", enabled=progress_bar):
        measure_run(n, ckpt_root)
    return todo


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
    write_csv(tmp / "snapshots.csv", SNAPSHOT_FIELDS, snaps)
    write_csv(tmp / "rows.csv", ROW_FIELDS, rows)
    tmp.replace(done)
    return done


def write_csv(path: Path, fields, rows, opener=open) -> None:
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
        snaps = [r for r in read_csv(out / "snapshots.csv") if kept(r)]
        rows = [r for r in read_csv(out / "rows.csv.gz", opener=gzip.open) if kept(r)]
    for n in names:
        folder = Path(ckpt_root) / n / "measured"
        cards.append(json.loads((folder / "card.json").read_text()))
        snaps += read_csv(folder / "snapshots.csv")
        rows += read_csv(folder / "rows.csv")
    order = {n: i for i, n in enumerate(registry.OBJECTIVE_RUNS)}
    cards.sort(key=lambda c: order.get(c["name"], len(order)))
    snaps.sort(key=lambda r: (order.get(r["run"], len(order)), int(r["step"])))
    rows.sort(key=lambda r: (order.get(r["run"], len(order)), int(r["step"]), int(r["k"]), int(r["i"])))
    out.mkdir(parents=True, exist_ok=True)
    (out / "cards.json").write_text(json.dumps(cards, indent=1) + "\n")
    write_csv(out / "snapshots.csv", SNAPSHOT_FIELDS, snaps)
    buf = io.StringIO()  # gzip with a fixed mtime: the same rows give the same bytes
    write_csv(buf, ROW_FIELDS, rows, opener=lambda b, *a, **k: _Keep(b))
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
