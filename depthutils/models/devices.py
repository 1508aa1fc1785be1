"""Where a model runs: the device and dtype a run asks for, checked against this machine, and the CPU's
one workaround (a dense input for the bfloat16 unembedding)."""
from __future__ import annotations

import functools
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


#: the CPU flags (``/proc/cpuinfo``) of native bfloat16 arithmetic: AVX-512 BF16, AMX, and Arm's BF16 extension
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
#: set to ``0`` or ``1`` to override the detection (``0``: ``dtype="auto"`` is float32 on every CPU)
BF16_ENV = "DEPTHUTILS_CPU_BF16"


def native_bf16() -> tuple[bool, str]:
    """Whether this CPU computes bfloat16 natively, and why in a few words.

    Decided by the environment variable :data:`BF16_ENV` where it is set, else by the CPU's flags in
    ``/proc/cpuinfo`` (:data:`BF16_FLAGS`), else (no ``/proc``: macOS, Windows) by a short measured matmul
    that must run at least 1.5 times faster in bfloat16 than in float32."""
    forced = os.environ.get(BF16_ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1", f"{BF16_ENV}={forced}"
    flags = _cpu_flags()
    if flags is not None:
        found = [f for f in BF16_FLAGS if f in flags]
        return (True, f"the CPU has {found[0]}") if found else (False, "the CPU has no bfloat16 instructions")
    ratio = _bf16_speedup()
    return ratio >= 1.5, f"bfloat16 matmul {ratio:.1f}x float32's speed here"


def _cpu_flags() -> set[str] | None:
    """The first CPU's ``flags`` (x86) or ``Features`` (Arm) in ``/proc/cpuinfo``; None without that file."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return set(value.split())
    except OSError:
        return None
    return set()


@functools.lru_cache(maxsize=None)
def _bf16_speedup(n: int = 512, repeats: int = 3) -> float:
    """float32's time over bfloat16's for an ``n × n`` matmul, best of ``repeats`` (0 where bfloat16 fails)."""
    import time

    def best(dtype):
        x = torch.randn(n, n).to(dtype)
        x @ x  # warm up the kernel
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            x @ x
            times.append(time.perf_counter() - t0)
        return min(times)
    try:
        return best(torch.float32) / best(torch.bfloat16)
    except RuntimeError:
        return 0.0


def auto_dtype(device: str, embedded: bool = False) -> tuple[torch.dtype, str]:
    """What ``dtype="auto"`` means for a model on ``device``, and why: bfloat16 on a GPU and on a CPU that
    computes it natively (:func:`native_bf16`), float32 elsewhere and for the book's embedded models
    (``embedded``), whose tests and oracle comparisons are float32's."""
    if device.startswith("cuda"):
        return torch.bfloat16, "auto: a GPU"
    if embedded:
        return torch.float32, "auto: an embedded model runs in float32"
    native, why = native_bf16()
    return (torch.bfloat16, f"auto: {why}") if native else (torch.float32, f"auto: {why}")


def _pick_dtype(dtype: Any, device: str) -> torch.dtype:
    if dtype == "auto":
        return auto_dtype(device)[0]
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
