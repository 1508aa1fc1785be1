"""The sizes of the working chunks the fast paths cut their work into, shared by the measurements and
the cost model (each measurement's ``cost``), which must cut the same way to predict them.

Each is the size tuned for speed; a memory budget can only lower it (:func:`depthutils.cost.budget.work_bytes`).
"""
from __future__ import annotations

#: activations of one group of batch rows of the stack path (a layer's MLP and attention scores), bytes
GROUP_BYTES = 768 * 2**20
#: one chunk of output distributions of the stack path (logits, probabilities and the clean ones), bytes
UNEMBED_BYTES = 384 * 2**20
#: the memory above the weights of one forward of the batched path of future effects, by the cost model's count
#: (its ``cost``, which counts about twice what a CPU run keeps). SmolLM2-135M's chapter 2 call in bfloat16 on 2
#: cores (``bench --only batch``): 4 rows a forward 282 s, 8 rows 186 s, 15 (this cap's) 157 s, 31 rows 144 s at a
#: peak of 4.1 GB: past this cap a batch buys little time and costs the 4 GB a process may hold; a budget sized by
#: free memory alone had made Gemma 3 270M's section slower
BATCH_BYTES = 6 * 10**9
#: interpolation points of integrated gradients per forward+backward on the stack path at most (P1 runs 16): on
#: SmolLM2-135M on 2 cores, Riemann with 64 points a layer took 32.1 s at 16 rows, 25.3 at 32, 21.1 at 64, 21.1 at
#: 128 and 22.4 at 256 on an 8-token prompt (53.7, 44.6, 36.5, 36.4, 37.5 s on a 15-token one), at a peak of 5.1 GB
#: with 256 rows: past 64 rows a batch buys nothing and costs memory
IG_ROWS = 64
#: one block of the logit lens's float32 logits (rows: layers × tokens; columns: a slice of the vocabulary), bytes:
#: small enough that the block's several passes (max, exponentials, sums) stay in the CPU's cache
LENS_CHUNK_BYTES = 16 * 2**20
#: rows (layers × tokens) of one block of the logit lens at most: enough for an efficient matrix product
LENS_ROWS = 4096


def lens_blocks(layers: int, tokens: int, vocab: int, k: int, chunk_bytes: int) -> tuple[int, int]:
    """How :func:`depthutils.measures.logit_lens.chunked_lens` cuts ``layers × tokens`` rows over a vocabulary of
    ``vocab``: ``(tokens per block, vocabulary slice)``. A block holds every layer of whole tokens, at most
    :data:`LENS_ROWS` rows (one token's layers at least), and a slice of at least ``k`` columns whose float32
    logits fit ``chunk_bytes`` (:data:`LENS_CHUNK_BYTES`, or less where a memory budget leaves less)."""
    per_block = max(1, min(tokens, LENS_ROWS // max(layers, 1)))
    return per_block, min(vocab, max(k, chunk_bytes // (4 * layers * per_block)))


def limits(work_bytes: int | None) -> tuple[int, int]:
    """The bytes of one group of rows and of one output chunk of the stack path: :data:`GROUP_BYTES` and
    :data:`UNEMBED_BYTES`, or within ``work_bytes`` when a memory budget leaves less."""
    if work_bytes is None:
        return GROUP_BYTES, UNEMBED_BYTES
    return min(GROUP_BYTES, work_bytes), min(UNEMBED_BYTES, work_bytes)
