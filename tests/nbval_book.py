"""Each chapter executed once per test run: nbval's run of a chapter is the book's.

nbval executes every chapter (``chapters/*.ipynb``) and compares its outputs with the source's. This plugin
(loaded with ``-p nbval_book``, see ``pyproject.toml``) makes that execution the one the book renders:

* right after a chapter's parameters cell, it sets the parameters the book gives the chapter
  (:func:`depthutils.book.runner.real_parameters`: the real models the build can include), as papermill's
  injected cell does, so the real-model sections run inside nbval's kernel; the cells they change are
  the ones nbval ignores (figures, the sections themselves) or sanitizes (``tests/nbval_sanitize.cfg``);
* chapters 0–6 run :data:`REAL_SAMPLE` prompt on a real model, not the book's N;
* it writes each chapter whose every cell passed, with the outputs nbval saw, to :data:`EXECUTED`.

``tests/book/test_book.py`` then renders the book from those notebooks (``python -m depthutils book
--executed _build/executed``) instead of executing every chapter again. Only the chapters of
``chapters/`` are touched; any other notebook nbval collects runs as nbval runs it.

Under pytest-xdist (``-n``, ``pyproject.toml``) the chapters run on several workers, a notebook on one; the book waits
(:func:`wait_for_chapters`) until every chapter this run collected has finished on whichever worker ran it: each
leaves its executed copy, or a ``.failed`` mark, in :data:`EXECUTED`.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
#: where the executed chapters go; the book's fixture renders them from here
EXECUTED = ROOT / "_build" / "executed"

#: the test run's sample on a real model (``real_sample``, chapters 0–6): one prompt (per kind in chapters 4 and 5,
#: per level in chapter 6) runs the same code as the book's N (chapters 4 and 5's ten per kind take about half an
#: hour of integrated gradients on SmolLM2 on 2 cores); its verdict is *not tested*, as the page says. The graded
#: path on a real model at the book's N: ``tests/book/test_realruns.py`` (chapter 1) and ``tests/perf/test_precision.py``
REAL_SAMPLE = 1
_state: dict = {"real": None, "failed": set(), "outputs": {}, "collected": set()}


def _is_chapter(path) -> bool:
    return Path(path).resolve().parent == CHAPTERS


def _book_real() -> tuple[list, dict]:
    """The real models the book can include here (fetched once per test run), and why each other is left out."""
    if _state["real"] is None:
        from depthutils.book.realruns import available

        _state["real"] = available()
    return _state["real"]


def pytest_configure(config):
    if not (getattr(config.option, "nbval", False) or getattr(config.option, "nbval_lax", False)):
        return
    from nbval import plugin as nbval

    if getattr(nbval.IPyNbCell, "_book_wrapped", False):
        return
    run_cell, teardown = nbval.IPyNbCell.runtest, nbval.IPyNbFile.teardown

    def runtest(self):
        path = Path(self.parent.fspath)
        if not _is_chapter(path):
            return run_cell(self)
        try:
            run_cell(self)
        except BaseException:
            _state["failed"].add(path.name)
            raise
        finally:
            _state["outputs"].setdefault(path.name, {})[self.cell_num] = list(getattr(self, "test_outputs", []))
        if "parameters" in self.cell.metadata.get("tags", []):
            _inject(self.parent, path)

    def file_teardown(self):
        try:
            if _is_chapter(self.fspath):
                _write(Path(self.fspath), self.nb)
        finally:
            teardown(self)

    nbval.IPyNbCell.runtest, nbval.IPyNbFile.teardown = runtest, file_teardown
    nbval.IPyNbCell._book_wrapped = True


def _injected_source(path: Path) -> str:
    from depthutils.book.runner import real_parameters

    params = real_parameters(path, _book_real()[0], REAL_SAMPLE)
    return "".join(f"{name} = {value!r}\n" for name, value in params.items())


def _inject(nb_file, path: Path) -> None:
    """Run the book's parameters in the chapter's kernel, after its parameters cell."""
    source = _injected_source(path)
    if not source:
        return
    kernel = nb_file.kernel
    msg_id = kernel.execute_cell_input(source, allow_stdin=False)
    kernel.await_reply(msg_id, timeout=600)  # the shell's reply; what went wrong comes on iopub
    while True:
        msg = kernel.get_message(stream="iopub", timeout=600)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "error":
            raise RuntimeError(f"{path.name}: the book's parameters failed in the kernel: "
                               f"{msg['content']['ename']}: {msg['content']['evalue']}")
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return


def _write(path: Path, nb) -> None:
    """The chapter with the outputs nbval saw, into :data:`EXECUTED`, if every cell ran and passed."""
    outputs = _state["outputs"].pop(path.name, {})
    target = EXECUTED / path.name
    if target.exists():
        target.unlink()  # never leave an older run where this one failed
    EXECUTED.mkdir(parents=True, exist_ok=True)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if path.name in _state["failed"] or len(outputs) != len(code):
        _failed_mark(path.name).write_text("a cell failed or did not run under nbval\n")
        return
    out = nbformat.from_dict(nb)
    count = 0
    for cell in out.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = [nbformat.from_dict(o) for o in outputs[count]]
        count += 1
        cell.execution_count = count
    source = _injected_source(path)
    if source:
        at = next(i for i, c in enumerate(out.cells) if "parameters" in c.metadata.get("tags", []))
        cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters", "remove-cell"]})
        out.cells.insert(at + 1, cell)
    partial = target.with_name(f".{target.name}.part")  # whole or absent: another worker waits on its existence
    nbformat.write(out, partial)
    os.replace(partial, target)



def _failed_mark(name: str) -> Path:
    return EXECUTED / f"{name}.failed"


def wait_for_chapters(timeout: float = 3600, poll: float = 2.0) -> list[str]:
    """Wait until every chapter this run collected has finished under nbval (on any worker); the names of those that
    did not pass (no executed copy). Returns at once in a run that collected no chapter."""
    pending = set(_state["collected"])
    deadline = time.monotonic() + timeout
    while True:
        pending = {n for n in pending if not (EXECUTED / n).exists() and not _failed_mark(n).exists()}
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(poll)
    return sorted(n for n in _state["collected"] if not (EXECUTED / n).exists())


def pytest_collection_finish(session):
    """The chapters this run executes, once deselection is done (every xdist worker collects them all, whichever
    worker runs them)."""
    _state["collected"] = {Path(item.fspath).name for item in session.items if _is_chapter(item.fspath)}


def pytest_sessionstart(session):
    """Only this run's chapters are rendered: clear what an earlier run executed (once, in the process that starts the
    xdist workers, before they start)."""
    if hasattr(session.config, "workerinput") or not EXECUTED.exists():
        return
    for old in [*EXECUTED.glob("*.ipynb"), *EXECUTED.glob("*.failed")]:
        old.unlink()
