"""The public API of :mod:`depthutils` as editors and type checkers read it (``__init__.py`` imports each measurement
on first use; ``tests/test_layers.py`` holds this file to the registry)."""
from depthutils import data as data
from depthutils.core.errors import DepthError as DepthError
from depthutils.core.prompts import Prompt as Prompt
from depthutils.core.results import Result as Result
from depthutils.measures import MEASUREMENTS as MEASUREMENTS
from depthutils.measures.contributions import contributions as contributions
from depthutils.measures.cross_model_mapping import cross_model_mapping as cross_model_mapping
from depthutils.measures.depth_score import depth_score as depth_score
from depthutils.measures.early_exit import early_exit as early_exit
from depthutils.measures.effective_depth import effective_depth as effective_depth
from depthutils.measures.future_effects import future_effects as future_effects
from depthutils.measures.integrated_gradients import integrated_gradients as integrated_gradients
from depthutils.measures.logit_lens import logit_lens as logit_lens
from depthutils.measures.massive_clamp import massive_clamp as massive_clamp
from depthutils.measures.norm_growth import norm_growth as norm_growth
from depthutils.measures.residual_erasure import residual_erasure as residual_erasure
from depthutils.measures.residual_erasure import residual_means as residual_means
from depthutils.measures.residual_stream import residual_stream as residual_stream
from depthutils.measures.tuned_lens import tuned_lens as tuned_lens
from depthutils.models import ModelHandle as ModelHandle
from depthutils.models import load_model as load_model

__version__: str
__all__: list[str]
