"""What a remote session ships pickles: nnsight sends ``depthutils`` by value (``nnsight.register`` in
:func:`depthutils.models.handle.load_model`), so the handle's class and every measurement module's functions are
pickled with the globals they read. A module global that is itself a large ``depthutils`` module sends that module
whole, and pickling it recurses past Python's limit; this checks that without a server, in a fraction of a second."""
from __future__ import annotations

import ast
import importlib
import pathlib
import sys

import nnsight
import pytest
from nnsight.intervention import serialization

import depthutils
from depthutils.models.handle import ModelHandle


@pytest.fixture(scope="module")
def by_value():
    nnsight.register(sys.modules["depthutils"])  # what load_model(remote=True) does


def _shipped() -> list[tuple[str, str]]:
    """Every module-level function a module hands to ``each`` (what a remote session runs on the server), found by
    reading the package's source: ``each(model, fn, items, ...)`` with ``fn`` a name the module defines."""
    found = set()
    for path in sorted(pathlib.Path(depthutils.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        module = ".".join(path.relative_to(pathlib.Path(depthutils.__file__).parent.parent).with_suffix("").parts)
        for call in ast.walk(tree):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "each"
                    and len(call.args) > 1 and isinstance(call.args[1], ast.Name) and call.args[1].id in defined):
                found.add((module, call.args[1].id))
    return sorted(found)


def test_the_handle_pickles_by_value(by_value):
    assert len(serialization.dumps(ModelHandle)) > 0


def test_the_shipped_functions_are_found():
    assert {"depthutils.measures.logit_lens", "depthutils.measures.contributions"} <= {m for m, _ in _shipped()}


@pytest.mark.parametrize("module_name, name", _shipped())
def test_every_shipped_function_pickles_by_value(by_value, module_name, name):
    f = getattr(importlib.import_module(module_name), name)
    try:
        serialization.dumps(f)
    except Exception as e:  # noqa: BLE001 (the message names the function that cannot ship)
        pytest.fail(f"{module_name}.{name} cannot be sent to NDIF: {type(e).__name__}: {e}")


def test_the_check_can_fail(by_value, monkeypatch):
    """A handle method that reads a whole depthutils module as a global (its ``start`` property reading the
    ``start_token`` module, not one of its functions) does not pickle: the failure this guards."""
    handle_module = sys.modules[ModelHandle.__module__]
    monkeypatch.setitem(vars(handle_module), "describe_start", sys.modules["depthutils.models.start_token"])
    with pytest.raises(Exception, match="recursion"):
        serialization.dumps(ModelHandle)
