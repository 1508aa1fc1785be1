"""Analyses built on the measurements: P2's study over models × tasks (:mod:`~depthutils.analysis.study`),
the facts a model knows (:mod:`~depthutils.analysis.known_facts`) and the shared-layer outlook
(:mod:`~depthutils.analysis.depth_use`)."""
