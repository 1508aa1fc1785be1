"""A measurement's batch size from the cost model and a memory budget.

Where a measurement's path takes a batch size (rows per forward: the batched paths of future effects,
residual erasure and integrated gradients, the greedy decodings of the depth score and of the fact check,
the fact check's teacher-forced forwards), :func:`pick_batch` asks the cost model
(each measurement's ``cost``, :data:`depthutils.measures.MEASUREMENTS`) for the memory each candidate batch adds above the loaded weights,
and takes the largest that fits ``max_memory`` (default: what the device has free), saying so in one
line. A batch of the measurement's smallest size that still does not fit stops the run with one
sentence naming the memory it needs.
"""
from __future__ import annotations

import sys
from typing import Callable

import torch

from depthutils.core.errors import DepthError
from depthutils.core.progress import bars_wanted
from depthutils.cost import passes
from depthutils.cost.accounting import Shape
from depthutils.models.devices import available_memory


def shape_of(model) -> Shape:
    """The cost model's :class:`~depthutils.cost.accounting.Shape` of a loaded model (from its config)."""
    return Shape.from_config(model.nn.config.to_dict(), getattr(model, "name", ""))


def dtype_of(model) -> str:
    """The dtype the model computes in, as the cost model names it (``"float32"``, ``"bfloat16"``, …)."""
    p = next(model.nn._module.parameters(), None)
    return str(p.dtype).replace("torch.", "") if p is not None else "float32"


def free_memory(model) -> float:
    """Bytes the model's device has free: a GPU's free memory, else the machine's available RAM."""
    device = str(getattr(model, "device", "cpu"))
    if device.startswith("cuda") and torch.cuda.is_available():
        return float(torch.cuda.mem_get_info(torch.device(device))[0])
    return float(available_memory())


def parse_bytes(text: str | None) -> float | None:
    """``"80GB"``, ``"24GiB"``, ``"512MB"`` or a plain number of bytes."""
    if text is None:
        return None
    units = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KIB": 2 ** 10, "MIB": 2 ** 20,
             "GIB": 2 ** 30, "TIB": 2 ** 40}
    t = str(text).strip().upper().replace(" ", "")
    num = t.rstrip("KMGTIB")
    try:
        return float(num) * units[t[len(num):]]
    except (ValueError, KeyError):
        raise DepthError(f"--memory must be a size such as 80GB, 24GiB or 512MB, got {text!r}.") from None


def budget_bytes(model, max_memory) -> float:
    """``max_memory`` (bytes, or a size such as ``"8GB"``) or, when ``None``, :func:`free_memory`."""
    if max_memory is None:
        return free_memory(model)
    return float(parse_bytes(max_memory) if isinstance(max_memory, str) else max_memory)


def size(x: float) -> str:
    """Bytes as GB, MB below 0.1 GB, kB below 0.1 MB."""
    return f"{x / 1e9:.2f} GB" if x >= 1e8 else f"{x / 1e6:.1f} MB" if x >= 1e5 else f"{x / 1e3:.0f} kB"


def candidates(largest: int, smallest: int) -> list[int]:
    """``largest``, then halving down to ``smallest`` (each at least ``smallest``)."""
    out, b = [], max(largest, smallest)
    while b > smallest:
        out.append(b)
        b = max(smallest, b // 2)
    return out + [smallest]


def pick_batch(what: str, extra_bytes: Callable[[int], float], largest: int, budget: float, *, smallest: int = 2,
               say: bool = True) -> int:
    """The largest batch (rows per forward) of ``candidates(largest, smallest)`` whose predicted memory above
    the weights, ``extra_bytes(batch)``, fits ``budget``; prints one line saying which and why (``say``)."""
    for b in candidates(largest, smallest):
        need = extra_bytes(b)
        if need <= budget:
            if say and bars_wanted():  # where progress bars show: a terminal, not the book's pages (nbval)
                print(f"{what}: batch {b} of {largest} rows, planned {size(need)} above the weights of the "
                      f"{size(budget)} budget", file=sys.stderr, flush=True)
            return b
    raise DepthError(f"{what} needs about {size(extra_bytes(smallest))} above the weights even at batch "
                     f"{smallest} but the budget is {size(budget)}; run it on NDIF (remote=True), in bfloat16, "
                     "or with a larger max_memory.")


#: contexts per batched greedy decoding at most (:meth:`depthutils.models.handle.ModelHandle.greedy_batch`)
DECODE_BATCH = 32


def decode_batch(model, lengths: list[int], new: int, max_memory=None, say: bool = True,
                 what: str = "greedy decoding", largest: int = DECODE_BATCH) -> int:
    """Contexts per batched greedy decoding of contexts of ``lengths`` tokens, ``new`` tokens each: at most
    ``largest`` (:data:`DECODE_BATCH`), the largest whose KV cache and logits the cost model
    (:func:`depthutils.cost.passes.generate`) fits in ``max_memory`` (:func:`pick_batch`, which says so).
    On NDIF: ``largest``."""
    if not lengths or model.remote:
        return largest
    T, shape, dtype = max(lengths), shape_of(model), dtype_of(model)
    return pick_batch(what, lambda b: passes.generate(shape, [T] * b, [new] * b, dtype, False, batch=b).peak,
                      min(largest, len(lengths)), budget_bytes(model, max_memory), smallest=1, say=say)


def forward_batch(model, lengths: list[int], largest: int, max_memory=None, say: bool = True,
                  what: str = "teacher-forced check") -> int:
    """Prompts per forward that reads the logits, for prompts of ``lengths`` tokens: at most ``largest``,
    the largest whose activations and logits the cost model (:func:`depthutils.cost.passes.forward_batch`)
    fits in ``max_memory`` (:func:`pick_batch`, which says so). On NDIF: ``largest``."""
    if not lengths or model.remote:
        return largest
    T, shape, dtype = max(lengths), shape_of(model), dtype_of(model)
    return pick_batch(what, lambda b: passes.forward_batch(shape, b, T, dtype).peak, min(largest, len(lengths)),
                      budget_bytes(model, max_memory), smallest=1, say=say)


def work_bytes(model, max_memory, kept: float, cap: int, what: str, say: bool = True) -> int:
    """Bytes one working chunk of a measurement may use (the stack path's groups of rows, the logit lens's
    slices of the vocabulary): ``cap``, the size tuned for speed, or what the budget (``max_memory``,
    default what the device has free) leaves above the ``kept`` bytes the measurement holds, when that is
    less; says so in one line where progress bars show. Stops with one sentence when nothing is left."""
    budget = budget_bytes(model, max_memory)
    if kept >= budget:
        raise DepthError(f"{what} keeps about {size(kept)} above the weights but the budget is {size(budget)}; "
                         "run it on NDIF (remote=True), in bfloat16, or with a larger max_memory.")
    chosen = int(min(cap, budget - kept))
    if say and bars_wanted():
        print(f"{what}: working chunks of {size(chosen)} (at most {size(cap)}), {size(kept)} kept, of the "
              f"{size(budget)} budget", file=sys.stderr, flush=True)
    return chosen
