"""Progress bars on the loops that take a while: shown in a terminal, or in Jupyter with ipywidgets.

Imported first by the package (``depthutils/__init__.py``): tqdm.auto is imported here with its
"IProgress not found" warning silenced, before nnsight and transformers import it.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import warnings

with warnings.catch_warnings():  # a kernel without ipywidgets: tqdm falls back to text bars, no warning
    warnings.simplefilter("ignore")
    from tqdm.auto import tqdm

__all__ = ["JOBS_ENV", "bars_wanted", "progress", "bar"]

#: set by whatever runs several chapters at once (the book's runner, the tests' xdist workers, ``tests/conftest.py``):
#: how many run side by side, which a chapter's threads and run time depend on
JOBS_ENV = "DEPTHUTILS_JOBS"


def bars_wanted() -> bool:
    """DEPTHUTILS_PROGRESS=1/0 decides; unset, bars show in a terminal, or in Jupyter with ipywidgets.

    A notebook kernel without ipywidgets would print text bars into the cell's stderr, which
    then shows in the rendered book and breaks nbval's output comparison.
    """
    env = os.environ.get("DEPTHUTILS_PROGRESS")
    if env in ("0", "1"):
        return env == "1"
    if sys.stderr is not None and sys.stderr.isatty():
        return True
    if "ipykernel" in sys.modules:
        return importlib.util.find_spec("ipywidgets") is not None
    return False


def progress(iterable, desc: str, total: int | None = None, enabled: bool = True):
    """A tqdm.auto bar on loops that can take a while (see :func:`bars_wanted`); where chapters run side by side
    (:data:`JOBS_ENV` above 1), before each item torch's threads follow the cores the others leave free
    (:func:`depthutils.core.threads.take_freed_cores`)."""
    items = tqdm(iterable, desc=desc, total=total, disable=not (enabled and bars_wanted()), leave=False)
    if int(os.environ.get(JOBS_ENV) or 1) <= 1:
        yield from items
        return
    from depthutils.core.threads import take_freed_cores  # only beside other chapters

    for item in items:
        take_freed_cores()
        yield item


def bar(desc: str, enabled: bool = True):
    """One status line (a tqdm bar without a total: its text and the elapsed time), shown like
    :func:`progress`'s bars; update it with ``set_description_str``."""
    return tqdm(desc=desc, total=None, bar_format="{desc} [{elapsed}]", disable=not (enabled and bars_wanted()),
                leave=False)
