"""depthutils: the measurements of the depth-efficiency book.

The package root is the public API: the measurements, one per paper measurement and named as in the spec
(``shared/spec/measurements.md``):

* :func:`residual_stream` (the decomposition every measurement rests on);
* :func:`contributions` (P1 Fig. 2), :func:`future_effects` (Fig. 3), :func:`logit_lens` (Fig. 4),
  :func:`residual_erasure` (Fig. 6b), :func:`integrated_gradients` (Fig. 6a), :func:`depth_score` (§6),
  :func:`cross_model_mapping` (§7), :func:`effective_depth` (P2);
* :func:`load_model` loads an embedded alias, a local folder, a named real model or a hub id;
* :mod:`depthutils.data` loads the papers' data sets.

Each measurement's module is imported the first time its name is used (``du.logit_lens``), so a chapter loads the
measurements it calls and no others; ``__init__.pyi`` beside this file imports each by name for editors and type
checkers.

Example::

    import depthutils as du
    lm = du.load_model("default")                      # the embedded 8-layer model
    r = du.logit_lens(lm, du.data.load("gsm8k", 4))    # a LogitLensResult: kl, overlap [layers]
    print(r.summary())

Subpackages by role, each importing only from the layers before it (``tests/test_layers.py`` checks it)::

    core ← ladder ← data ← models ← cost ← measures ← analysis ← teaching ← book ← perf ← __main__

* :mod:`~depthutils.core`: errors, results and statistics, prompts and encoding, progress bars, the cache, numbers as
  the prose prints them;
* :mod:`~depthutils.ladder`: the embedded models' registry, tasks, tokenizer and trainer;
* :mod:`~depthutils.data`: the papers' data sets and the few-shot task families;
* :mod:`~depthutils.models`: the model handle, architectures, devices, sources, start token, remote (NDIF),
  the decoder stack, the named real models and random models;
* :mod:`~depthutils.cost`: what a pass costs, a model's shape, the chunks and the memory budget;
* :mod:`~depthutils.measures`: one module per measurement, each stating its own cost;
* :mod:`~depthutils.analysis`: P2's study, the facts a model knows, the shared-layer outlook;
* :mod:`~depthutils.teaching`: exercises, checkers and solutions;
* :mod:`~depthutils.book`: the runner, the glued prose, claims and grading, figures, the real-model sections;
* :mod:`~depthutils.perf`: the makers' tools, apart from what a chapter loads: the plan, its check, the chapters'
  workloads and the benchmark.

Importing :mod:`depthutils` loads the first five layers and the measurements' registry, not the measurements.
"""
from __future__ import annotations

import importlib as _importlib
import os as _os

__version__ = "0.1.0"

# No weight-loading progress bars: they go to stderr, clutter executed chapters and break nbval.
_os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

# First: the progress module imports tqdm.auto with its "IProgress not found" warning silenced, before nnsight
# and transformers import it (a kernel without ipywidgets would print that warning into every chapter).
from depthutils.core import progress as _progress  # noqa: E402, F401

# isort: split
from depthutils import data  # noqa: E402
from depthutils.core import results as _results  # noqa: E402
from depthutils.core.errors import DepthError  # noqa: E402
from depthutils.core.prompts import Prompt  # noqa: E402
from depthutils.core.results import Result  # noqa: E402
from depthutils.measures import MEASUREMENTS  # noqa: E402
from depthutils.models import ModelHandle, load_model  # noqa: E402

#: the measurements (their registry, in its order), then the loader and the types they take and give
__all__ = [*MEASUREMENTS, "load_model", "ModelHandle", "Prompt", "Result", "DepthError", "data", "MEASUREMENTS"]


def __getattr__(name: str):
    """``depthutils.logit_lens``: the measurement's function, its module imported on first use
    (:data:`~depthutils.measures.MEASUREMENTS` says where each one lives)."""
    if name in MEASUREMENTS:
        return MEASUREMENTS[name].measure()
    raise AttributeError(f"module 'depthutils' has no attribute {name!r}")


def _import_every_result_kind() -> None:
    """Import every module of :mod:`depthutils.measures` and :mod:`depthutils.analysis`, where the package's
    :class:`Result` kinds are defined (``Result.load`` calls it on a kind not yet registered)."""
    import pkgutil

    for package in ("depthutils.measures", "depthutils.analysis"):
        for module in pkgutil.iter_modules(_importlib.import_module(package).__path__):
            _importlib.import_module(f"{package}.{module.name}")


_results.KIND_FINDERS.append(_import_every_result_kind)
