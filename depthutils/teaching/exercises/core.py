"""The exercises' shared core: what an exercise is, the registry the chapter modules fill, and the checker.

:func:`check` runs a student's function on an exercise's cases and compares it with the library. Whatever
the student's code does to the model (hooks left registered, a crash inside an nnsight trace, gradients
switched off, another attention implementation, a replaced ``forward``), the model is handed back as the
check found it (:func:`depthutils.teaching.exercises.guard.pristine`), and the library errors a student meets most
(an out-of-order read, a value used without ``.save()``, a renamed parameter) come back as one sentence
saying what to change (:func:`depthutils.teaching.exercises.guard.explain`).
"""
from __future__ import annotations

import html
import inspect
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from IPython.display import Markdown

from depthutils.core.errors import DepthError
from depthutils.teaching import solutions
from depthutils.teaching.exercises.guard import explain, pristine, wrong_parameters
from depthutils.teaching.exercises.inputs import _model

#: How close a learner's answer must be to the library's: both run in float32 along different code paths
#: (nnsight or hooks, other batch sizes), which differ by ~1e-6; every mistake below differs by far more.
RTOL, ATOL = 1e-3, 1e-5


@dataclass(frozen=True)
class Exercise:
    """One implement-it exercise: what to write, how hard and how important it is (ARENA's
    ratings, 1–5), hints, and how to check it.

    ``cases(lm)`` gives the argument sets the student's function is called with (it receives those its
    signature names; the others, such as ``_prompt``, are for the reference only); ``reference(lm, case)`` is the library's answer;
    ``mistakes(lm, case)`` what known mistakes return (message → answer); ``shifts`` names the
    arguments whose ±1 is a likely mistake (argument → what that mistake usually is); ``number`` is the
    exercise's number in its chapter, which the page's title shows and :func:`check` also accepts as an id.
    """

    id: str
    chapter: str
    title: str
    signature: str
    returns: str
    difficulty: int
    importance: int
    hints: tuple
    cases: Callable
    reference: Callable
    axes: tuple = ()
    mistakes: Callable = None
    shifts: dict = field(default_factory=dict)
    model: str = "default"
    number: str = ""  # "1.2": chapter 1's second exercise (its prediction exercise is 1.1), as the page titles it

    def rating(self) -> str:
        """``Difficulty ●●○○○ (2/5) · Importance ●●●●○ (4/5)`` (ARENA's ratings, in characters every font has)."""
        bar = lambda n: "●" * n + "○" * (5 - n) + f" ({n}/5)"  # noqa: E731
        return f"**Difficulty** {bar(self.difficulty)} · **Importance** {bar(self.importance)}"



#: the messages of two mistakes several exercises share
_LAYER_INPUT = ("did you read the layer's input (h_l, the previous layer's output) instead of its output "
                "(h_{l+1})? Read `.output`, not `.input`")
_NEXT_LAYER = "you used the next layer: decoder layer `layer` is lm.layer(layer), counted from 0"
_LAYER_OUTPUT = ("did you read the layer's output (h_{l+1}) instead of its input (h_l)? The lens reads `.input`, "
                 "the residual entering the layer, as NDIF's reproduction notebook of P1 and P2's code do")
_PREVIOUS_LAYER = "you used the previous layer: decoder layer `layer` is lm.layer(layer), counted from 0"

#: every exercise of the book by id, filled by the chapter modules (``ch00`` … ``ch09``) as they are imported
EXERCISES: dict[str, Exercise] = {}


def register(*exercises: Exercise) -> None:
    """Add a chapter's exercises to :data:`EXERCISES` (ids and numbers must be new)."""
    for ex in exercises:
        taken = {e.number for e in EXERCISES.values()}
        if ex.id in EXERCISES or (ex.number and ex.number in taken):
            raise ValueError(f"exercise {ex.id!r} ({ex.number}) is registered twice")
        EXERCISES[ex.id] = ex


def load_all() -> dict[str, Exercise]:
    """:data:`EXERCISES` with every chapter's exercises (each chapter's module imported; a chapter's page imports
    its own only)."""
    import importlib
    import pkgutil

    package = __name__.rpartition(".")[0]
    for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if re.fullmatch(r"ch\d\d", module.name):
            importlib.import_module(f"{package}.{module.name}")
    return EXERCISES


def get_path(id: str) -> Exercise:
    """The exercise with id ``id``, or number ``id`` (``"1.2"``: chapter 1's second exercise)."""
    if id in EXERCISES:
        return EXERCISES[id]
    for ex in load_all().values():
        if id in (ex.id, ex.number):
            return ex
    raise DepthError(f"No exercise {id!r}; the exercises are: "
                     f"{', '.join(f'{e.id} ({e.number})' for e in EXERCISES.values())}.")


# ------------------------------------------------------------------------------------------ checking
def _as_array(x: Any):
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=float)


def _close(got, want) -> bool:
    if want is None or got is None:
        return want is None and got is None
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True))


def _defined_as(x, want) -> bool:
    """``x`` is finite wherever ``want`` is, and NaN where ``want`` is NaN (undefined, e.g. D[s, j] for j ≤ s);
    everywhere finite when ``want`` has another shape."""
    if want is None or x.shape != want.shape:
        return bool(np.isfinite(x).all())
    return bool((np.isfinite(x) == np.isfinite(want)).all())


def _where(ex: Exercise, idx: tuple) -> str:
    names = ex.axes[-len(idx):] if len(ex.axes) >= len(idx) else [f"axis {i}" for i in range(len(idx))]
    return ", ".join(f"{n} {i}" for n, i in zip(names, idx))


def _diagnose(ex: Exercise, lm, case: dict, got, want) -> str:
    """Why ``got`` is not ``want``: a known mistake it equals, else where and by how much it differs."""
    if got is None:
        return f"your function returned None; it should return {ex.returns}."
    if want is not None and want.ndim >= 2 and got.shape == want.shape[1:]:
        return (f"your answer has shape {got.shape}, the expected one {want.shape}: you dropped the batch "
                "axis. Decoder layers return a tensor [B, T, d], not a tuple, so output[0] is batch row 0.")
    if (want is not None and want.ndim >= 2 and want.shape[0] > 1 and got.ndim == want.ndim
            and got.shape[0] == 1 and got.shape[1:] == want.shape[1:]):
        return (f"your answer has shape {got.shape}, the expected one {want.shape}: you kept batch row 0 only. "
                "Decoder layers return a tensor [B, T, d], not a tuple, so output[0] is batch row 0.")
    for arg, by_step in ex.shifts.items():
        for step, why in by_step.items():
            shifted = dict(case, **{arg: case[arg] + step})
            try:
                other = _as_array(ex.reference(lm, shifted))
            except (IndexError, KeyError, DepthError, ValueError):
                continue
            if other is not None and _defined_as(other, want) and _close(got, other):
                return f"your answer equals the library's for {arg}={case[arg] + step}: {why}."
    for why, answer in (ex.mistakes(lm, case) if ex.mistakes else {}).items():
        if _close(got, _as_array(answer)):  # a mistake may have another shape (a norm over the wrong axis)
            return f"{why}."
    if want is not None and got.shape != want.shape:
        return f"your answer has shape {got.shape}, expected {want.shape} ({ex.returns})."
    if want is None:
        return "no layer qualifies here, so the answer is None (undefined), not a number."
    if not got.any() and want.any():
        return "your answer is all zeros: the function does not compute anything yet."
    if not _defined_as(got, want):
        return "your answer contains NaN or inf where the expected one is a number (or a number where it is NaN)."
    diff = np.abs(got - want)
    if got.ndim == 0:
        return f"got {float(got):.6g}, expected {float(want):.6g} (off by {float(diff):.3g})."
    idx = np.unravel_index(int(np.argmax(diff)), diff.shape)
    n_bad = int((~np.isclose(got, want, rtol=RTOL, atol=ATOL)).sum())
    note = ""
    if "position" in ex.axes and n_bad and np.isclose(np.delete(got, 0, axis=-1), np.delete(want, 0, axis=-1),
                                                      rtol=RTOL, atol=ATOL).all():
        note = " Only position 0 differs: position 0 is the BOS attention sink."
    return (f"{n_bad} of {diff.size} values differ; the largest difference is at {_where(ex, idx)}: got "
            f"{got[idx]:.6g}, expected {want[idx]:.6g}.{note}")


def check(id: str, fn: Callable, lm=None) -> None:
    """Run ``fn`` on exercise ``id``'s cases (``id``: its name or its number, ``"1.2"``) and compare it with
    the library.

    Prints a tick when every case matches (within :data:`RTOL`/:data:`ATOL`); raises ``AssertionError``
    saying what differs otherwise. A function that still raises ``NotImplementedError`` is reported as
    not attempted (printed, not raised), so a notebook's exercise cell runs before it is solved. A
    function whose parameters are not the exercise's, or that stops with an error of nnsight's a student
    meets often, raises :class:`~depthutils.core.errors.DepthError` with one sentence saying what to change.
    The model is left as the check found it, whatever ``fn`` did. Returns nothing, so a notebook cell
    shows only the printed line.
    ``lm``: the model to check on (default: the exercise's embedded model, loaded once).
    """
    ex = get_path(id)
    id = ex.id
    lm = lm if lm is not None else (_model(ex.model) if ex.model else None)
    cases = ex.cases(lm)
    params = inspect.signature(solution(id)).parameters  # what the student's function takes
    for k, case in enumerate(cases):
        public = {a: lm if a == "lm" else case[a] for a in params}
        wrong = wrong_parameters(fn, public)
        if wrong:
            raise DepthError(f"{id}: {wrong}")
        try:
            with pristine(lm):
                got = fn(**public)
        except NotImplementedError:
            print(f"{id}: not implemented yet; write the body of your function, then run this cell again.")
            return
        except Exception as err:  # noqa: BLE001  the errors students meet most, said in one sentence
            why = explain(err)
            if why is None:
                raise
            raise DepthError(f"{id}: {why}") from None
        want = _as_array(ex.reference(lm, case))
        got = _as_array(got)
        if not _close(got, want):
            shown = ", ".join(f"{a}={v}" for a, v in public.items() if isinstance(v, (int, float)) and a != "lm")
            raise AssertionError(f"{id}, case {k + 1} of {len(cases)} ({shown or 'see EXERCISES'}): "
                                 f"{_diagnose(ex, lm, case, got, want)}")
    print(f"✔ {id}: all {len(cases)} cases match the library (rtol {RTOL:g}, atol {ATOL:g}).")


def solution(id: str) -> Callable:
    """The reference solution of exercise ``id`` (a function of :mod:`depthutils.teaching.solutions`, in its
    chapter's module)."""
    ex = get_path(id)
    return getattr(getattr(solutions, f"ch{ex.chapter[:2]}"), ex.id)


def source(id: str) -> str:
    """The source code of :func:`solution` (``id``), with the private helpers it calls (of its module,
    :mod:`depthutils.teaching.solutions` ``.chNN``, or of ``.common``), and the helpers those call."""
    fn = solution(id)
    scopes = [vars(sys.modules[fn.__module__]), vars(sys.modules[f"{solutions.__name__}.common"])]
    private = {n: f for scope in scopes for n, f in scope.items() if n.startswith("_") and inspect.isfunction(f)}
    shown, todo = [], [inspect.getsource(fn)]
    while todo:  # the helpers it calls, and theirs, each once
        text = todo.pop()
        for n, f in private.items():
            if re.search(rf"\b{n}\(", text) and f not in shown:
                shown.append(f)
                todo.append(inspect.getsource(f))
    return "\n\n".join([inspect.getsource(f) for f in sorted(shown, key=lambda f: f.__code__.co_firstlineno)]
                       + [inspect.getsource(fn)])


def show(id: str) -> Markdown:
    """The reference solution's source as a highlighted code block (for a notebook's solution cell)."""
    return Markdown(f"```python\n{source(id)}```")


#: a subscript as the statements write it: ``argmin_{j}``, ``h_{l+1}``, or ``h_l`` without braces (then a symbol of at
#: most four letters, maybe marked: ``Δ′_j``, ``c̄_l``, and a subscript of at most five characters, so that a name
#: such as ``predict_positions`` is left alone); and a superscript ``x^{…}``
_SUBSCRIPT = re.compile(r"(?<![\w.])(?:([^\W\d_]+[\u0304′]?)_\{([^{}]*)\}|([^\W\d_]{1,4}[\u0304′]?)_([^\W_]{1,5})\b)")
_SUPERSCRIPT = re.compile(r"\^\{([^{}]*)\}")


def _math(text: str) -> str:
    """``text`` with its sub- and superscripts as HTML (``h_{l+1}`` → ``h<sub>l+1</sub>``), outside code spans: a
    Markdown output is rendered without dollar math (GFM), so TeX would show as it is typed."""
    parts = re.split(r"(`[^`]*`)", text)
    math = lambda t: _SUPERSCRIPT.sub(r"<sup>\1</sup>", _SUBSCRIPT.sub(  # noqa: E731
        lambda m: f"{m[1]}<sub>{m[2]}</sub>" if m[1] else f"{m[3]}<sub>{m[4]}</sub>", t))
    return "".join(p if p.startswith("`") else math(p) for p in parts)


def task(id: str) -> Markdown:
    """The exercise as Markdown: its rating, what to write and what it returns, and its hints (folded); sub- and
    superscripts set as HTML (:func:`_math`)."""
    ex = get_path(id)
    code = lambda h: re.sub(r"`([^`]+)`", r"<code>\1</code>", _math(html.escape(h, quote=False)))  # noqa: E731
    hints = "".join(f"<li>{code(h)}</li>" for h in ex.hints)
    return Markdown(f"*Exercise {ex.number}* · {ex.rating()}\n\nWrite `{ex.signature}`: {_math(ex.returns)}. Then run the cell: "
                    f"`exercises.check` calls your function on the book's embedded model and compares it with the "
                    f"library.\n\n<details><summary>Hints</summary><ol>{hints}</ol></details>")
