"""The project's own depth ladder of small Llama models.

No pretrained language model can be downloaded where the book runs, so the
project trains and ships its own: ``ladder-4``, ``ladder-8``, ``ladder-12`` and
``ladder-16`` (4, 8, 12 and 16 layers; same width, data, seed, schedule and training tokens), ``ladder-8-shared``
(eight layer applications cycling through two shared blocks, exported as an
ordinary 8-layer Llama) and ``ladder-8-cot`` (the 8-layer model fine-tuned to
write its reasoning out step by step).

Modules, one concern each:

* :mod:`.registry`  -- where the models live, aliases, the training specs.
* :mod:`.tokenizer` -- the byte-level BPE (one token per digit, automatic BOS).
* :mod:`.tasks`     -- generated tasks (addition chains, word problems,
  multi-hop questions) and the held-out rules.
* :mod:`.corpus`    -- public-domain English text and the training-batch mixer.
* :mod:`.train`     -- AdamW + cosine trainer with checkpoint-and-resume.
* :mod:`.evaluate`  -- greedy evaluation (the book's answer rule), model cards, book prompts.
* :mod:`.word_problems` -- chapter 10's two tasks: the S5 word problem (needs depth) and the Z10 chains
  (a control with a constant-depth shortcut), with the group theory that tells them apart.
* :mod:`.objectives` -- chapter 10's three training objectives (answer only, question and answer, with
  language modelling): their batches, accuracy and cards.
* :mod:`.runs`      -- many runs trained side by side, one thread each.

Reproduce with ``python -m depthutils.ladder train ladder-8`` (see README.md), and the objectives experiment
with ``python -m depthutils objectives``.
This subpackage only imports the standard library at import time; torch and
transformers are imported by the modules that need them.
"""
