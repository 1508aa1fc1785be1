"""depthutils: the measurements of the depth-efficiency book.

The package root is the public API: the measurements, one per paper measurement and named as in the spec
(``shared/spec/measurements.md``):

* :func:`residual_stream` (the decomposition every measurement rests on);
* :func:`contributions` (P1 Fig. 2), :func:`future_effects` (Fig. 3), :func:`logit_lens` (Fig. 4),
  :func:`residual_erasure` (Fig. 6b), :func:`integrated_gradients` (Fig. 6a), :func:`depth_score` (§6),
  :func:`cross_model_mapping` (§7), :func:`effective_depth` (P2);
* :func:`load_model` loads an embedded alias, a local folder, a named real model or a hub id;
* :mod:`depthutils.data` loads the papers' data sets.

Subpackages by role, each importing only from the layers before it (``tests/test_layers.py`` checks it)::

    core ← ladder ← data ← models ← cost ← measures ← analysis ← perf, teaching ← book ← __main__

* :mod:`~depthutils.core`: errors, results and statistics, prompts and encoding, progress bars, the cache, numbers as
  the prose prints them;
* :mod:`~depthutils.ladder`: the embedded models' registry, tasks, tokenizer and trainer;
* :mod:`~depthutils.data`: the papers' data sets and the few-shot task families;
* :mod:`~depthutils.models`: the model handle, architectures, devices, sources, start token, remote (NDIF),
  the decoder stack, the named real models and random models;
* :mod:`~depthutils.cost`: what a pass costs, a model's shape, the chunks and the memory budget;
* :mod:`~depthutils.measures`: one module per measurement, each stating its own cost;
* :mod:`~depthutils.analysis`: P2's study, the facts a model knows, the shared-layer outlook;
* :mod:`~depthutils.perf`: the plan, its check and the benchmark;
* :mod:`~depthutils.teaching`: exercises, checkers and solutions;
* :mod:`~depthutils.book`: the runner, the glued prose, claims and grading, figures, the real-model sections.

Importing :mod:`depthutils` loads the first six layers; ``depthutils.claims``, ``depthutils.study`` and
``depthutils.exercises`` load theirs when first used.
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


def _import_every_result_kind() -> None:
    """Import every module of :mod:`depthutils.measures` and :mod:`depthutils.analysis`, where the package's
    :class:`Result` kinds are defined (``Result.load`` calls it on a kind not yet registered)."""
    import pkgutil

    for package in ("depthutils.measures", "depthutils.analysis"):
        for module in pkgutil.iter_modules(_importlib.import_module(package).__path__):
            _importlib.import_module(f"{package}.{module.name}")


_results.KIND_FINDERS.append(_import_every_result_kind)

#: the later layers' modules that ``depthutils.<name>`` reaches, imported on first use
_LAZY = {"claims": "depthutils.book.claims", "study": "depthutils.analysis.study",
         "exercises": "depthutils.teaching.exercises"}

#: the measurements, each by its name: ``depthutils.logit_lens`` is the function of ``depthutils.measures.logit_lens``
globals().update({_name: _m.measure() for _name, _m in MEASUREMENTS.items()})

__all__ = [*MEASUREMENTS, "load_model", "ModelHandle", "Prompt", "Result", "DepthError", "data", "claims",
           "exercises", "study"]


def __getattr__(name: str):
    if name in _LAZY:
        module = _importlib.import_module(_LAZY[name])
        globals()[name] = module
        return module
    raise AttributeError(f"module 'depthutils' has no attribute {name!r}")
