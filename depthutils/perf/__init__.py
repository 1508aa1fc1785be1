"""Performance: the plan (what a chapter will cost, :mod:`~depthutils.perf.plan`), its check against measured
runs (:mod:`~depthutils.perf.check`) and the benchmark (``python -m depthutils bench``,
:mod:`~depthutils.perf.bench`)."""
