"""A chapter's headline run on a real model: the record each claim module's ``RUN`` is, which
:func:`depthutils.book.realruns.section` runs and shows."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from depthutils import data

__all__ = ["Run"]


@dataclass(frozen=True)
class Run:
    """One chapter's headline run on a real model: what it measures, at which N, and how it is graded."""

    what: str | Callable                              # the N and data, in words, for the page (or options -> words)
    measure: Callable                                 # (lm, **options) -> a result, {name: result}, or (results, facts)
    claim: Callable                                   # (result(s), facts or None) -> Verdict
    figure: Callable                                  # one result -> Figure
    caption: str                                      # the figure's caption (what it shows, for any model)
    #: the dtype it loads the model in: "auto" (bfloat16 where the CPU computes it natively), or "float32" where
    #: bfloat16 would change the graded statistic (the table of both in depthutils.perf.precision)
    dtype: str = "auto"
    #: the figure takes the whole ``{name: result}`` (one figure), not one result per figure
    together: bool = False
    #: numbers the chapter's prose states for each model: ``results -> {key: value}``, glued as
    #: ``verdict[_<name>]_<slug>_<key>``; a model not run gets "not run" for each of ``glue_keys``
    glue: Callable | None = None
    glue_keys: tuple = ()
    #: the chapter whose headline this is ("01"), its key in :func:`depthutils.book.realruns.run_of`
    chapter: str = ""
    #: the keyword options ``measure`` and ``what`` take (a chapter's parameters pass them: chapters 4 and 5's
    #: ``real_sample``), each with its default
    options: dict | None = None
    #: more lines a model's details print, ``results -> [str]`` (chapter 3's readout check, beside the summaries)
    printed: Callable | None = None

    def words(self, **options) -> str:
        """:attr:`what` for these options (the defaults where not given)."""
        return self.what(**{**(self.options or {}), **options}) if callable(self.what) else self.what

    @classmethod
    def on_gsm8k(cls, n: int, measure: Callable, verdict: Callable, figure: Callable, caption: str, *,
                 note: str = "", options: dict | None = None, **fields) -> "Run":
        """The run of a measurement on the first ``n`` GSM8K test problems (``measure(lm, prompts, **options)``),
        graded by its claim's ``verdict(result)`` alone; ``note`` follows the N in the page's words. Its ``sample``
        option runs the first ``sample`` problems instead (a chapter's ``real_sample``; fewer than ``n`` are not
        graded, :func:`depthutils.book.realruns.section`)."""
        def words(sample: int) -> str:
            return f"N = {sample} GSM8K test problems{note}" if sample == n else \
                f"N = {sample} GSM8K test problems (a sample; the book runs {n})"

        return cls(words, lambda lm, sample=n: measure(lm, data.load("gsm8k", sample), **(options or {})),
                   lambda r, f: verdict(r), figure, caption, options={"sample": n}, **fields)

    def sample(self, options: dict) -> int | None:
        """The ``sample`` these options run, if it is smaller than this run's own (None otherwise): a run on it
        is shown, not graded."""
        own = (self.options or {}).get("sample")
        return options["sample"] if own is not None and options.get("sample", own) < own else None
