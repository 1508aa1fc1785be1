"""Where a model runs: the device and dtype a run asks for, checked against this machine, and the CPU's
one workaround (a dense input for the bfloat16 unembedding)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from depthutils.core.errors import DepthError


def _pick_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DepthError(f"device={device!r} was requested but no CUDA GPU is visible; use device='cpu'.")
    return device


def _pick_dtype(dtype: Any, device: str) -> torch.dtype:
    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if isinstance(dtype, torch.dtype):
        out = dtype
    else:
        names = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
                 "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
        if dtype not in names:
            raise DepthError(f"Unknown dtype {dtype!r}; use one of 'auto', {', '.join(map(repr, names))}.")
        out = names[dtype]
    if device == "cpu" and out in (torch.bfloat16, torch.float16) and not half_precision_works(out):
        raise DepthError(f"dtype={dtype!r} cannot run on this CPU; use dtype='float32'.")
    return out


def half_precision_works(dtype: torch.dtype) -> bool:
    """Whether this CPU and torch build can run a matmul in ``dtype`` (some cannot at all)."""
    try:
        x = torch.ones(4, 4, dtype=dtype)
        return bool(torch.isfinite((x @ x).float()).all())
    except RuntimeError:
        return False


def _dense_bf16(module, args):
    """The unembedding's input as a dense copy in bfloat16 on a CPU: greedy decoding hands it a slice of the
    last position whose batch stride spans the whole sequence, and torch's bf16 ``F.linear`` on such a slice
    ran ~100× slower (12.4 against 0.11 CPU s at a 128k vocabulary, found by ``plan --check``). Same values."""
    x = args[0] if args else None
    if not (torch.is_tensor(x) and x.dtype == torch.bfloat16):
        return None
    dense = [1] * x.dim()
    for i in range(x.dim() - 2, -1, -1):
        dense[i] = dense[i + 1] * x.shape[i + 1]
    if list(x.stride()) != dense:  # torch calls a [B, 1, H] slice contiguous: compare every stride
        return (x.clone(memory_format=torch.contiguous_format), *args[1:])
    return None


def proc_value(path: str, key: str) -> int | None:
    """A ``key:  <n> kB`` line of a ``/proc`` file, in bytes; ``None`` where the file or the line is missing."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def available_memory() -> int:
    """Bytes this machine can still give a process (``MemAvailable``), or total RAM."""
    value = proc_value("/proc/meminfo", "MemAvailable")
    return value if value is not None else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
