"""Torch's threads beside other CPU-bound processes: no more threads than the cores the others leave free.

PyTorch's CPU kernels run their parallel regions on OpenMP threads that spin while they wait at a region's end. Beside
another CPU-bound process the machine is oversubscribed: a thread spins while the one it waits for is descheduled,
and a pass of many small regions (integrated gradients on a small model) can take many times longer than on the
same cores idle. :func:`spare_threads` runs a block on the threads the other processes leave free, from the kernel's
count of runnable threads (Linux; elsewhere it changes nothing).

The other way round, :func:`take_freed_cores`: where chapters run side by side
(:data:`depthutils.core.progress.JOBS_ENV` above 1), each starts on its share of the cores, and the last one still
running takes the cores the others have freed (every loop with a progress bar calls it there), so a long chapter does
not finish on one thread while the others' cores idle.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time

import torch

__all__ = ["TURNS_ENV", "taking_turns", "EVERY", "busy_cores", "cores", "spare_threads", "take_freed_cores"]

#: the fewest seconds between two looks at the machine by :func:`take_freed_cores`
EVERY = 5.0

#: reads of the kernel's count of runnable threads that :func:`busy_cores` takes the fewest of, and the seconds between
#: them (a thread that runs in bursts is not counted as busy)
SAMPLES, GAP = 5, 0.002


def _running() -> int | None:
    """Runnable threads of other processes now: the kernel's ``procs_running`` less this process's own (Linux), or
    None where it cannot be read."""
    try:
        with open("/proc/stat") as f:
            total = next(int(line.split()[1]) for line in f if line.startswith("procs_running"))
        own = 0
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):
                with open(f"/proc/self/task/{task}/stat") as f:
                    own += f.read().rsplit(")", 1)[1].split()[0] == "R"
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return max(0, total - own)


def busy_cores() -> int | None:
    """Cores other processes keep busy: the fewest of their runnable threads over :data:`SAMPLES` reads
    :data:`GAP` seconds apart (a few milliseconds in all), or None where the machine's counts cannot be read."""
    counts = []
    for i in range(SAMPLES):
        if i:
            time.sleep(GAP)
        n = _running()
        if n is None:
            return None
        counts.append(n)
    return min(counts)


@contextlib.contextmanager
def spare_threads(what: str = "", say: bool = False):
    """Within the block, torch uses at most the threads the other processes leave free (at least one), and its own
    setting again after it; says so in one line on stderr (``say``) when it uses fewer."""
    had = torch.get_num_threads()
    busy = busy_cores() if had > 1 else None
    n = cores()
    use = had if busy is None else max(1, min(had, round(n - busy)))
    if use < had:
        torch.set_num_threads(use)
        if say:
            print(f"{what}: {use} of {had} threads, other processes keep {busy} of {n} cores busy",
                  file=sys.stderr, flush=True)
    try:
        yield use
    finally:
        if use < had:
            torch.set_num_threads(had)


_LOOKED = {"at": float("-inf")}


def take_freed_cores() -> int:
    """Torch's threads become the cores the other processes leave free (at least one), looked up at most every
    :data:`EVERY` seconds (:func:`depthutils.core.progress.progress` calls it where chapters run side by side).
    Returns the threads torch uses."""
    if time.monotonic() - _LOOKED["at"] < EVERY:
        return torch.get_num_threads()
    _LOOKED["at"] = time.monotonic()
    busy = busy_cores()
    if busy is not None:
        free = max(1, cores() - busy)
        if free != torch.get_num_threads():
            torch.set_num_threads(free)
    return torch.get_num_threads()


#: set by the book's runner beside chapters run side by side: the lock file their real models' runs take turns on
TURNS_ENV = "DEPTHUTILS_TURNS"


@contextlib.contextmanager
def taking_turns():
    """Within the block, no other process holding it runs (a lock on the file :data:`TURNS_ENV` names; unset, the
    block runs at once): side by side, two real models' runs are each slower on half the cores than one after the
    other on all of them, and the chapter that waits frees its core for the run
    (:func:`take_freed_cores`)."""
    path = os.environ.get(TURNS_ENV)
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes, after an error too
        yield


def cores() -> int:
    """The CPU cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
