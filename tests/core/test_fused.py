"""``core.fused.fused``: a compiled function gives its eager result, and where compiling fails the eager function
runs instead, said once."""
from __future__ import annotations

import warnings

import pytest
import torch

from depthutils.core import fused as fused_module


def _chain(x):
    return (x - x.amax(-1, keepdim=True)).exp().sum(-1)


def test_a_failed_compilation_runs_the_function_itself_and_says_so_once(monkeypatch):
    def no_compiler(*args):
        raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore detail")

    monkeypatch.setattr(torch, "compile", lambda fn, **kw: no_compiler)
    run = fused_module.fused(_chain)
    assert run.compiled is None and run.eager is _chain
    x = torch.randn(3, 7)
    with pytest.warns(RuntimeWarning, match=r"_chain runs uncompiled.*\(InvalidCxxCompiler: No working C\+\+ compiler found\)"):
        got = run(x)
    assert run.compiled is False
    torch.testing.assert_close(got, _chain(x), rtol=0, atol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(run(x), _chain(x), rtol=0, atol=0)  # no second warning
