"""The sizes of the working chunks the fast paths cut their work into, shared by the measurements and
the cost model (each measurement's ``cost``), which must cut the same way to predict them.

Each is the size tuned for speed; a memory budget can only lower it (:func:`depthutils.cost.budget.work_bytes`).
"""
from __future__ import annotations

#: activations of one group of batch rows of the stack path (a layer's MLP and attention scores), bytes
GROUP_BYTES = 768 * 2**20
#: one chunk of output distributions of the stack path (logits, probabilities and the clean ones), bytes
UNEMBED_BYTES = 384 * 2**20
#: one slice of the vocabulary's lens logits (every layer, every token) and its exponentials, bytes
LENS_CHUNK_BYTES = 512 * 2**20


def limits(work_bytes: int | None) -> tuple[int, int]:
    """The bytes of one group of rows and of one output chunk of the stack path: :data:`GROUP_BYTES` and
    :data:`UNEMBED_BYTES`, or within ``work_bytes`` when a memory budget leaves less."""
    if work_bytes is None:
        return GROUP_BYTES, UNEMBED_BYTES
    return min(GROUP_BYTES, work_bytes), min(UNEMBED_BYTES, work_bytes)
