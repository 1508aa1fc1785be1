"""``python -m depthutils book --jobs N``: chapters executed at once, each in a process of its own."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from depthutils.book.runner import default_jobs, kernel_config, run_chapters
from depthutils.core.threads import cores


def probe(num: str, out: Path, fail: bool = False) -> Path:
    """A stand-in for :func:`run_chapter`: a notebook, run by papermill in a kernel as a chapter is, that records
    its kernel's process, its run's start and end and the threads it was given, then fails if ``fail``."""
    import nbformat
    import papermill

    record = str(out / f"{num}.json")
    code = ("import json, os, time\nt0 = time.time()\ntime.sleep(3)\n"
            f"json.dump(dict(kernel=os.getpid(), parent=os.getppid(), start=t0, end=time.time(), "
            f"threads=os.environ.get('OMP_NUM_THREADS'), jobs=os.environ.get('DEPTHUTILS_JOBS'), turns=os.environ.get('DEPTHUTILS_TURNS')), open({record!r}, 'w'))"
            + ("\nraise ValueError('chapter ' + " + repr(num) + " + ' failed')" if fail else ""))
    src, dest = out / f"{num}-src.ipynb", out / f"{num}.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)],
                                            metadata={"kernelspec": {"name": "python3", "language": "python",
                                                                     "display_name": "Python 3"}}), src)
    papermill.execute_notebook(str(src), str(dest), kernel_name="python3", progress_bar=False, config=kernel_config())
    return dest


def test_two_jobs_run_two_chapters_at_once_in_processes_of_their_own_and_a_failure_is_raised(tmp_path):
    todo = {num: dict(out=tmp_path, fail=num == "c") for num in ("a", "b", "c")}
    with pytest.raises(Exception, match="chapter c failed"):
        run_chapters(todo, 2, run=probe)
    a, b, c = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "abc")
    assert a["start"] < b["end"] and b["start"] < a["end"]  # at once
    assert a["parent"] != b["parent"]  # two papermills, in two processes
    assert {r["threads"] for r in (a, b, c)} == {str(max(1, cores() // 2))} and {r["jobs"] for r in (a, b, c)} == {"2"}
    assert c["start"] >= min(a["end"], b["end"]) - 0.5  # the third waited for a free job
    assert len({r["turns"] for r in (a, b, c)}) == 1 and a["turns"].endswith("turns.lock")  # one lock for their real runs


def test_one_job_runs_them_one_after_the_other_here(tmp_path):
    run_chapters({num: dict(out=tmp_path) for num in ("a", "b")}, 1, run=probe)
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "ab")
    assert b["start"] >= a["end"]


def test_two_kernels_started_in_one_folder_get_sockets_of_their_own():
    """jupyter_client names a kernel's IPC sockets ``kernel-ipc-<n>`` in the working folder unless told otherwise: two
    kernels started at once there took the same sockets and got each other's messages ("Invalid Signature")."""
    import os

    from jupyter_client.manager import KernelManager

    a, b = (KernelManager(kernel_name="python3", config=kernel_config()) for _ in range(2))
    assert a.transport == b.transport
    if a.transport == "ipc":
        assert a.ip != b.ip and os.path.isabs(a.ip) and os.path.isabs(b.ip)


def test_the_book_runs_a_chapter_per_core_without_real_models_and_one_at_a_time_with_them():
    """On 2 cores the embedded model's chapters ran 1.6x faster side by side (bench --only jobs); the book with both
    real models from an empty model cache took 2,900 s one chapter at a time and 2,971 s two at once."""
    assert default_jobs({"01": {"params": {"real_models": []}}, "07": {"params": {}}}) == cores()
    assert default_jobs({"01": {"params": {"real_models": ["smollm2-135m"]}}, "07": {"params": {}}}) == 1
