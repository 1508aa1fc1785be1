"""Result containers: numpy arrays plus the metadata needed to reproduce them.

Every measurement returns a subclass of :class:`Result`. ``save(path)`` writes
``path.npz`` (the arrays) and ``path.json`` (everything else) through a
temporary file and an atomic rename; ``Result.load(path)`` reads them back into
the right class.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import tempfile
from dataclasses import dataclass, field
from importlib import metadata as _md
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .errors import DepthError

_REGISTRY: dict[str, type] = {}


def versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("depthutils", "torch", "transformers", "nnsight", "numpy"):
        try:
            out[pkg] = _md.version(pkg)
        except _md.PackageNotFoundError:
            out[pkg] = None
    return out


def atomic_write(path: Path, write) -> None:
    """Call ``write(tmp_path)`` then rename the temporary file onto ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise DepthError(f"Cannot write to {path.parent} ({e.strerror}); choose an output folder you can write to.") from None
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@dataclass
class Result:
    """Base class. Subclasses declare their arrays as fields; ``meta`` holds the rest."""

    meta: dict = field(default_factory=dict)
    kind: ClassVar[str] = "result"

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        _REGISTRY[cls.kind] = cls

    def arrays(self) -> dict[str, np.ndarray]:
        return {f.name: np.asarray(getattr(self, f.name)) for f in dataclasses.fields(self)
                if isinstance(getattr(self, f.name), np.ndarray)}

    def scalars(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "meta" and not isinstance(getattr(self, f.name), np.ndarray)}

    def table(self, *names: str, digits: int = 3) -> str:
        """A plain-text table of per-layer arrays (rounded, so notebook outputs stay comparable)."""
        names = names or tuple(k for k, v in self.arrays().items() if v.ndim == 1 and v.dtype.kind == "f")
        cols = [np.asarray(getattr(self, n), float) for n in names]
        width = max(len(n) for n in names) + 2
        lines = ["layer" + "".join(f"{n:>{width}}" for n in names)]
        for l in range(len(cols[0])):
            lines.append(f"{l:>5}" + "".join(f"{c[l]:>{width}.{digits}f}" for c in cols))
        return "\n".join(lines)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        arrays = self.arrays()
        atomic_write(path.with_suffix(".npz"), lambda tmp: np.savez(open(tmp, "wb"), **arrays))
        doc = {"kind": self.kind, "meta": self.meta, "fields": self.scalars()}
        atomic_write(path.with_suffix(".json"),
                     lambda tmp: Path(tmp).write_text(json.dumps(doc, indent=1, default=_jsonable)))
        return path

    @staticmethod
    def load(path: str | Path) -> "Result":
        path = Path(path)
        doc = json.loads(path.with_suffix(".json").read_text())
        cls = _REGISTRY[doc["kind"]]
        with np.load(path.with_suffix(".npz"), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        return cls(meta=doc["meta"], **doc["fields"], **arrays)


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def make_meta(handle, *, dataset: str | None, n: int | None, seed: int | None = None, **params) -> dict:
    """Metadata every result carries: model, data, parameters and package versions."""
    return {**handle.meta(), "dataset": dataset, "n": n, "seed": seed, "params": params, "versions": versions()}


def describe(prompts) -> tuple[str, int]:
    """(dataset name, n) of a list of prompts."""
    sources = sorted({p.source or "custom" for p in prompts})
    return "+".join(sources), len(prompts)


def wrap(text: str, width: int = 96) -> str:
    """A summary sentence wrapped for a notebook output (no horizontal scrolling in the book)."""
    import textwrap

    return textwrap.fill(text, width=width, subsequent_indent="  ")


def halves(values) -> tuple[float, float]:
    """Means over the first and the second half of the layers (the middle layer goes to the first)."""
    v = np.asarray(values, float)
    mid = (len(v) + 1) // 2
    return float(np.nanmean(v[:mid])), float(np.nanmean(v[mid:]))
