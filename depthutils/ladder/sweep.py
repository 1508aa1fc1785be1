"""The depth-necessity sweep: at the lengths the objectives experiment trains, does S5 need more layers than Z10?

Objective A (the loss on the answer only) on each task of :data:`registry.SWEEP_TASKS` (S5 and Z10 with structured
questions, the tasks the objectives experiment's next round trains on) at every layer count of
:data:`registry.SWEEP_LAYERS`, for
the seeds :data:`registry.SWEEP_SEEDS` (:data:`registry.SWEEP_RUNS`). :func:`rows` measures every snapshot of every
finished run: its greedy accuracy on 100 held-out chains of each length 1–8 (:func:`depthutils.ladder.objectives.
accuracy`) and its training loss there; :func:`write_table` stores them, one row per run and snapshot, in
``data/experiments/depth_sweep/rows.csv``.

A run is **converged** (:func:`converged`) when its training loss is flat over the last quarter of its steps: the
mean loss of the last eighth is within :data:`FLAT` (relative) or :data:`FLAT_NATS` (absolute) of the eighth before.

    OMP_WAIT_POLICY=PASSIVE python -m depthutils.ladder sweep        # trains what is missing, two at a time, then
                                                                     # writes the table (resumable)
"""
from __future__ import annotations

import csv
from pathlib import Path

from depthutils.ladder import registry

__all__ = ["TABLE", "FLAT", "FLAT_NATS", "converged", "rows", "write_table"]

#: where the sweep's table lives
TABLE = registry.REPO_ROOT / "data" / "experiments" / "depth_sweep" / "rows.csv"
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
    training loss logged at that step, whether the run converged, and ``acc_1`` … ``acc_8``."""
    import torch
    from transformers import AutoModelForCausalLM

    from depthutils.ladder.objectives import EVAL_STEPS, accuracy
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
            acc = accuracy(model, tok, task=TASKS[spec["task"]])
            out.append(dict(task=spec["task"], layers=spec["layers"], seed=spec["seed"], step=step,
                            loss=loss_at.get(step), converged=done,
                            **{f"acc_{k}": round(acc[k], 3) for k in EVAL_STEPS}))
    return out


def write_table(ckpt_root: Path = registry.DEFAULT_CKPT_DIR, path: Path = TABLE) -> Path:
    """Measure every finished run's snapshots (:func:`rows`) and write them to ``path``."""
    found = rows(ckpt_root)
    if not found:
        raise FileNotFoundError(f"No finished run of the sweep under {ckpt_root}: `python -m depthutils.ladder sweep`.")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(found[0]))
        writer.writeheader()
        writer.writerows(found)
    return path
