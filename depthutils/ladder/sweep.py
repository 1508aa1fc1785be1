"""The depth-necessity sweep: within a fixed budget, does S5 need more layers than a control with a shortcut?

Objective A (the loss on the answer only) on each task of :data:`registry.SWEEP_TASKS` (S5 and the C10 control,
with structured questions, the tasks the objectives experiment's next round trains on) at every layer count of
:data:`registry.SWEEP_LAYERS`, for the seeds :data:`registry.SWEEP_SEEDS` (:data:`registry.SWEEP_RUNS`), each on
chains of 1 to :data:`registry.SWEEP_LONGEST` operations at a constant learning rate. :func:`rows` measures every
snapshot of every finished run: its greedy accuracy on 100 held-out chains of each length of
:data:`registry.SWEEP_EVAL` (:func:`depthutils.ladder.objectives.accuracy`) and its training loss there;
:func:`write_table` stores them, one row per run and snapshot, in ``data/experiments/depth_sweep/rows.csv``.
:func:`converged` records whether a run's training loss was flat over its last quarter: the mean loss of the last
eighth is within :data:`FLAT` (relative) or :data:`FLAT_NATS` (absolute) of the eighth before.

    OMP_WAIT_POLICY=PASSIVE python -m depthutils.ladder sweep        # trains the runs missing from the table, two
                                                                     # at a time, the fewest layers first (the
                                                                     # shortest: the most end within a session),
                                                                     # each added to it when it ends

The table is the sweep's record: checkpoints live outside the repository and do not outlive a machine, so a run in
the table is not trained again (:func:`missing`), and :func:`write_table` keeps the rows of runs it cannot measure.
"""
from __future__ import annotations

import csv
from pathlib import Path

from depthutils.ladder import registry

__all__ = ["TABLE", "FLAT", "FLAT_NATS", "converged", "rows", "tabled", "missing", "write_table"]

#: where the sweep's table lives
TABLE = registry.SWEEP_TABLE
#: flat: the last eighth's mean loss falls less than this share below the eighth before it ...
FLAT = 0.05
#: ... or by less than this many nats (a loss near 0 of a learned task)
FLAT_NATS = 0.01


def converged(log: list[tuple[int, float]], total: int) -> bool:
    """Whether a run's loss is flat over its last quarter. ``log``: ``(step, mean loss)`` rows of its
    ``train_log.csv``; ``total``: its steps."""
    earlier = [loss for step, loss in log if 0.75 * total < step <= 0.875 * total]
    later = [loss for step, loss in log if step > 0.875 * total]
    if not earlier or not later:
        return False
    a, b = sum(earlier) / len(earlier), sum(later) / len(later)
    return a - b < max(FLAT * a, FLAT_NATS)


def _log(path: Path) -> list[tuple[int, float]]:
    with open(path) as f:
        return [(int(r["step"]), float(r["loss"])) for r in csv.DictReader(f)]


def rows(ckpt_root: Path = registry.DEFAULT_CKPT_DIR, names=None) -> list[dict]:
    """One row per finished run of the sweep (``names``, default all) and snapshot: task, layers, seed, step, the
    training loss logged at that step, whether the run converged, and its accuracy on each length of
    :data:`registry.SWEEP_EVAL` (``acc_1`` …)."""
    import torch
    from transformers import AutoModelForCausalLM

    from depthutils.ladder.objectives import accuracy
    from depthutils.ladder.runs import is_trained
    from depthutils.ladder.tokenizer import load_tokenizer
    from depthutils.ladder.word_problems import TASKS

    tok = load_tokenizer(registry.TOKENIZER_DIR)
    out = []
    for name in names or registry.SWEEP_RUNS:
        if not is_trained(name, ckpt_root):
            continue
        spec = registry.SPECS[name]
        log = _log(Path(ckpt_root) / name / "train_log.csv")
        loss_at, done = dict(log), converged(log, spec["steps"])
        for step in spec["snapshots"]:
            model = AutoModelForCausalLM.from_pretrained(
                str(Path(ckpt_root) / name / "snapshots" / f"step-{step:06d}"), dtype=torch.float32).eval()
            acc = accuracy(model, tok, steps=registry.SWEEP_EVAL, task=TASKS[spec["task"]])
            out.append(dict(task=spec["task"], layers=spec["layers"], seed=spec["seed"], step=step,
                            loss=loss_at.get(step), converged=done,
                            **{f"acc_{k}": round(acc[k], 3) for k in registry.SWEEP_EVAL}))
    return out


def _read(path: Path) -> list[dict]:
    if not Path(path).is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _name(row: dict) -> str:
    return registry.sweep_name(row["task"], int(row["layers"]), int(row["seed"]))


def tabled(path: Path = TABLE) -> set[str]:
    """The runs with rows in the table at ``path``."""
    return {_name(r) for r in _read(path)}


def missing(path: Path = TABLE) -> list[str]:
    """The sweep's runs with no rows in the table at ``path``, in training order."""
    have = tabled(path)
    return [n for n in registry.SWEEP_RUNS if n not in have]


def write_table(ckpt_root: Path = registry.DEFAULT_CKPT_DIR, path: Path = TABLE, names=None) -> Path:
    """Measure the finished runs ``names`` (default all) under ``ckpt_root`` (:func:`rows`) and write them to
    ``path``, keeping the rows already there of every run not measured now; rows in training order."""
    found = rows(ckpt_root, names)
    if not found:
        raise FileNotFoundError(f"No finished run of the sweep under {ckpt_root}: `python -m depthutils.ladder sweep`.")
    measured = {_name(r) for r in found}
    kept = [r for r in _read(path) if _name(r) not in measured]
    order = {n: i for i, n in enumerate(registry.SWEEP_RUNS)}
    every = sorted(kept + found, key=lambda r: (order.get(_name(r), len(order)), int(r["step"])))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(found[0]))
        writer.writeheader()
        writer.writerows(every)
    return path
