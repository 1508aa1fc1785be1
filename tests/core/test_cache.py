"""Cache integrity: keys, corrupt entries, and a run killed in the middle of a write."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from depthutils.core import cache
from depthutils.measures.effective_depth import EffectiveDepthResult


def make(v: float) -> EffectiveDepthResult:
    """A result of two prompts whose token-weighted curves are ``[-0.1, 0.2, v]``, ``[3, 1, 0]``, ``[0, 0.5, 1]``."""
    per = lambda c: np.array([c, c], float)
    return EffectiveDepthResult(meta={"model": "m"}, mean_cos_by_prompt=per([-0.1, 0.2, v]),
                                kl_by_prompt=per([3.0, 1.0, 0.0]), overlap_by_prompt=per([0.0, 0.5, 1.0]),
                                prompt_tokens=np.array([5, 7])).with_aggregates()


def test_key_covers_code_version_revision_and_every_parameter(monkeypatch):
    base = dict(model="m", revision="r1", task="gsm8k", n=10, k=5)
    k0 = cache.cache_key(**base)
    assert cache.cache_key(**base) == k0
    for change in (dict(revision="r2"), dict(n=11), dict(k=4), dict(task="aime24"), dict(extra=1)):
        assert cache.cache_key(**{**base, **change}) != k0, change
    monkeypatch.setattr(cache, "code_version", lambda: "another-version")
    assert cache.cache_key(**base) != k0


def test_hit_and_miss(tmp_path):
    calls = []
    compute = lambda: calls.append(1) or make(0.3)
    r1, hit1 = cache.cached(tmp_path, "x", "k1", compute)
    r2, hit2 = cache.cached(tmp_path, "x", "k1", compute)
    assert (hit1, hit2) == (False, True) and len(calls) == 1
    np.testing.assert_array_equal(r1.mean_cos, r2.mean_cos)
    assert r2.ed_cos == r1.ed_cos == 0


def test_corrupt_entry_is_recomputed_with_a_warning(tmp_path):
    cache.cached(tmp_path, "x", "k1", lambda: make(0.3))
    (path,) = tmp_path.glob("x-k1.npz")
    path.write_bytes(path.read_bytes()[:100])  # truncated
    with pytest.warns(UserWarning, match="corrupt"):
        r, hit = cache.cached(tmp_path, "x", "k1", lambda: make(0.4))
    assert not hit and r.mean_cos[-1] == pytest.approx(0.4)
    assert cache.cached(tmp_path, "x", "k1", lambda: make(9.9))[0].mean_cos[-1] == pytest.approx(0.4)


def test_entry_written_under_another_key_is_not_served(tmp_path):
    cache.write(tmp_path / "x-k1.npz", make(0.3), "other-key")
    with pytest.warns(UserWarning, match="another key"):
        r, hit = cache.cached(tmp_path, "x", "k1", lambda: make(0.5))
    assert not hit and r.mean_cos[-1] == pytest.approx(0.5)


def test_entry_without_per_prompt_values_is_recomputed_never_misread(tmp_path):
    old = EffectiveDepthResult.from_curves([-0.1, 0.2, 0.3], [3.0, 1.0, 0.0], [0.0, 0.5, 1.0])  # aggregates only
    cache.write(tmp_path / "x-k1.npz", old, "k1")
    with pytest.warns(UserWarning, match="no per-prompt values"):
        r, hit = cache.cached(tmp_path, "x", "k1", lambda: make(0.5))
    assert not hit and r.n_prompts == 2 and r.mean_cos_by_prompt is not None


def test_killed_mid_write_leaves_the_previous_entry_intact(tmp_path):
    path = tmp_path / "x-k1.npz"
    cache.write(path, make(0.3), "k1")
    marker = tmp_path / "writing"
    script = textwrap.dedent(f"""
        import time, numpy as np
        from pathlib import Path
        from depthutils.core import cache
        from depthutils.measures.effective_depth import EffectiveDepthResult
        def slow_savez(f, **arrays):
            f.write(b"PK" + b"x" * 100000)   # half an archive
            f.flush()
            Path({str(marker)!r}).write_text("")
            time.sleep(3600)  # killed here, mid-write: however late the test gets to it
        np.savez = slow_savez
        r = EffectiveDepthResult.from_curves([0.9, 0.9, 0.9], [1, 1, 1], [1, 1, 1])
        cache.write(Path({str(path)!r}), r, "k1")
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 300  # a guard against a hang: a loaded machine only delays the writer
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), "the writer never reached the middle of its write"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers, "the killed writer should have left its temporary file behind"
    r = cache.read(path, "k1")
    assert r.mean_cos[-1] == pytest.approx(0.3)
