"""Analyses built on the measurements: P2's study over models × tasks (:mod:`~depthutils.analysis.study`),
the facts a model knows (:mod:`~depthutils.analysis.known_facts`, its candidates in
:mod:`~depthutils.analysis.fact_candidates`) and the shared-layer outlook
(:mod:`~depthutils.analysis.depth_use`)."""
