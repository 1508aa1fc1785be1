"""depthutils: the measurements of the depth-efficiency book.

One module per measurement, named as in the spec (``shared/spec/measurements.md``):

* :func:`residual_stream` (the decomposition every measurement rests on);
* :func:`contributions` (P1 Fig. 2), :func:`future_effects` (Fig. 3),
  :func:`logit_lens` (Fig. 4), :func:`residual_erasure` (Fig. 6b),
  :func:`integrated_gradients` (Fig. 6a), :func:`effective_depth` (P2);
* :func:`load_model` loads an embedded alias, a local folder or a hub id;
* :mod:`depthutils.data` loads the papers' data sets.
"""
from __future__ import annotations

import os as _os

__version__ = "0.1.0"

# No weight-loading progress bars: they go to stderr, clutter executed chapters and break nbval.
_os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

# Functions share their module's name (one module per measurement), so they are imported
# eagerly here: the function, not the submodule, is what `depthutils.<name>` means.
# First: _run imports tqdm.auto with its "IProgress not found" warning silenced, before nnsight and
# transformers import it (a kernel without ipywidgets would print that warning into every chapter).
from . import _run  # noqa: E402, F401
from . import data  # noqa: E402
from .contributions import contributions  # noqa: E402
from .cross_model_mapping import cross_model_mapping  # noqa: E402
from .depth_score import depth_score  # noqa: E402
from .effective_depth import effective_depth  # noqa: E402
from .errors import DepthError  # noqa: E402
from .future_effects import future_effects  # noqa: E402
from .integrated_gradients import integrated_gradients  # noqa: E402
from .logit_lens import logit_lens  # noqa: E402
from .models import ModelHandle, load_model  # noqa: E402
from .prompts import Prompt  # noqa: E402
from .residual_erasure import residual_erasure, residual_means  # noqa: E402
from .residual_stream import residual_stream  # noqa: E402
from .results import Result  # noqa: E402
from . import claims, exercises, study  # noqa: E402  every verdict (claims.py) and P2's study over models × tasks

__all__ = ["residual_stream", "contributions", "future_effects", "logit_lens", "residual_erasure", "residual_means",
           "integrated_gradients", "effective_depth", "depth_score", "cross_model_mapping", "load_model", "ModelHandle", "Prompt", "Result",
           "DepthError", "data", "claims", "exercises", "study"]
