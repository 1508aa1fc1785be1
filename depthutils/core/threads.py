"""Torch's threads beside other CPU-bound processes: no more threads than the cores the others leave free.

PyTorch's CPU kernels run their parallel regions on OpenMP threads that spin while they wait at a region's end. Beside
another CPU-bound process the machine is oversubscribed: a thread spins while the one it waits for is descheduled,
and a pass of many small regions (integrated gradients on a small model) can take many times longer than on the
same cores idle. :func:`spare_threads` runs a block on the threads the other processes leave free, from the kernel's
count of runnable threads (Linux; elsewhere it changes nothing).
"""
from __future__ import annotations

import contextlib
import os
import sys
import time

import torch

from depthutils.core.progress import bars_wanted

__all__ = ["busy_cores", "spare_threads"]

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
    setting again after it; says so in one line (``say``) when it uses fewer."""
    had = torch.get_num_threads()
    busy = busy_cores() if had > 1 else None
    cores = os.cpu_count() or 1
    use = had if busy is None else max(1, min(had, round(cores - busy)))
    if use < had:
        torch.set_num_threads(use)
        if say and bars_wanted():
            print(f"{what}: {use} of {had} threads, other processes keep {busy} of {cores} cores busy",
                  file=sys.stderr, flush=True)
    try:
        yield use
    finally:
        if use < had:
            torch.set_num_threads(had)
