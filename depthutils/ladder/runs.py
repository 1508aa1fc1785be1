"""Training many runs side by side: each run in its own process with one thread, ``jobs`` at a time.

Tiny models use one core far better than two (their matrices are too small to split), so two one-thread runs
train about twice as fast as one two-thread run. Every process gets ``OMP_WAIT_POLICY=PASSIVE`` (set before torch
loads: with OpenMP's default spin-waiting a thread that shares a core with another process ran about ten times
slower here). A run resumes from its checkpoint, so the command can be stopped and started again.
"""
from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from depthutils.ladder import registry


def out_dir(name: str, ckpt_root: Path = registry.DEFAULT_CKPT_DIR) -> Path:
    """Where a run's final model goes: ``data/models/<name>`` for a shipped run, else beside its checkpoint."""
    if name in registry.SHIPPED_OBJECTIVE_RUNS:
        return registry.MODELS_DIR / name
    return Path(ckpt_root) / name / "final"


def is_trained(name: str, ckpt_root: Path = registry.DEFAULT_CKPT_DIR) -> bool:
    """Whether ``name``'s final model exists, trained on the recipe its spec has now."""
    import json

    from depthutils.ladder.objectives import current_recipe

    info = out_dir(name, ckpt_root) / "training.json"
    return info.is_file() and ("objective" not in registry.SPECS.get(name, {})
                               or current_recipe(json.loads(info.read_text())))


def train_one(name: str, ckpt_root: Path, corpus_dir: Path, log_dir: Path) -> int:
    """Train ``name`` in a fresh one-thread process (its output in ``log_dir/<name>.log``); the exit code."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "depthutils.ladder", "--threads", "1", "--ckpt", str(ckpt_root),
           "--corpus", str(corpus_dir), "train", name, "--out", str(out_dir(name, ckpt_root))]
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"{name}.log", "a") as fh:
        return subprocess.call(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)


def train_runs(names, *, jobs: int = 2, ckpt_root: Path = registry.DEFAULT_CKPT_DIR,
               corpus_dir: Path = registry.DEFAULT_CORPUS_DIR, then=None) -> list[str]:
    """Train every run of ``names`` not yet trained, ``jobs`` at a time, in order, calling ``then(name)`` (one call
    at a time) as each run ends well; returns the runs that failed."""
    import threading

    lock = threading.Lock()

    def one(n):
        code = train_one(n, Path(ckpt_root), Path(corpus_dir), log_dir)
        if code == 0 and then is not None:
            with lock:
                then(n)
        return n, code

    todo = [n for n in names if not is_trained(n, ckpt_root)]
    log_dir = Path(ckpt_root) / "logs"
    print(f"training {len(todo)} run(s), {jobs} at a time; logs in {log_dir}", flush=True)
    with ThreadPoolExecutor(jobs) as pool:
        codes = list(pool.map(one, todo))
    for n, code in codes:
        log = log_dir / f"{n}.log"
        print(f"{n}: done" if code == 0 else f"{n}: failed (exit {code}), see {log}", flush=True)
    return [n for n, code in codes if code]
