"""``bench --only jobs``: two pieces of work one after the other in one process on every core, against both at
once in a process each with its share of the cores (what ``python -m depthutils book --jobs`` and the tests'
xdist workers do), each piece a fresh process, timed from start to end.

The pairs (:func:`pairs`): chapters 1 and 4 on the embedded default model (``python -m depthutils run``); chapters 1
and 3's headline runs on each cached real model (:func:`depthutils.book.realruns.measure_run`), and the two whole
chapters with that model as the book runs them (their real models' runs taking turns side by side); and, in a clone
with its ``tests/``, the two slowest tests that are not chapters (bfloat16 against float32 on SmolLM2, and the cached
SmolLM2 folder against its GGUF). A pair whose model is not cached is skipped with one sentence.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from depthutils.book.runner import ROOT
from depthutils.core.progress import JOBS_ENV
from depthutils.core.threads import TURNS_ENV, cores
from depthutils.perf.real_table import unavailable

__all__ = ["pairs", "time_pair", "jobs_rows", "jobs_table"]

PY = sys.executable


def _real(model: str, chapter: str) -> list[str]:
    return [PY, "-c", f"from depthutils.book.realruns import measure_run; measure_run({model!r}, {chapter!r}, 'auto')"]


def pairs(real=("smollm2-135m", "gemma3-270m")) -> dict[str, tuple[list[str], list[str]]]:
    """The pairs of commands to time, by label; those whose model is not cached left out, with a sentence."""
    out = {"chapters 1 + 4, default model": ([PY, "-m", "depthutils", "run", "01", "--out", "{tmp}/a"],
                                             [PY, "-m", "depthutils", "run", "04", "--out", "{tmp}/b"])}
    for model in real:
        why = unavailable(model)
        if why:
            print(f"jobs: {why} Its pair is left out.")
            continue
        out[f"chapters 1 + 3 headline, {model}"] = (_real(model, "01"), _real(model, "03"))
        whole = ["-p", "real_models", f'["{model}"]']  # as the book runs them: the embedded model, then the real one
        out[f"chapters 1 + 3 whole, with {model}"] = (
            [PY, "-m", "depthutils", "run", "01", "--out", "{tmp}/c", *whole],
            [PY, "-m", "depthutils", "run", "03", "--out", "{tmp}/d", *whole])
    if (ROOT / "tests" / "conftest.py").exists():
        test = [PY, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-p", "no:randomly"]
        out["tests: precision + SmolLM2 GGUF logits"] = (
            test + ["tests/perf/test_precision.py"],
            test + ["tests/models/test_fetch.py::test_cached_folder_gives_the_gguf_logits[smollm2-135m]"])
    return out


def _start(cmd: list[str], threads: int, jobs: int, tmp: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), JOBS_ENV: str(jobs),
           "DEPTHUTILS_PROGRESS": "0", "TQDM_DISABLE": "1"}
    if jobs > 1:  # as the book's runner: real models' runs take turns
        env[TURNS_ENV] = os.path.join(tmp, "turns.lock")
    return subprocess.Popen([c.format(tmp=tmp) for c in cmd], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _wait(procs: list[subprocess.Popen], label: str) -> None:
    for p in procs:
        _, err = p.communicate()
        if p.returncode:
            raise RuntimeError(f"jobs: {label}: {' '.join(p.args[:4])} … exited with {p.returncode}: {err[-500:]}")


def time_pair(a: list[str], b: list[str], label: str = "") -> dict:
    """Seconds for ``a`` then ``b`` (one process at a time, every core), and for both at once (one process each,
    half the cores each), and the ratio of the two."""
    n = cores()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        for cmd in (a, b):
            _wait([_start(cmd, n, 1, tmp)], label)
        after = time.perf_counter()
        _wait([_start(cmd, max(1, n // 2), 2, tmp) for cmd in (a, b)], label)
        end = time.perf_counter()
    one, two = after - t0, end - after
    return {"one_process_s": round(one, 1), "two_processes_s": round(two, 1), "speedup": round(one / two, 2),
            "cores": n}


def jobs_rows(real=("smollm2-135m", "gemma3-270m")) -> dict:
    """:func:`time_pair` for each of :func:`pairs`, printed as each ends."""
    rows = {}
    for label, (a, b) in pairs(real).items():
        rows[label] = time_pair(a, b, label)
        print(jobs_table({label: rows[label]}, header=not rows.keys() - {label}), flush=True)
    return rows


def jobs_table(rows: dict, header: bool = True) -> str:
    """The rows as a Markdown table."""
    lines = ["| pair | one process, every core, one after the other (s) | two processes at once, half the cores "
             "each (s) | speed-up |", "|---|---:|---:|---:|"] if header else []
    lines += [f"| {label} | {r['one_process_s']:.0f} | {r['two_processes_s']:.0f} | {r['speedup']:.2f}× |"
              for label, r in rows.items()]
    return "\n".join(lines)
