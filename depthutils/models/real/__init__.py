"""The named real pretrained models: their catalogue (:mod:`~depthutils.models.real.catalog`) and their fetch
from the package index (:mod:`~depthutils.models.real.fetch`)."""
