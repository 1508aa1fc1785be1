"""A result cache whose key covers the code version, the model revision and every parameter.

Each entry is one ``.npz`` file (arrays plus the JSON document of the result,
key included), written to a temporary file and renamed into place, so a run
killed mid-write leaves the previous entry intact. An entry that cannot be
read, or whose stored key differs, is recomputed with a warning.
"""
from __future__ import annotations

import hashlib
import json
import warnings
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from depthutils.core.results import Result, _jsonable, atomic_write, result_class

#: the layers whose code decides cached values (the plan, the book and teaching do not)
MEASUREMENT_LAYERS = ("core", "ladder", "data", "models", "cost", "measures", "analysis")


@lru_cache(maxsize=1)
def code_version() -> str:
    """A hash of the measurement code (every module of :data:`MEASUREMENT_LAYERS`), so any change to it
    invalidates the cache."""
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parents[1]
    for layer in MEASUREMENT_LAYERS:
        for path in sorted((pkg / layer).rglob("*.py")):
            h.update(path.relative_to(pkg).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def cache_key(**parts) -> str:
    """The key of one entry: a hash of the code version and every given part (model, revision, params…)."""
    doc = json.dumps({"code": code_version(), **parts}, sort_keys=True, default=_jsonable)
    return hashlib.sha256(doc.encode()).hexdigest()[:24]


def write(path: Path, result: Result, key: str) -> None:
    doc = {"kind": result.kind, "key": key, "meta": result.meta, "fields": result.scalars()}
    blob = np.frombuffer(json.dumps(doc, default=_jsonable).encode(), dtype=np.uint8)

    def _save(tmp):
        with open(tmp, "wb") as f:
            np.savez(f, __doc__=blob, **result.arrays())
    atomic_write(path, _save)


def read(path: Path, key: str) -> Result:
    """Read an entry; raises ValueError if it is corrupt or was written under another key."""
    try:
        with np.load(path, allow_pickle=False) as z:
            doc = json.loads(bytes(z["__doc__"]).decode())
            arrays = {k: z[k] for k in z.files if k != "__doc__"}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, UnicodeDecodeError, EOFError) as e:
        raise ValueError(f"unreadable ({type(e).__name__})") from None
    if doc.get("key") != key:
        raise ValueError("written under another key")
    result = result_class(doc["kind"])(meta=doc["meta"], **doc["fields"], **arrays)
    missing = [per for per, _ in result.PER_PROMPT.values() if getattr(result, per) is None]
    if missing:  # an entry from before per-prompt values were kept: never read as one without intervals
        raise ValueError(f"no per-prompt values ({', '.join(missing)})")
    return result


def cached(cache_dir: str | Path, name: str, key: str, compute: Callable[[], Result]) -> tuple[Result, bool]:
    """``(result, hit)``: the cached entry ``name``/``key`` if valid, else ``compute()`` stored atomically."""
    path = Path(cache_dir) / f"{name}-{key}.npz"
    if path.exists():
        try:
            return read(path, key), True
        except ValueError as e:
            warnings.warn(f"Cache entry {path.name} is corrupt ({e}); recomputing it.", stacklevel=2)
    result = compute()
    write(path, result, key)
    return result, False
