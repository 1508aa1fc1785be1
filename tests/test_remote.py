"""``remote=True`` against a real NDIF server running here (``tests/ndif``), on the embedded ladder-4.

The session fixture installs the server (its own pinned venv, outside the repo; ``tests/ndif/install.sh``),
starts it in a network namespace of its own that exposes only the API and the object store on 127.0.0.1
(``up.sh``), and stops every process it started (``down.sh``), whatever happens. If the server cannot be
installed or started, every test here fails with that one line: none passes or skips silently.

Deselect locally with ``pytest -m "not remote"`` (the server needs root for its network namespace, apt's
redis-server and ~1.7 GB).
"""
from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import nnsight
import numpy as np
import pytest
import torch
from nnsight.intervention.backends.remote import RemoteBackend

import depthutils as du
from depthutils import data
from depthutils._run import encode_all

from conftest import ATOL, ROOT

pytestmark = pytest.mark.remote

NDIF = ROOT / "tests" / "ndif"
HOST = "http://127.0.0.1:8001"
LAB = Path(os.environ.get("NDIF_LAB") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
           / "depthutils-ndif")  # tests/ndif/env.sh's default
MARKER = "ndif-key-MARKER-5f0c2d9e"  # the API key of every remote call here; must appear nowhere after a run
PROMPT, ANSWER = "5 + 7 + 5 = ", "17"


def _script(name: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(NDIF / name)], capture_output=True, text=True, timeout=timeout)


def _why(r: subprocess.CompletedProcess) -> str:
    lines = (r.stderr.strip() or r.stdout.strip() or f"exit code {r.returncode}").splitlines()
    return lines[-1]


@pytest.fixture(scope="module")
def ndif_server():
    """The local NDIF's API URL, once it serves ladder-4; everything it started is stopped after this module
    (so that the rest of the suite does not share two cores with an idle Ray cluster)."""
    r = _script("install.sh", timeout=1800)
    if r.returncode:
        pytest.fail(f"the local NDIF server could not be installed: {_why(r)}", pytrace=False)
    print(r.stdout.strip())
    _script("down.sh", timeout=120)  # anything a killed earlier session left
    try:
        r = _script("up.sh", timeout=600)
        if r.returncode:
            pytest.fail(f"the local NDIF server did not start: {_why(r)}", pytrace=False)
        print(r.stdout.strip())
        yield HOST
    finally:
        down = _script("down.sh", timeout=120)
        assert down.returncode == 0, f"down.sh left processes running: {down.stdout}"


@pytest.fixture(scope="module")
def remote_env(ndif_server):
    """NDIF_API_KEY = MARKER and nnsight pointed at the local server, for this module's remote calls."""
    old_key, old_host = os.environ.get("NDIF_API_KEY"), nnsight.CONFIG.API.HOST
    os.environ["NDIF_API_KEY"] = MARKER
    nnsight.CONFIG.API.HOST = ndif_server
    yield ndif_server
    nnsight.CONFIG.API.HOST = old_host
    if old_key is None:
        os.environ.pop("NDIF_API_KEY", None)
    else:
        os.environ["NDIF_API_KEY"] = old_key


@pytest.fixture(scope="module")
def pair(remote_env):
    """ladder-4 here and on the local NDIF (fp32 on both)."""
    return du.load_model("ladder-4"), du.load_model("ladder-4", remote=True)


@pytest.fixture(scope="module")
def texts():
    return data.gsm8k(2)


def assert_same(local, remote):
    """Every float array of two results equal within ATOL, and the same arrays on both sides."""
    arrays = {k: v for k, v in vars(local).items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"}
    assert arrays, "the result has no float arrays to compare"
    for name, a in arrays.items():
        b = getattr(remote, name)
        assert b.shape == a.shape, (name, a.shape, b.shape)
        np.testing.assert_allclose(b, a, rtol=0, atol=ATOL, err_msg=name)


def test_the_handle_is_remote_and_the_stack_is_isolated(pair, ndif_server):
    local, remote = pair
    assert remote.remote and not local.remote
    assert remote.revision == local.revision  # the same folder, by content hash
    if os.environ.get("NDIF_ISOLATE", "1") == "1":  # Ray's GCS (6385) and client server (10001) are not here
        for port in (6385, 10001):
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=2).close()


#: remote runs take each measurement's default method (batched nnsight traces, what NDIF can run); the local
#: side runs the same method, so a difference is the remote path's, not a code path's rounding (the local
#: fast path's agreement with the batched one is tests/test_suffix.py's and test_measurements.py's)
SAME = {"method": "batched"}
MEASUREMENTS = {
    "contributions": lambda m, ps, kw: du.contributions(m, ps, progress_bar=False),
    "logit_lens": lambda m, ps, kw: du.logit_lens(m, ps, progress_bar=False),
    "effective_depth": lambda m, ps, kw: du.effective_depth(m, ps, progress_bar=False),
    "erasure": lambda m, ps, kw: du.residual_erasure(m, PROMPT, ANSWER, baseline=du.residual_means(m, ps), **kw),
    "ig_riemann": lambda m, ps, kw: du.integrated_gradients(m, PROMPT, ANSWER, steps=16, **kw),
    "ig_gauss": lambda m, ps, kw: du.integrated_gradients(m, PROMPT, ANSWER, steps=8, rule="gauss", **kw),
    # future effects at answer positions, and greedy decoding for the accuracy (nnsight generate on NDIF)
    "depth_score": lambda m, ps, kw: du.depth_score(m, ["addition", "multihop"], n=2, progress_bar=False),
    "cross_model_mapping": lambda m, ps, kw: du.cross_model_mapping(m, m, data.gsm8k(4), progress_bar=False),
}


@pytest.mark.parametrize("name", list(MEASUREMENTS))
def test_measurement_remote_equals_local(pair, texts, name):
    local, remote = pair
    got = MEASUREMENTS[name](remote, texts, {})
    assert got.meta["remote"] is True
    assert_same(MEASUREMENTS[name](local, texts, SAME), got)


@pytest.mark.parametrize("local_only", [False, True], ids=["total", "direct"])
@pytest.mark.parametrize("mode", ["future", "all"])
@pytest.mark.parametrize("part", ["layer", "attn", "mlp"])
def test_future_effects_remote_equals_local(pair, texts, part, mode, local_only):
    local, remote = pair
    run = lambda m, kw: du.future_effects(m, texts[:1], part=part, mode=mode, local=local_only,  # noqa: E731
                                          progress_bar=False, **kw)
    got = run(remote, {})
    assert np.nanmax(np.abs(got.layer_effect)) > 1e-3  # a real effect came back
    assert_same(run(local, SAME), got)


def test_logit_lens_never_ships_logits(pair, texts, monkeypatch):
    """A remote logit lens returns per-layer [T] statistics, not L×T×V lens logits (or even one T×V)."""
    local, remote = pair
    seen: list[tuple[int, list[tuple[int, ...]]]] = []
    original = RemoteBackend.finalize

    def spy(self, content):
        result = original(self, content)
        shapes = []

        def walk(x):
            if isinstance(x, torch.Tensor):
                shapes.append(tuple(x.shape))
            elif isinstance(x, dict):
                [walk(v) for v in x.values()]
            elif isinstance(x, (list, tuple)):
                [walk(v) for v in x]
        walk(result)
        seen.append((len(content), shapes))
        return result

    monkeypatch.setattr(RemoteBackend, "finalize", spy)
    du.logit_lens(remote, texts[:1], progress_bar=False)
    assert len(seen) == 1, "one remote request per prompt"
    n_bytes, shapes = seen[0]
    T = encode_all(local, texts[:1])[1][0].n_tokens
    V, L = local.config.vocab_size, local.n_layers
    assert shapes and all(V not in s for s in shapes), shapes
    assert sum(int(np.prod(s)) for s in shapes) <= 2 * L * T, shapes  # KL and overlap per layer and token
    assert n_bytes < L * T * V * 4 / 100, (n_bytes, L * T * V * 4)


def readme_ndif_example() -> list[str]:
    """The README's NDIF example for another host (the line that starts with NDIF_HOST=), as argv."""
    lines = [ln for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith("NDIF_HOST=")]
    assert len(lines) == 1, "the README has one NDIF_HOST example"
    host, python, *args = shlex.split(lines[0])
    assert host == f"NDIF_HOST={HOST}" and python == "python", lines[0]
    return [sys.executable, *args]


def test_a_remote_chapter_leaks_no_key(remote_env, tmp_path):
    """The README's NDIF example, run with NDIF_API_KEY set to a marker: the chapter runs remotely and
    leaves the marker in no executed notebook, figure, cache entry or output of the run."""
    out = tmp_path / "out"
    env = {**os.environ, "NDIF_API_KEY": MARKER, "NDIF_HOST": remote_env}
    run = subprocess.run([*readme_ndif_example(), "--out", str(out)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    executed = out / "09_depth_across_scale.ipynb"
    assert executed.exists() and "remote = True" in executed.read_text()
    assert list((out / "cache").glob("*.npz")), "the run cached its results"
    places = [p for p in tmp_path.rglob("*") if p.is_file()]  # notebook, figures, cache entries
    leaks = [str(p) for p in places if MARKER.encode() in p.read_bytes()]
    leaks += [name for name, text in (("stdout", run.stdout), ("stderr", run.stderr)) if MARKER in text]
    assert not leaks, f"the API key marker was found in: {leaks}"
    assert len(places) >= 5 and any(p.suffix == ".npz" for p in places)
    # positive control: the run did authenticate with the marker. The server sees the key by design, and
    # ndif 0.1.2's request log records it (api_key=… at INFO): a server operator's log, not this run's.
    api_log = LAB / "state" / "logs" / "api.log"
    assert MARKER in api_log.read_text(errors="replace"), "the run never sent the key to the server"


def test_up_says_in_one_line_why_it_cannot_start(tmp_path):
    """No server installed: up.sh exits non-zero with one line naming the fix (the fixture fails with it)."""
    r = subprocess.run(["bash", str(NDIF / "up.sh")], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "NDIF_LAB": str(tmp_path)})
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.strip() == f"up.sh: no server venv at {tmp_path}/venv; run tests/ndif/install.sh first"
