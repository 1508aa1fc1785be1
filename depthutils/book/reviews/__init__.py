"""The reviewers' questions: experiments P1's reviewers asked for, each graded like the papers' claims (its row in
:mod:`depthutils.book.claim_table` states the question in our words, since reviews are not the paper).

One module per question, each with its ``verdict``, its ``figure`` and its run on the real models (``REAL_RUN``:
the keyword arguments of a :class:`depthutils.book.realruns.Run` and its ``key`` ``"<chapter>-<name>"``, which
:func:`depthutils.book.realruns.section` takes). A chapter imports the module of its question.
"""
