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

One module per chapter (``ch00`` … ``ch10``), as the exercises are (:mod:`depthutils.teaching.exercises`); the
helpers they share are in ``common``.
"""
from depthutils.teaching.solutions import ch00, ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10  # noqa: E402
from depthutils.teaching.solutions.ch00 import *  # noqa: F401,F403
from depthutils.teaching.solutions.ch01 import *  # noqa: F401,F403
from depthutils.teaching.solutions.ch02 import *  # noqa: F401,F403
from depthutils.teaching.solutions.ch03 import *  # noqa: F401,F403
from depthutils.teaching.solutions.ch04 import *  # noqa: F401,F403
from depthutils.teaching.solutions.ch05 import *  # noqa: F401,F403
from depthutils.teaching.solutions.ch06 import *  # noqa: F401,F403
from depthutils.teaching.solutions.ch07 import *  # noqa: F401,F403
from depthutils.teaching.solutions.ch08 import *  # noqa: F401,F403
from depthutils.teaching.solutions.ch09 import *  # noqa: F401,F403
from depthutils.teaching.solutions.ch10 import *  # noqa: F401,F403
from depthutils.teaching.solutions.common import (
    _answer_gradient,
    _layer_parts,
    _output_probs,
    _residual_around,
    _run_hooked,
)

__all__ = [name for chapter in (ch00, ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10) for name in chapter.__all__]
