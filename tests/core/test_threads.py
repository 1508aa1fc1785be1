"""Torch's threads beside other CPU-bound processes (:mod:`depthutils.core.threads`)."""
from __future__ import annotations

import subprocess
import sys
import threading
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
    before = threads.busy_cores()  # whatever else runs on this machine now
    done = threading.Event()

    def work():  # this process's own threads, busy with matrix products while the count is read
        x = torch.randn(512, 512)
        while not done.is_set():
            x = (x @ x).div_(x.norm())

    worker = threading.Thread(target=work)
    worker.start()
    try:
        time.sleep(0.1)
        during = threads.busy_cores()
    finally:
        done.set()
        worker.join()
    assert during <= before


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
