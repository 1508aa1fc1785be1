"""The remote path as NDIF users meet it: one request per measurement call, one status bar, faults in
one sentence.

* :func:`in_sessions` runs a measurement's per-prompt traces on NDIF (for :func:`depthutils.models.each.each`): it
  bundles them into one nnsight session (``model.session()``: all its traces in one request), or into a few
  sessions whose saved results stay under :data:`REQUEST_BYTES` each.
* :class:`Backend` is nnsight's blocking :class:`RemoteBackend` with one tqdm bar for the job's state
  (sent, queued and its position, running, downloading) in place of nnsight's line per status, a
  deadline (``load_model(..., timeout=)``), and every fault turned into a :class:`RemoteFault`, a
  :class:`~depthutils.core.errors.DepthError` whose message says what happened and what to do.

A fault ends the call before anything is returned, so no result (and no cache entry) holds part of it.
"""
from __future__ import annotations

import socket
import time
from typing import Any, Callable
from urllib.parse import urlparse

import httpx
import nnsight
import websocket
from nnsight.intervention.backends.remote import RemoteBackend, RemoteError
from nnsight.schema.response import Status

from depthutils.core.errors import DepthError
from depthutils.core.progress import bar
from depthutils.models.requests import DEFAULT_TIMEOUT, REQUEST_BYTES, batches  # noqa: F401  the requests' sizes

#: how long the reachability probe after a lost connection waits
PROBE_SECONDS = 3.0
#: how a job's state reads on the bar and in a fault's sentence; an ERROR status ends the job without being a state
#: it was in (a fault names the last one, e.g. "running" when the server evicts the job's replica)
STATES = {Status.RECEIVED: "received", Status.QUEUED: "queued", Status.PROVISIONING: "provisioning the model",
          Status.DEPLOYING: "deploying the model", Status.DISPATCHED: "dispatched", Status.RUNNING: "running",
          Status.COMPLETED: "completed"}


class RemoteFault(DepthError):
    """A remote request failed: the server, the connection, the object store, the API or the deadline."""


def ndif_reachable(timeout: float = 5.0) -> bool:
    """Whether NDIF's API host answers on its port."""
    url = urlparse(nnsight.CONFIG.API.HOST)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)),
                                 timeout=timeout).close()
        return True
    except OSError:
        return False


def api_answers(host: str, timeout: float = PROBE_SECONDS) -> bool:
    """Whether the NDIF API at ``host`` answers its status page (the server is there)."""
    try:
        return httpx.get(f"{host}/status", timeout=timeout).status_code < 500
    except httpx.HTTPError:
        return False


def _goes_away(host: str, seconds: float = 10.0) -> bool:
    """Whether the API at ``host`` stops answering within ``seconds``: NDIF reports a job's replica as evicted
    when its server is shutting down, a moment before the server itself goes away."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not api_answers(host):
            return True
        time.sleep(0.5)
    return False


class _Display:
    """What nnsight's backend calls on each status (``update``) and while it waits (``refresh``):
    one bar, and the deadline."""

    enabled = True  # makes nnsight wake its websocket wait every 0.1 s, so that the deadline is checked

    def __init__(self, backend: "Backend"):
        self.backend = backend

    def update(self, response) -> None:
        self.backend.seen(response)

    def refresh(self) -> None:
        self.backend.check_deadline()


class Backend(RemoteBackend):
    """nnsight's blocking remote backend, with one status bar, a deadline and faults in one sentence.

    ``jobs`` (a list shared by every backend of a model handle) records each job id sent.
    """

    def __init__(self, model_key: str, *, name: str, what: str, timeout: float, jobs: list, bar_enabled: bool = True):
        super().__init__(model_key)
        self.name, self.what, self.timeout, self.jobs = name, what, timeout, jobs
        self.display = _Display(self)
        self.state, self.position, self.job, self.deadline = "sending", None, None, None
        self.bar = None
        self.bar_enabled = bar_enabled

    # -- status ------------------------------------------------------------------------------
    def seen(self, response) -> None:
        if self.job is None:
            self.job = response.id
            self.jobs.append(response.id)
        if response.status in STATES:
            self.state = STATES[response.status]
        if response.status == Status.QUEUED:
            self.position = _position(response.description)
        elif response.status != Status.LOG:
            self.position = None
        self.show()

    def show(self) -> None:
        where = f" (position {self.position})" if self.position is not None else ""
        if self.bar is not None:
            self.bar.set_description_str(f"NDIF · {self.what} · {self.state}{where}", refresh=True)

    def check_deadline(self) -> None:
        if self.bar is not None:
            self.bar.refresh()  # the elapsed time
        if time.monotonic() > self.deadline:
            where = f" at position {self.position} in the queue" if self.position is not None else ""
            raise RemoteFault(
                f"NDIF job {self.job or '(not yet accepted)'} ({self.what} on {self.name}) did not finish within "
                f"timeout={self.timeout:g} s (it was {self.state}{where}); pass a larger timeout to "
                "load_model(..., remote=True, timeout=...), or run it when NDIF's queue is shorter.")

    # -- the request -----------------------------------------------------------------------
    def __call__(self, tracer=None):
        self.deadline = time.monotonic() + self.timeout
        self.bar = bar(f"NDIF · {self.what} · sending", enabled=self.bar_enabled)
        try:
            return super().__call__(tracer)
        except DepthError:
            raise
        except RemoteError as e:
            raise self.api_error(e) from None
        except (websocket.WebSocketException, OSError, httpx.TransportError) as e:
            raise self.lost(e) from None
        finally:
            self.bar.close()

    def download_result(self, url):
        self.state = "downloading the results"
        self.show()
        self.display.enabled = False  # no second (nnsight's) bar for the download
        try:
            return super().download_result(url)
        except httpx.HTTPError as e:
            store = urlparse(url).netloc if isinstance(url, str) else "?"
            raise RemoteFault(
                f"The results of NDIF job {self.job} ({self.what} on {self.name}) could not be downloaded from "
                f"NDIF's object store at {store} ({_why(e)}); nothing of this call was kept: check that your "
                "network reaches that host, and run the call again.") from None
        finally:
            self.display.enabled = True

    def api_error(self, e: RemoteError) -> RemoteFault:
        detail = _last_line(str(e)).removeprefix("Failed to send request: ")
        cause = e.__cause__
        if isinstance(cause, httpx.TransportError):  # the request never reached the API
            return self.lost(cause)
        if "evicted" in detail.lower() and _goes_away(self.host):  # the server stopped under the job
            return self.lost(e)
        return RemoteFault(
            f"NDIF answered {'job ' + self.job if self.job else 'the request'} ({self.what} on {self.name}) with an "
            f"error ({detail.rstrip('.')}); if NDIF does not serve this model, pick one that nnsight.ndif.status() "
            "lists, else check NDIF_API_KEY or report the job id to NDIF.")

    def lost(self, e: Exception) -> RemoteFault:
        job = f"job {self.job}" if self.job else "the request"
        if api_answers(self.host):
            return RemoteFault(
                f"The connection to NDIF at {self.host} dropped while {job} ({self.what} on {self.name}) was "
                f"{self.state} ({_why(e)}); nothing of this call was kept: check your network and run the call again.")
        return RemoteFault(
            f"The NDIF server at {self.host} went away while {job} ({self.what} on {self.name}) was {self.state} "
            f"({_why(e)}); nothing of this call was kept: run the call again once the server answers "
            "(check NDIF's status, or NDIF_HOST).")


def _position(description: str) -> int | None:
    """The queue position NDIF states in a QUEUED message ("Added to Queue at position 3.")."""
    words = description.replace(".", " ").split()
    for a, b in zip(words, words[1:]):
        if a == "position" and b.isdigit():
            return int(b)
    return None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no details"


def _why(e: Exception) -> str:
    text = _last_line(str(e))
    return type(e).__name__ + (f": {text}" if text != "no details" else "")


# ---------------------------------------------------------------------------------------------
# one request per measurement call

def in_sessions(model, fn: Callable, items: list, what: str, *, nbytes: Callable[[Any], int] | None = None,
                enabled: bool = True) -> list:
    """``[fn(model, x) for x in items]`` on NDIF: in one request (one nnsight session that opens every trace on the
    server), or in as few as keep each request's saved results under :data:`REQUEST_BYTES` (``nbytes(x)``: an
    item's result size in bytes), behind one status bar."""
    out = []
    groups = batches(items, nbytes)
    for i, group in enumerate(groups):
        label = what if len(groups) == 1 else f"{what} ({i + 1}/{len(groups)})"
        out += _session(model, fn, group, model.backend(label, enabled))
    return out


def _session(model, fn: Callable, items: list, backend: Backend) -> list:
    """One request: ``fn(model, x)`` for every item, in one nnsight session run by ``backend``."""
    model.in_session = True  # the handle the session ships opens plain traces on the server
    try:
        with model.nn.session(backend=backend):
            results = nnsight.save([])
            for x in items:
                results.append(fn(model, x))
    finally:
        model.in_session = False
    return list(results)
