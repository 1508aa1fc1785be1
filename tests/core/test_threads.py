"""Torch's threads beside other CPU-bound processes (:mod:`depthutils.core.threads`).

The logic is tested on readings the tests choose (a fake ``/proc`` under :func:`threads._running`, or fake counts
under :func:`threads.busy_cores`), so that what else runs on the machine cannot change the outcome; one smoke test
reads the real ``/proc`` and asserts only what no other process can flip.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import types

import pytest
import torch

from depthutils.core import threads

SPIN = "while True:\n    pass"
#: a task's ``stat`` line as Linux writes it: the name in parentheses may hold spaces and ")" itself
TASK_STAT = "{tid} (py (worker) 1) {state} 1 4000 4000 0 -1 4194304 102 0 0 0 0 0 0 0 20 0 3 0 30819 3133440 415"


@pytest.fixture
def fake_proc(monkeypatch):
    """``fake_proc(procs_running, own_states, gone=())``: from here on :func:`threads._running` reads a ``/proc``
    whose ``/proc/stat`` says ``procs_running`` (None: no such line; "missing": no such file), and whose
    ``/proc/self/task`` lists one thread per state of ``own_states`` (those in ``gone`` exit before their ``stat`` is
    read). Other paths are the real ones."""
    real_open, real_listdir = open, os.listdir
    proc = {}

    def fake_open(path, *args, **kw):
        path = str(path)
        if path == "/proc/stat":
            if proc["running"] == "missing":
                raise FileNotFoundError(path)
            lines = ["cpu  10 0 10 100 0 0 0 0 0 0", "ctxt 12345", "processes 4321"]
            lines += [] if proc["running"] is None else [f"procs_running {proc['running']}"]
            return io.StringIO("\n".join(lines + ["procs_blocked 0", ""]))
        if path.startswith("/proc/self/task/"):
            tid = int(path.split("/")[4])
            if tid in proc["gone"]:
                raise FileNotFoundError(path)
            return io.StringIO(TASK_STAT.format(tid=tid, state=proc["states"][tid - 4000]) + "\n")
        return real_open(path, *args, **kw)

    def fake_listdir(path="."):
        if str(path) == "/proc/self/task":
            return [str(4000 + i) for i in range(len(proc["states"]))]
        return real_listdir(path)

    monkeypatch.setattr(threads, "open", fake_open, raising=False)  # the module's name `open`, ahead of the builtin
    monkeypatch.setattr(threads.os, "listdir", fake_listdir)

    def set_proc(procs_running, own_states, gone=()):
        proc.update(running=procs_running, states=list(own_states), gone={4000 + i for i in gone})
    return set_proc


@pytest.mark.parametrize("running, own, gone, expect", [
    (1, "R", (), 0),             # only the reading thread runs: nothing else is busy
    (3, "RSS", (), 2),           # two threads of other processes
    (3, "RRS", (), 1),           # a spinning process counts as busy, this process's own running threads do not
    (5, "RSRDR", (), 2),         # only the own threads in state R are taken off (S sleeps, D waits on I/O)
    (2, "RRR", (), 0),           # own threads started running between the two reads: never below 0
    (4, "RRR", (1,), 2),         # a thread that exits between listing and reading is not counted
    (None, "R", (), None),       # no procs_running line
    ("missing", "R", (), None),  # no /proc/stat (not Linux)
])
def test_running_counts_the_runnable_threads_of_other_processes(fake_proc, running, own, gone, expect):
    fake_proc(running, own, gone)
    assert threads._running() == expect


def test_a_spinning_process_counts_as_busy_and_this_ones_threads_do_not(fake_proc, monkeypatch):
    """A process spinning on a core is one runnable thread in the kernel's count; this process's own threads, busy
    with matrix products while the count is read, are not another process's load."""
    monkeypatch.setattr(threads, "time", types.SimpleNamespace(sleep=lambda s: None))
    fake_proc(1 + 1, "RS")  # the spinner, and the thread that reads
    assert threads.busy_cores() == 1
    fake_proc(1 + 3, "RRRS")  # the spinner, the reading thread and two busy workers of this process
    assert threads.busy_cores() == 1
    fake_proc(0 + 3, "RRRS")  # the spinner has stopped
    assert threads.busy_cores() == 0


@pytest.mark.parametrize("readings, expect", [
    ([2, 2, 2, 2, 2], 2),
    ([3, 1, 2, 4, 5], 1),  # the fewest of the reads
    ([1, 0, 1, 1, 1], 0),  # a thread that runs in bursts is not counted as busy
    ([1, 1, None, 1, 1], None),  # the counts cannot be read
])
def test_busy_cores_takes_the_fewest_of_its_reads_a_gap_apart(monkeypatch, readings, expect):
    calls = []  # in order: ("read", n) and ("sleep", seconds)

    def read():
        calls.append(("read", readings[len([c for c in calls if c[0] == "read"])]))
        return calls[-1][1]
    monkeypatch.setattr(threads, "_running", read)
    monkeypatch.setattr(threads, "time", types.SimpleNamespace(sleep=lambda s: calls.append(("sleep", s))))
    assert len(readings) == threads.SAMPLES
    assert threads.busy_cores() == expect
    taken = readings[:readings.index(None) + 1] if None in readings else readings  # it stops at an unreadable count
    want = [("read", taken[0])] + [c for n in taken[1:] for c in (("sleep", threads.GAP), ("read", n))]
    assert calls == want  # a gap between two reads, none before the first


@pytest.mark.parametrize("busy, expect", [(None, "all"), (0, "all"), (1, 1), (5, 1)])
def test_spare_threads_leaves_the_free_cores_and_restores_the_setting(monkeypatch, capsys, busy, expect):
    monkeypatch.setattr(threads, "cores", lambda: 2)
    monkeypatch.setattr(threads, "busy_cores", lambda: busy)
    had = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError), threads.spare_threads("test", say=True) as use:
            assert use == torch.get_num_threads() == (2 if expect == "all" else expect)
            raise RuntimeError("the block fails")
        assert torch.get_num_threads() == 2  # restored, after an error too
    finally:
        torch.set_num_threads(had)
    said = capsys.readouterr().err
    assert said == ("" if expect == "all" else f"test: 1 of 2 threads, other processes keep {busy} of 2 cores busy\n")


def test_spare_threads_on_one_thread_reads_nothing(monkeypatch):
    def busy_cores():
        raise AssertionError("one thread has none to spare: the counts need not be read")
    monkeypatch.setattr(threads, "busy_cores", busy_cores)
    had = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threads.spare_threads("test") as use:
            assert use == torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(had)


@pytest.mark.parametrize("had", [1, 2])
def test_spare_threads_through_busy_cores_on_readings(fake_proc, monkeypatch, had):
    """The whole path (``/proc``'s counts, then the threads torch gets) on chosen readings: a neighbour on one of
    two cores leaves one thread, and with nothing else running the block keeps all of them."""
    monkeypatch.setattr(threads, "cores", lambda: 2)
    monkeypatch.setattr(threads, "time", types.SimpleNamespace(sleep=lambda s: None))
    before = torch.get_num_threads()
    torch.set_num_threads(had)
    try:
        fake_proc(1 + 1, "RS")  # a neighbour, and the reading thread
        with threads.spare_threads("test") as use:
            assert use == torch.get_num_threads() == 1
        fake_proc(1, "RSS")  # nothing else
        with threads.spare_threads("test") as use:
            assert use == torch.get_num_threads() == had
        assert torch.get_num_threads() == had
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_real_counts_are_read_and_bounded():
    """Smoke test on the real ``/proc``, asserting only what no other process can change: the counts parse; beside a
    spinning process a count of at least one is read (others can only add to it; the count is polled, since a
    quota-throttled spinner is not runnable for a moment); the block gets between one thread and torch's setting,
    which it gets back."""
    assert isinstance(threads._running(), int) and threads._running() >= 0
    assert isinstance(threads.busy_cores(), int) and threads.busy_cores() >= 0
    job = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        deadline = time.monotonic() + 120  # a guard against hanging, not a speed: any load only delays the read
        while threads._running() < 1:
            assert job.poll() is None and time.monotonic() < deadline, "the spinning process was never counted"
            time.sleep(0.01)
    finally:
        job.kill()
        job.wait()
    had = torch.get_num_threads()
    with threads.spare_threads("test") as use:
        assert 1 <= use <= had and torch.get_num_threads() == use
    assert torch.get_num_threads() == had


@pytest.mark.parametrize("jobs, busy, expect", [(None, 0, 1), ("1", 0, 1), ("2", 0, 2), ("2", 1, 1), ("2", 3, 1),
                                                ("2", None, 1)])
def test_a_chapter_beside_others_takes_the_cores_they_free(monkeypatch, jobs, busy, expect):
    """Where chapters run side by side (``DEPTHUTILS_JOBS`` above 1), a loop's next item runs on the cores the other
    processes leave free (at least one), looked up at most every ``EVERY`` seconds; a chapter run alone keeps its
    threads whatever the machine does."""
    from depthutils.core.progress import JOBS_ENV, progress

    clock = [1000.0]
    monkeypatch.setattr(threads, "cores", lambda: 2)
    monkeypatch.setattr(threads, "busy_cores", lambda: busy)
    monkeypatch.setattr(threads, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(threads, "_LOOKED", {"at": float("-inf")})
    if jobs is None:
        monkeypatch.delenv(JOBS_ENV, raising=False)
    else:
        monkeypatch.setenv(JOBS_ENV, jobs)
    had = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        seen = [torch.get_num_threads() for _ in progress(range(2), "test", enabled=False)]
        assert seen == [expect, expect]
        if jobs == "2":
            monkeypatch.setattr(threads, "busy_cores", lambda: 1)  # another chapter starts: not looked at before EVERY
            clock[0] += threads.EVERY / 2
            assert threads.take_freed_cores() == expect
            clock[0] += threads.EVERY
            assert threads.take_freed_cores() == 1
    finally:
        torch.set_num_threads(had)

