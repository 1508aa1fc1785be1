"""Teaching: each chapter's exercises with their checkers (:mod:`~depthutils.teaching.exercises`) and their
solutions (:mod:`~depthutils.teaching.solutions`)."""
