"""What ``python -m depthutils bench``'s tables share: the models, the timer and the fresh process per run.

``"b"`` names a 12-layer, width-512 Llama (random init, seed 0) with the project's tokenizer, built once
in the temporary folder; any other name goes to :func:`~depthutils.models.handle.load_model`.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from depthutils import data
from depthutils.core.prompts import Prompt
from depthutils.models.handle import load_model
from depthutils.models.random_init import random_model

BENCH_MODEL_B = dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=12, num_attention_heads=8)


def setup_model(model_spec, device="cpu", dtype="float32"):
    """The model and the future-effects prompt: GSM8K's first problem, cut to the model's context."""
    path = str(model_b()) if model_spec == "b" else model_spec
    handle = load_model(path, device=device, dtype=dtype)
    p = data.gsm8k(1)[0]
    ids = handle.tokenizer(p.text)["input_ids"]
    if len(ids) > handle.max_length:
        p = Prompt(handle.tokenizer.decode(ids[1:handle.max_length // 2]), 0, "gsm8k")
    return handle, [p]


def model_b() -> Path:
    """A 12-layer, width-512 Llama (random init, seed 0) with the project's tokenizer; built once."""
    return random_model("llama", Path(tempfile.gettempdir()) / "depthutils-bench-llama-12x512",
                        max_position_embeddings=1024, **BENCH_MODEL_B)


def sync(handle):
    if torch.cuda.is_available() and str(handle.device).startswith("cuda"):
        torch.cuda.synchronize()


def timed(handle, run, repeats, before=lambda: None):
    """One warm-up call of ``run``, then ``repeats`` timed ones (``before`` runs ahead of each, untimed);
    returns the times in seconds and the last result."""
    out = run()
    times = []
    for _ in range(repeats):
        before()
        sync(handle)
        t0 = time.perf_counter()
        out = run()
        sync(handle)
        times.append(time.perf_counter() - t0)
    return times, out


#: the CPU-bound neighbour of :func:`neighbour`: float32 matrix products on 2 threads, until it is stopped
NEIGHBOUR = ("import torch; torch.set_num_threads(2); a = torch.randn(1024, 1024)\n"
             "while True:\n    a = (a @ a).div_(a.norm())")


@contextlib.contextmanager
def neighbour():
    """A CPU-bound job beside the timed code, as a user's machine has one (another notebook, a build): a process
    running :data:`NEIGHBOUR`, started before the block (and given a second to get going) and stopped after it."""
    job = subprocess.Popen([sys.executable, "-c", NEIGHBOUR], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        if job.poll() is not None:
            raise RuntimeError(f"the neighbour job stopped at once (exit code {job.returncode})")
        yield job
    finally:
        job.kill()
        job.wait()


def _call(fn, args, queue) -> None:
    """In the fresh process: put ``fn(*args)`` on ``queue``, or the error it raised, for the parent to report."""
    try:
        queue.put(fn(*args))
    except BaseException as e:
        queue.put({"error": f"{type(e).__name__}: {e}"})


def isolated(fn, *args) -> dict:
    """Run ``fn(*args)`` (a module-level function returning a dict) in a fresh process, so its time and peak memory
    are its own, and return its dict; an error in it is raised here."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_call, args=(fn, args, q))
    p.start()
    while True:
        try:
            out = q.get(timeout=5)
            break
        except queue.Empty:
            if not p.is_alive():
                raise RuntimeError(f"benchmark worker died with exit code {p.exitcode}") from None
    p.join()
    if "error" in out:
        raise RuntimeError(f"benchmark worker failed: {out['error']}")
    return out
