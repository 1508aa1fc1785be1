"""Working the exercises in JupyterLab: JupyterLab and its MyST renderer are pinned and
installed by the README's setup (``pip install -r requirements.txt``), the students' copy opens in JupyterLab
with the MyST extension loaded, and an exercise cell of that copy runs its checker in a kernel of this
environment (the one the README's setup makes: a fresh venv per test would take minutes).
"""
from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from importlib import metadata

import nbformat
import pytest
from conftest import ROOT
from nbclient import NotebookClient

from depthutils.book.runner import kernel_config
from depthutils.book.student import student_copy

LAB = ("jupyterlab", "jupyterlab-myst")
STUB = "raise NotImplementedError  # your code here"


def _pins() -> dict:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {name: version for group in extras.values() for name, _, version in (p.partition("==") for p in group)}


def test_jupyterlab_and_its_myst_renderer_are_pinned_and_installed():
    pins = _pins()
    for name in LAB:
        assert re.fullmatch(r"\d+(\.\d+)+", pins.get(name, "")), f"{name} is not pinned exactly in pyproject.toml"
        assert metadata.version(name) == pins[name], f"{name} {metadata.version(name)} installed, {pins[name]} pinned"
    extras = re.search(r"-e \.\[([^\]]+)\]", (ROOT / "requirements.txt").read_text()).group(1).split(",")
    book = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["book"]
    assert "book" in extras and all(any(p.startswith(n + "==") for p in book) for n in LAB)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: seconds a request or the server's start may take before the test gives up: guards against a hang, far above what
#: a loaded machine needs (a busy CPU slows JupyterLab's start and its answers, it does not stop them)
HANG = 300


def get_path(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=HANG) as r:
        return r.read()


@pytest.mark.server
def test_the_students_copy_opens_in_jupyterlab_with_myst(tmp_path):
    """A JupyterLab server of this environment serves every chapter of the students' copy as a valid notebook,
    and its page loads the jupyterlab-myst extension (which renders ``{exercise}`` blocks)."""
    written = student_copy(tmp_path)
    port = _free_port()
    log = tmp_path / "lab.log"  # the server's log: a file, not a pipe that nobody reads while it runs (a full one
    #                             blocks the server)
    with log.open("wb") as err:
        lab = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.port={port}",
                                "--ServerApp.ip=127.0.0.1", "--allow-root", "--IdentityProvider.token=",
                                "--ServerApp.password=", f"--ServerApp.root_dir={tmp_path}",
                                "--ServerApp.port_retries=0"],
                               stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + HANG
        while True:  # until it answers: a loaded machine only makes this take longer
            try:
                get_path(base + "/api/status")
                break
            except (urllib.error.URLError, ConnectionError):
                assert lab.poll() is None, log.read_text()[-2000:]
                assert time.monotonic() < deadline, f"JupyterLab did not answer in {HANG} s: {log.read_text()[-2000:]}"
                time.sleep(0.5)
        for path in written:
            model = json.loads(get_path(f"{base}/api/contents/{path.relative_to(tmp_path).as_posix()}?content=1"))
            assert model["type"] == "notebook" and model["format"] == "json", path.name
            nb = nbformat.from_dict(model["content"])
            nbformat.validate(nb)
            assert any("exercises.check(" in c.source for c in nb.cells), path.name
        page = get_path(base + "/lab").decode()
        config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                      page, re.S).group(1))
        assert "jupyterlab-myst" in {e["name"] for e in config["federated_extensions"]}
    finally:
        lab.terminate()
        try:
            lab.wait(timeout=HANG)
        except subprocess.TimeoutExpired:
            lab.kill()
            lab.wait()


def _exercise_cell(path, id: str, body: str) -> nbformat.NotebookNode:
    """The students' exercise cell of ``id`` in ``path``, with the stub replaced by ``body`` (as a student
    would write it)."""
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and f'exercises.check("{id}"' in c.source)
    assert STUB in cell.source, cell.source
    return nbformat.v4.new_code_cell(cell.source.replace(STUB, body))


@pytest.mark.parametrize("body, expected", [
    ("with torch.no_grad(), lm.nn.trace(input_ids):\n        h = lm.layer(layer).output.save()\n    return h",
     "✔ layer_output: all 2 cases match"),
    ("with torch.no_grad(), lm.nn.trace(input_ids):\n        h = lm.layer(layer).output[0].save()\n    return h",
     "you dropped the batch axis"),
], ids=["right", "output[0]"])
def test_an_exercise_cell_of_the_students_copy_runs_its_checker_in_a_kernel(tmp_path, body, expected):
    """Chapter 0's exercise cell, answered right and answered with the ``output[0]`` mistake, in a fresh kernel
    of this environment: the checker prints its tick, or its message names the mistake."""
    path = next(p for p in student_copy(tmp_path) if p.name.startswith("00_"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import torch\nfrom depthutils.teaching import exercises"),
                                         _exercise_cell(path, "layer_output", body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, kernel_name="python3", timeout=600, allow_errors=True, config=kernel_config()).execute()
    outputs = nb.cells[-1].outputs
    text = "".join(o.get("text", "") for o in outputs) + "".join(o.get("evalue", "") for o in outputs)
    assert expected in text, outputs
