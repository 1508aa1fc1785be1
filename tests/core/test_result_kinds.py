"""Result kinds: one class per kind, and every kind the package defines loads in a fresh interpreter that imported
only the package root (``Result.load`` imports the modules that define kinds when it meets one not yet seen)."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import ClassVar

import pytest

import depthutils
from depthutils.core.errors import DepthError
from depthutils.core.results import Result, result_class
from depthutils.measures.logit_lens import LogitLensResult


def _every_kind() -> dict[str, type]:
    depthutils._import_every_result_kind()
    found, todo = {}, list(Result.__subclasses__())
    while todo:
        cls = todo.pop()
        found[cls.kind] = cls
        todo += cls.__subclasses__()
    return found


def test_a_taken_kind_is_an_error():
    with pytest.raises(DepthError, match="kind 'logit_lens' is taken by depthutils.measures.logit_lens.LogitLensResult"):
        @dataclass
        class Impostor(Result):
            kind: ClassVar[str] = "logit_lens"
    assert result_class("logit_lens") is LogitLensResult  # the impostor replaced nothing
    with pytest.raises(DepthError, match="No result kind 'no_such_kind'"):
        result_class("no_such_kind")


def test_a_fresh_interpreter_loads_every_kind(tmp_path):
    kinds = _every_kind()
    assert {"early_exit", "norm_growth", "solved_split", "at_answer", "logit_lens"} <= set(kinds)
    paths = {kind: str(cls().save(tmp_path / kind)) for kind, cls in kinds.items()}
    code = ("import json, sys, depthutils\n"
            "from depthutils.core.results import Result\n"
            "paths = json.loads(sys.argv[1])\n"
            "print(json.dumps({k: f'{type(r).__module__}.{type(r).__qualname__}' "
            "for k, r in ((k, Result.load(p)) for k, p in paths.items())}))\n")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(paths)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == {k: f"{c.__module__}.{c.__qualname__}" for k, c in kinds.items()}
