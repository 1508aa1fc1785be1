"""``remote=True`` against a real NDIF server running here (``tests/ndif``), on the embedded ladder-4.

The session fixture installs the server (its own pinned venv, outside the repo; ``tests/ndif/install.sh``),
starts it in a network namespace of its own that exposes only the API and the object store on 127.0.0.1
(``up.sh``), and stops every process it started (``down.sh``), whatever happens. If the server cannot be
installed or started, every test here fails with that one line: none passes or skips silently.

Deselect locally with ``pytest -m "not remote"`` (the server needs root for its network namespace, apt's
redis-server and ~1.7 GB).
"""
from __future__ import annotations

import contextlib
import inspect
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import nnsight
import numpy as np
import pytest
import torch
from conftest import ATOL, ROOT, RTOL
from nnsight.intervention.backends.remote import RemoteBackend

import depthutils as du
from depthutils import data
from depthutils.analysis.study import study
from depthutils.core.encoding import encode_all
from depthutils.measures import MEASUREMENTS
from depthutils.models import remote as du_remote
from depthutils.models import requests as du_requests
from depthutils.models.remote import RemoteFault

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
    """Every float array of two results equal within ATOL (RTOL for values far above 1), and the same arrays on
    both sides; the result's LOCAL_ONLY arrays NaN on the remote side."""
    arrays = {k: v for k, v in vars(local).items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"}
    for name in type(local).LOCAL_ONLY:  # not measured remotely: NaN there
        assert np.isnan(getattr(remote, name)).all(), name
        arrays.pop(name)
    assert arrays, "the result has no float arrays to compare"
    for name, a in arrays.items():
        b = getattr(remote, name)
        assert b.shape == a.shape, (name, a.shape, b.shape)
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=ATOL, err_msg=name)


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
#: fast path's agreement with the batched one is tests/models/test_suffix.py's and test_measurements.py's)
SAME = {"method": "batched"}


def same_path(name: str) -> dict:
    """The options that make a local run take the remote path's method (for measurements that have one)."""
    return SAME if "method" in inspect.signature(MEASUREMENTS[name].measure()).parameters else {}


#: integrated gradients' other quadrature rules (riemann is its example's); adaptive sends one request per
#: refinement round (f(x) rides in the first)
IG_RULES = {"gauss": dict(steps=8, rule="gauss"), "adaptive": dict(rule="adaptive", budget=24)}


@pytest.fixture
def requests(monkeypatch) -> list[str]:
    """The id of every job the client sends from here on (nnsight's POST of a request)."""
    sent, post = [], RemoteBackend._post

    def spy(self, request, blob):
        response = post(self, request, blob)
        sent.append(response.id)
        return response
    monkeypatch.setattr(RemoteBackend, "_post", spy)
    return sent


@pytest.mark.parametrize("name", list(MEASUREMENTS))
def test_measurement_remote_equals_local(pair, name, requests):
    """Every registered measurement's example (:mod:`depthutils.measures.example`) in one request, equal to the
    local run of the same method; a measurement for local models only says so before sending anything."""
    local, remote = pair
    if not MEASUREMENTS[name].runs_remotely:
        with pytest.raises(du.DepthError, match="remote=False"):
            MEASUREMENTS[name].example(remote).run()
        assert requests == []
        return
    got = MEASUREMENTS[name].example(remote).run()
    if isinstance(got, du.Result):
        assert got.meta["remote"] is True
    assert len(requests) == 1, requests  # every prompt, trace and decoding bundled
    want = MEASUREMENTS[name].example(local, **same_path(name)).run()
    if isinstance(got, du.Result):
        assert_same(want, got)
    else:
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("rule", list(IG_RULES))
def test_integrated_gradients_rules_remote_equal_local(pair, rule, requests):
    local, remote = pair
    got = du.integrated_gradients(remote, PROMPT, ANSWER, **IG_RULES[rule])
    assert len(requests) == (got.rounds if rule == "adaptive" else 1), requests
    assert_same(du.integrated_gradients(local, PROMPT, ANSWER, **IG_RULES[rule], **SAME), got)


@pytest.mark.parametrize("local_only", [False, True], ids=["total", "direct"])
@pytest.mark.parametrize("mode", ["future", "all"])
@pytest.mark.parametrize("part", ["layer", "attn", "mlp"])
def test_future_effects_remote_equals_local(pair, texts, part, mode, local_only, requests):
    local, remote = pair
    run = lambda m, kw: du.future_effects(m, texts[:1], part=part, mode=mode, local=local_only,  # noqa: E731
                                          progress_bar=False, **kw)
    got = run(remote, {})
    assert len(requests) == 1, requests  # every chunk in one request
    assert np.nanmax(np.abs(got.layer_effect)) > 1e-3  # a real effect came back
    assert_same(run(local, SAME), got)


def test_the_size_budget_splits_a_call_into_few_requests(pair, requests, monkeypatch):
    """Residuals that exceed the request budget (REQUEST_BYTES) go in several sessions, each under it,
    and give the same maps as one request."""
    local, remote = pair
    texts = data.gsm8k(4)
    sizes = [remote.n_layers * e.n_tokens * remote.config.hidden_size * remote.dtype.itemsize
             for e in encode_all(remote, texts)[1]]  # what a request downloads per prompt, as estimated
    whole = du.cross_model_mapping(remote, remote, texts, progress_bar=False)
    assert len(requests) == 1
    monkeypatch.setattr(du_requests, "REQUEST_BYTES", max(sizes) * 2)  # at most two prompts per request
    split = du.cross_model_mapping(remote, remote, texts, progress_bar=False)
    assert len(requests) - 1 == len(du_requests.batches(list(sizes), lambda n: n)) >= 2, requests
    assert_same(whole, split)
    assert_same(du.cross_model_mapping(local, local, texts, progress_bar=False), split)


def test_one_status_bar_and_clean_output(pair, texts, capfd, monkeypatch):
    """With bars on, a remote call shows one bar with the job's states (and queue position) on stderr and
    prints nothing else (nnsight's own line per status is replaced); with bars off (a chapter's kernel),
    it prints nothing at all."""
    remote = pair[1]
    monkeypatch.setenv("DEPTHUTILS_PROGRESS", "1")
    du.contributions(remote, texts)
    out, err = capfd.readouterr()
    assert out == ""
    for state in ("NDIF · contributions · sending", "queued (position 1)", "running", "downloading the results"):
        assert state in err, err
    assert "\n" not in err.strip(), "one bar, updated in place"
    monkeypatch.setenv("DEPTHUTILS_PROGRESS", "0")
    du.contributions(remote, texts)
    assert capfd.readouterr() == ("", "")


def test_queue_position_is_read_from_ndif_messages():
    assert du_remote._position("Added to Queue at position 3.") == 3
    assert du_remote._position("Moved to position 12 in Queue.") == 12
    assert du_remote._position("Your job has started running.") is None


def test_a_fault_names_the_state_before_an_error_status(monkeypatch):
    """NDIF may send ERROR (its replica evicted) just before its server goes away: the fault says what the job was
    doing then ("running"), not "was failed"."""
    from types import SimpleNamespace

    from nnsight.schema.response import Status
    backend = du_remote.Backend("key", name="ladder-4", what="future effects", timeout=60, jobs=[], bar_enabled=False)
    for status in (Status.RECEIVED, Status.RUNNING, Status.ERROR):
        backend.seen(SimpleNamespace(id="abc123", status=status, description="Replica was evicted."))
    monkeypatch.setattr(du_remote, "api_answers", lambda host, timeout=None: False)
    assert str(backend.lost(OSError("gone"))).startswith(
        f"The NDIF server at {backend.host} went away while job abc123 (future effects on ladder-4) was running (")


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
    assert len(seen) == 1, "one remote request"
    n_bytes, shapes = seen[0]
    T = encode_all(local, texts[:1])[1][0].n_tokens
    V, L = local.config.vocab_size, local.n_layers
    assert shapes and all(V not in s for s in shapes), shapes
    assert sum(int(np.prod(s)) for s in shapes) <= 2 * L * T, shapes  # KL and overlap per layer and token
    assert n_bytes < L * T * V * 4 / 100, (n_bytes, L * T * V * 4)


def readme_ndif_example() -> list[str]:
    """The NDIF example for another host of the book's appendix, ``using_depthutils.md`` (the line that starts with
    NDIF_HOST=), as argv."""
    lines = [ln for ln in (ROOT / "using_depthutils.md").read_text().splitlines() if ln.startswith("NDIF_HOST=")]
    assert len(lines) == 1, "using_depthutils.md has one NDIF_HOST example"
    host, python, *args = shlex.split(lines[0])
    assert host == f"NDIF_HOST={HOST}" and python == "python", lines[0]
    return [sys.executable, *args]


def test_a_remote_chapter_leaks_no_key(remote_env, tmp_path):
    """The appendix's NDIF example, run with NDIF_API_KEY set to a marker: the chapter runs remotely and
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


def test_a_second_install_waits_for_the_first(ndif_server, tmp_path):
    """The test run's background install (``tests/conftest.py``) and the fixture's share ``install.sh``'s lock: while
    one holds it the other waits, then goes on (here, to a missing Python: one line)."""
    import fcntl

    lock = (tmp_path / ".install.lock").open("w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    p = subprocess.Popen(["bash", str(NDIF / "install.sh")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "NDIF_LAB": str(tmp_path), "NDIF_PYTHON": "/nonexistent/python3"})
    time.sleep(3)
    assert p.poll() is None  # waiting on the lock
    fcntl.flock(lock, fcntl.LOCK_UN)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1 and err.strip() == "install.sh: /nonexistent/python3 not found (set NDIF_PYTHON to a " \
                                                "Python 3.11 or newer)"


def test_up_says_in_one_line_why_it_cannot_start(tmp_path):
    """No server installed: up.sh exits non-zero with one line naming the fix (the fixture fails with it)."""
    r = subprocess.run(["bash", str(NDIF / "up.sh")], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "NDIF_LAB": str(tmp_path)})
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.strip() == f"up.sh: no server venv at {tmp_path}/venv; run tests/ndif/install.sh first"


# ------------------------------------------------------------------------------------------------
# faults on the remote path: each ends in one RemoteFault (a DepthError) that says what happened and
# what to do, within a bounded wait. The test owns the server's processes: netns.py (the forwarder,
# up.sh's launcher) cuts connections on SIGUSR1 and refuses the object store on SIGUSR2; down.sh stops
# the whole stack, so that test runs last.

#: no fault test waits longer than this for its call to fail (the handle's timeout, a safety net)
FAULT_WAIT = 60
HOLD = LAB / "state" / "hold"


def launcher_pid() -> int:
    """netns.py's PID (up.sh records it as the launcher)."""
    for line in (LAB / "state" / "pids").read_text().splitlines():
        pid, _, name = line.split()
        if name == "launcher":
            return int(pid)
    raise AssertionError("up.sh recorded no launcher")


@pytest.fixture
def on_state(monkeypatch):
    """``on_state(state, action, job=1)``: call ``action()`` once, when the ``job``-th job sent from here on
    reaches ``state`` (as the status bar names it: "running", "completed", ...)."""
    def arm(state: str, action, job: int = 1):
        jobs, fired, seen = [], [], du_remote.Backend.seen

        def spy(self, response):
            seen(self, response)
            jobs.append(response.id) if response.id not in jobs else None
            if self.state == state and len(jobs) == job and not fired:
                fired.append(action())
        monkeypatch.setattr(du_remote.Backend, "seen", spy)
        return fired
    return arm


def signal_forwarder(sig) -> None:
    """Send netns.py a fault signal, and return once the fault is in place (it counts them in state/faults)."""
    acks = LAB / "state" / "faults"
    handled = lambda: int(acks.read_text()) if acks.exists() else 0  # noqa: E731
    before = handled()
    os.kill(launcher_pid(), sig)
    end = time.monotonic() + FAULT_WAIT
    while handled() == before:
        assert time.monotonic() < end, f"netns.py did not act on {sig.name} within {FAULT_WAIT} s"
        time.sleep(0.02)


@contextlib.contextmanager
def holding():
    """While inside, the server holds every job that starts running (tests/ndif/lib/ndif_cpu_actor.py's
    HOLD), so a fault caused at "running" lands before the job can finish, however slow the machine."""
    HOLD.touch()
    try:
        yield
    finally:
        HOLD.unlink(missing_ok=True)


def fails(call, pattern: str) -> str:
    """The message of the RemoteFault ``call()`` raises (it must match ``pattern``), within FAULT_WAIT."""
    t0 = time.monotonic()
    with pytest.raises(RemoteFault, match=pattern) as caught:
        call()
    assert time.monotonic() - t0 < FAULT_WAIT
    message = str(caught.value)
    print(message)  # shown with pytest -s: the sentence a user reads
    assert "\n" not in message and message.endswith(".")
    return message


def test_fault_the_api_answers_with_an_error(remote_env, tmp_path):
    """A model the server does not serve (a folder it never deployed): the API's error, in one sentence."""
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (tmp_path / f).write_bytes((ROOT / "data" / "models" / "ladder-4" / f).read_bytes())
    m = du.load_model(str(tmp_path), remote=True, timeout=FAULT_WAIT)
    fails(lambda: du.contributions(m, data.gsm8k(1), progress_bar=False),
          rf"^NDIF answered job \w+ \(contributions on {tmp_path}\) with an error \(.+\); if NDIF does not serve "
          r"this model, pick one that nnsight.ndif.status\(\) lists")


def test_fault_a_job_exceeds_its_timeout(remote_env):
    with pytest.raises(du.DepthError, match="timeout must be a positive number of seconds"):
        du.load_model("ladder-4", remote=True, timeout=0)
    m = du.load_model("ladder-4", remote=True, timeout=0.5)
    with holding():  # the job cannot finish in time
        fails(lambda: du.future_effects(m, data.gsm8k(4), progress_bar=False),
              r"^NDIF job \w+ \(future effects \(layer, future\) on ladder-4\) did not finish within timeout=0.5 s "
              r"\(it was (running|queued|dispatched).*\); pass a larger timeout to load_model\(\.\.\., remote=True, "
              r"timeout=")


@pytest.mark.skipif(os.environ.get("NDIF_ISOLATE", "1") != "1", reason="needs netns.py's forwarder (NDIF_ISOLATE=1)")
def test_fault_the_connection_drops_and_no_partial_cache_entry(remote_env, tmp_path, on_state):
    """Chapter 9's study, its second request cut mid-run: one sentence; the cache keeps the first task's
    entry only, and the next run recomputes the lost one (and only that)."""
    kw = dict(models=["ladder-4"], tasks=["gsm8k", "addition"], n=2, cache_dir=tmp_path, remote=True,
              progress_bar=False)
    on_state("completed", HOLD.touch, job=1)  # the first task's job finishes; the second is held
    fired = on_state("running", lambda: signal_forwarder(signal.SIGUSR1), job=2)
    try:
        fails(lambda: study(**kw), r"^The connection to NDIF at http://127.0.0.1:8001 dropped while job \w+ "
                                   r"\(effective depth on ladder-4\) was running \(.+\); nothing of this call was kept")
    finally:
        HOLD.unlink(missing_ok=True)
    assert fired
    entries = sorted(p.name for p in tmp_path.glob("*.npz"))
    assert len(entries) == 1 and entries[0].startswith("ed-ladder-4-gsm8k-"), entries
    again = study(**kw)
    assert again.hits == 1 and len(list(tmp_path.glob("*.npz"))) == 2
    assert all(r is not None for r in again.results.values())


@pytest.mark.skipif(os.environ.get("NDIF_ISOLATE", "1") != "1", reason="needs netns.py's forwarder (NDIF_ISOLATE=1)")
def test_fault_the_object_store_is_unreachable(pair, on_state):
    """The job completes, then its results cannot be downloaded from the object store."""
    remote = pair[1]
    fired = on_state("completed", lambda: signal_forwarder(signal.SIGUSR2))
    try:
        fails(lambda: du.cross_model_mapping(remote, remote, data.gsm8k(4), progress_bar=False),
              r"^The results of NDIF job \w+ \(mapping: residuals of ladder-4 on ladder-4\) could not be downloaded "
              r"from NDIF's object store at 127.0.0.1:9000 \(.+\); nothing of this call was kept")
    finally:
        if fired:
            signal_forwarder(signal.SIGUSR2)  # the store is reachable again
    assert fired
    du.contributions(remote, data.gsm8k(1), progress_bar=False)  # and the server serves on


def test_fault_the_server_goes_away_mid_trace(pair, on_state):
    """The issue's case: the stack stopped (down.sh) while a call runs. Last in this module: it stops the server."""
    remote = pair[1]
    fired = on_state("running", lambda: subprocess.Popen(["bash", str(NDIF / "down.sh")], stdout=subprocess.DEVNULL,
                                                         stderr=subprocess.DEVNULL))
    with holding():
        fails(lambda: du.future_effects(remote, data.gsm8k(4), progress_bar=False),
              r"^The NDIF server at http://127.0.0.1:8001 went away while job \w+ \(future effects \(layer, future\) "
              r"on ladder-4\) was running \(.+\); nothing of this call was kept: run the call again once the server "
              r"answers")
    assert fired and fired[0].wait(timeout=120) == 0
