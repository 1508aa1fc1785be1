"""Reference solutions of the book's implement-it exercises (see :mod:`depthutils.exercises`).

Written to be read by a student, not to be fast: one forward pass per intervention, every
tensor's shape asserted, and the formula the chapter defines in the docstring. Some read the model with
nnsight (``lm.nn.trace`` and the accessors ``lm.layer(l)``, ``lm.final_norm``, ``lm.unembed``),
others with plain PyTorch forward hooks on the ``transformers`` model (``lm.hf``,
``lm.hf_layer(l)``), so that both ways are shown. They are written for the book's
Llama-shaped models (a pre-norm decoder whose sublayer outputs are added as they are); the
library's measurements also handle the families that post-norm or scale what a layer adds.

A decoder layer of today's ``transformers`` returns a tensor ``[batch, tokens, hidden]``, not
a tuple: ``output[0]`` would be batch row 0.

One module per chapter (``ch00`` … ``ch09``), as the exercises are (:mod:`depthutils.exercises`); the
helpers they share are in ``common``.
"""
from .common import (  # noqa: F401  (the exercises' checkers use them too)
    _answer_gradient, _layer_parts, _output_probs, _residual_around, _run_hooked)
from .ch00 import *  # noqa: F401,F403
from .ch01 import *  # noqa: F401,F403
from .ch02 import *  # noqa: F401,F403
from .ch03 import *  # noqa: F401,F403
from .ch04 import *  # noqa: F401,F403
from .ch05 import *  # noqa: F401,F403
from .ch06 import *  # noqa: F401,F403
from .ch07 import *  # noqa: F401,F403
from .ch08 import *  # noqa: F401,F403
from .ch09 import *  # noqa: F401,F403
