"""Models: loading one (:func:`load_model`), its architecture's parts, the device and dtype it runs on, where
its files come from, the start token, the loop every measurement runs its traces with (:mod:`depthutils.models.each`),
the remote (NDIF) path, the decoder stack run from any layer, the named
real models (:mod:`depthutils.models.real`) and the random models the tests and benchmarks build."""
from depthutils.models.architectures import ShapeError, check_residual, unwrap
from depthutils.models.handle import ModelHandle, load_model

__all__ = ["ModelHandle", "load_model", "ShapeError", "check_residual", "unwrap"]
