"""Elementwise chains compiled into one loop with ``torch.compile``, where this machine can compile them.

On a CPU a chain of elementwise operations and reductions over a large tensor (a cast, a max, a subtraction,
exponentials, two weighted sums) reads and writes the whole tensor once per operation; compiled, the chain reads
it once, row by row. :func:`fused` compiles a function on its first call (dynamic shapes, so one compilation
serves every block size) and falls back to the function itself, said once, where compiling fails: no C++
compiler, or a platform ``torch.compile`` does not support. Compiling takes seconds, once per process
(longer on a machine whose compile cache is empty), so callers use it only for work far larger than that.
"""
from __future__ import annotations

import functools
import warnings
from typing import Callable

import torch

__all__ = ["fused"]


def fused(fn: Callable) -> Callable:
    """``fn`` compiled by ``torch.compile(dynamic=True)`` on its first call, or ``fn`` itself where compiling
    fails (a warning says why, once). ``fused(fn).eager`` is ``fn``, and ``.compiled`` tells which one runs
    (``None`` before the first call)."""
    compiled = None

    @functools.wraps(fn)
    def run(*args):
        nonlocal compiled
        if run.compiled is None:
            try:
                compiled = torch.compile(fn, dynamic=True)  # here, not at import: making it loads inductor (seconds)
                out = compiled(*args)
            except Exception as e:  # a missing compiler or an unsupported platform: BackendCompilerFailed and others
                run.compiled = False
                reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
                warnings.warn(f"{fn.__name__} runs uncompiled, several times slower: torch.compile failed here "
                              f"({reason}).", RuntimeWarning, stacklevel=2)
                return fn(*args)
            run.compiled = True
            return out
        return (compiled if run.compiled else fn)(*args)

    run.eager, run.compiled = fn, None
    return run
