"""The book: the chapter runner (:mod:`~depthutils.book.runner`), the prose a chapter glues
(:mod:`~depthutils.book.report`), every claim (:mod:`~depthutils.book.claim_table`), its grading rule
(:mod:`~depthutils.book.grading`) and one module per claim with its verdict, figure and real-model run
(:mod:`~depthutils.book.claims`, and the reviewers' questions in :mod:`~depthutils.book.reviews`), the figures' one
look (:mod:`~depthutils.book.plotstyle`), the real-model sections (:mod:`~depthutils.book.realruns`) and the
student copy (:mod:`~depthutils.book.student`)."""
