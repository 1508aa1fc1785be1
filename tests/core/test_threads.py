"""Torch's threads beside other CPU-bound processes (:mod:`depthutils.core.threads`)."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from depthutils.core import threads

SPIN = "while True:\n    pass"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_spinning_process_counts_as_busy_and_this_ones_threads_do_not():
    job = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        time.sleep(0.5)
        assert job.poll() is None
        assert threads.busy_cores() >= 1
    finally:
        job.kill()
        job.wait()
    x = torch.randn(512, 512)
    start = time.perf_counter()
    while time.perf_counter() - start < 0.2:  # this process's own threads, just busy, are not another's
        x = (x @ x).div_(x.norm())
    assert threads.busy_cores() == 0


@pytest.mark.parametrize("busy, expect", [(None, "all"), (0, "all"), (1, 1), (5, 1)])
def test_spare_threads_leaves_the_free_cores_and_restores_the_setting(monkeypatch, busy, expect):
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(threads, "busy_cores", lambda: busy)
    had = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError), threads.spare_threads("test") as use:
            assert use == torch.get_num_threads() == (2 if expect == "all" else expect)
            raise RuntimeError("the block fails")
        assert torch.get_num_threads() == 2  # restored, after an error too
    finally:
        torch.set_num_threads(had)
