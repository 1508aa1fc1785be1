"""Reference solutions of the book's implement-it exercises (see :mod:`depthutils.teaching.exercises`).

Written to be read by a student, not to be fast: one forward pass per intervention, every
tensor's shape asserted, and the formula the chapter defines in the docstring. Some read the model with
nnsight (``lm.nn.trace`` and the accessors ``lm.layer(l)``, ``lm.final_norm``, ``lm.unembed``),
others with plain PyTorch forward hooks on the ``transformers`` model (``lm.hf``,
``lm.hf_layer(l)``), so that both ways are shown. They are written for the book's
Llama-shaped models (a pre-norm decoder whose sublayer outputs are added as they are); the
library's measurements also handle the families that post-norm or scale what a layer adds.

A decoder layer of today's ``transformers`` returns a tensor ``[batch, tokens, hidden]``, not
a tuple: ``output[0]`` would be batch row 0.

One module per chapter (``ch00`` … ``ch10``, each imported when first used), as the exercises are (:mod:`depthutils.teaching.exercises`); the
helpers they share are in ``common``.
"""
import importlib

from depthutils.teaching.solutions.common import (
    _answer_gradient,
    _layer_parts,
    _output_probs,
    _residual_around,
    _run_hooked,
)

#: the chapters' modules, each imported when first used (a chapter's page loads its own only)
CHAPTERS = tuple(f"ch{n:02d}" for n in range(11))
__all__ = list(CHAPTERS)


def __getattr__(name: str):
    """``solutions.ch02`` imports chapter 2's module; ``solutions.skip_effect`` finds the solution in its chapter."""
    if name in CHAPTERS:
        return importlib.import_module(f"{__name__}.{name}")
    if not name.startswith("_"):
        for chapter in CHAPTERS:
            module = importlib.import_module(f"{__name__}.{chapter}")
            if name in module.__all__:
                return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
