"""Exercises for learners: write a measurement in a few lines, then check it against the library.

Every chapter of the book has implement-it exercises (ARENA-style: a difficulty and an importance
rating, hints, a checker and a solution), numbered in its chapter: chapter N's prediction exercise is
N.1, its core implement-it exercise N.2 and its harder stretch exercise the next number: N.3, or 5.4 in
chapter 5, whose 5.3 is prose. :data:`EXERCISES` maps an id to what to implement::

    from depthutils.teaching import exercises
    exercises.EXERCISES["relative_contribution"].signature   # what to write
    exercises.check("relative_contribution", my_function)     # passes, or says what differs
    exercises.check("1.2", my_function)                       # the same exercise, by its number
    exercises.solution("relative_contribution")               # the reference solution (a function)
    exercises.show("relative_contribution")                    # ... and its source, for a notebook

:func:`check` runs the student's function on the book's embedded model (a few seconds on a laptop
CPU), compares it with the library's own measurement and passes, or raises ``AssertionError`` with
what differs: which layer or position, by how much, and the likely mistake when the answer equals
what a known mistake gives (the layer's input instead of its output, batch row 0, the KL the wrong
way round, position 0, ...). It leaves the model as it found it, whatever the student's code did.

One module per chapter (``ch00`` … ``ch10``) holds that chapter's exercises (a chapter's page imports its own:
``from depthutils.teaching.exercises import ch02 as exercises``, whose ``task``, ``check``, ``show`` and
``solution`` are the ones above; :func:`load_all` imports every chapter's), their cases and the
mistakes their checkers name; :mod:`.core` holds what they share (the :class:`Exercise` record and the
checker), :mod:`.guard` what protects a check from the student's code, :mod:`.inputs` the model and
token ids the cases use. The reference solutions are in :mod:`depthutils.teaching.solutions`.
"""
from __future__ import annotations

from depthutils.teaching.exercises.core import ATOL, RTOL, Exercise, check, load_all, show, solution, source, task
from depthutils.teaching.exercises.inputs import _model, batch

__all__ = ["ATOL", "EXERCISES", "RTOL", "Exercise", "batch", "check", "load_all", "show", "solution", "source", "task"]


def __getattr__(name: str):
    """``exercises.EXERCISES``: every chapter's exercises, their modules imported on first use (:func:`load_all`)."""
    if name == "EXERCISES":
        return load_all()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
