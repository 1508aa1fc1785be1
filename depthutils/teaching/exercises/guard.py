"""What protects a check from the student's code, and what a student is told when that code stops.

:func:`pristine` hands the model back as it was, whatever the code inside did: forward and backward
hooks (on any module, or global), a ``forward`` replaced on a module, training mode, which parameters
require gradients, weights edited in place, the attention implementation, the model handle's attributes
and torch's gradient mode. nnsight keeps no state between traces itself (its per-module ``forward``
wrapper is inert outside a trace and is kept), so a trace that crashed leaves nothing once these are back.

:func:`explain` and :func:`wrong_parameters` turn the errors students meet most into one sentence that
says what to change.
"""
from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable

import torch
from nnsight.intervention.interleaver import OutOfOrderError
from torch.nn.modules import module as _torch_module

#: the per-module hook tables of torch (each an ordered dict id → hook)
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
          "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs")
#: torch's global hook tables (``register_module_forward_hook`` and friends)
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks", "_global_forward_hooks_always_called",
                 "_global_forward_hooks_with_kwargs")
#: above this many parameters the weights are not copied before a check (only an in-place edit is detected)
COPY_WEIGHTS_UP_TO = 100_000_000


def _tables(owner: Any, names) -> dict:
    return {n: getattr(owner, n) for n in names if isinstance(getattr(owner, n, None), dict)}


def _restore_table(table: dict, saved: dict) -> None:
    table.clear()
    table.update(saved)


@contextlib.contextmanager
def pristine(lm):
    """Run the body, then put the model ``lm`` (a :class:`~depthutils.models.handle.ModelHandle`, or None) back as
    it was before, even when the body raised. Weights are restored from a copy for models of at most
    :data:`COPY_WEIGHTS_UP_TO` parameters; a larger model whose weights were edited in place raises."""
    grad = torch.is_grad_enabled()
    globals_ = {n: dict(t) for n, t in _tables(_torch_module, _GLOBAL_HOOKS).items()}
    hf = None if lm is None or getattr(lm, "remote", False) else lm.hf
    handle = dict(vars(lm)) if lm is not None else {}
    if hf is not None:
        modules = list(hf.modules())
        hooks = [{n: dict(t) for n, t in _tables(m, _HOOKS).items()} for m in modules]
        forwards = [m.__dict__.get("forward") for m in modules]
        training = [m.training for m in modules]
        params = list(hf.parameters())
        requires = [p.requires_grad for p in params]
        versions = [p._version for p in params]
        grads = [p.grad for p in params]
        copies = ([p.detach().clone() for p in params] if sum(p.numel() for p in params) <= COPY_WEIGHTS_UP_TO
                  else None)
        attn = hf.config._attn_implementation
    try:
        yield
    finally:
        torch.set_grad_enabled(grad)
        for n, t in _tables(_torch_module, _GLOBAL_HOOKS).items():
            _restore_table(t, globals_.get(n, {}))
        if lm is not None:
            for k in [k for k in vars(lm) if k not in handle]:
                delattr(lm, k)
            vars(lm).update(handle)
        if hf is not None:
            for m, saved, fwd, tr in zip(modules, hooks, forwards, training):
                for n, t in _tables(m, _HOOKS).items():
                    _restore_table(t, saved.get(n, {}))
                now = m.__dict__.get("forward")
                if now is not fwd and (fwd is not None or type(now).__name__ != "Controller"):
                    # put back what was there; nnsight's own wrapper, installed on first trace, stays
                    if fwd is None:
                        del m.__dict__["forward"]
                    else:
                        m.__dict__["forward"] = fwd
                m.training = tr
            edited = False
            with torch.no_grad():
                for i, (p, req, v, g) in enumerate(zip(params, requires, versions, grads)):
                    p.requires_grad_(req)
                    p.grad = g
                    if p._version != v:
                        edited = True
                        if copies is not None:
                            p.copy_(copies[i])
            if hf.config._attn_implementation != attn:
                hf.set_attn_implementation(attn)
            if edited and copies is None:
                raise RuntimeError("your function changed the model's weights in place and the model is too large "
                                   "to restore from a copy: reload it with load_model before the next check.")


def explain(err: BaseException) -> str | None:
    """One sentence saying what to change for an error students meet often (None: not one of those)."""
    if isinstance(err, OutOfOrderError):
        return (f"your function read a module's value after the model had already run past it ({err}): inside one "
                "trace, read modules in the order the model runs them (layer 0 before layer 1, a layer's .input "
                "before its .output), or use a second trace.")
    if isinstance(err, UnboundLocalError):
        return (f"{err}: a variable set inside an nnsight trace exists after the trace only if you called .save() "
                "on it there (e.g. `h = lm.layer(layer).output.save()`).")
    return None


def wrong_parameters(fn: Callable, given: dict) -> str | None:
    """One sentence saying how ``fn``'s parameters differ from the arguments the check passes by name
    (``given``), or None when ``fn`` accepts them."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(**given)
        return None
    except TypeError:
        pass
    named = [n for n, p in sig.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    extra = [n for n in named if n not in given]
    missing = [n for n in given if n not in named]
    what = "; ".join(filter(None, [
        f"rename {', '.join(f'`{n}`' for n in extra)} to {', '.join(f'`{n}`' for n in missing)}"
        if extra and missing else "",
        f"remove (or give a default to) {', '.join(f'`{n}`' for n in extra)}" if extra and not missing else "",
        f"add {', '.join(f'`{n}`' for n in missing)}" if missing and not extra else ""]))
    return (f"your function takes ({', '.join(named)}), but the check calls it with the arguments "
            f"({', '.join(given)}) by name: {what or 'make its parameters exactly these'}.")
