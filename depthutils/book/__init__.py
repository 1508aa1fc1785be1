"""The book: the chapter runner (:mod:`~depthutils.book.runner`), the prose a chapter glues
(:mod:`~depthutils.book.report`), every claim and its grading (:mod:`~depthutils.book.claims`,
:mod:`~depthutils.book.claim_table`, :mod:`~depthutils.book.grading`), the figures
(:mod:`~depthutils.book.plotting`), the real-model sections (:mod:`~depthutils.book.realruns`) and the
student copy (:mod:`~depthutils.book.student`)."""
