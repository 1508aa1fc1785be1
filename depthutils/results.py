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

    def findings(self) -> str:
        """What the run shows, in one paragraph of numbers (each subclass says it its way)."""
        return ""

    def fitting(self) -> str:
        """How the prompts were fitted to the context, and what position 0 holds."""
        fit, meta = self.meta.get("fit"), self.meta
        if not fit:
            return ""
        return (f"Prompts: {fit['used']} used, {fit['cut']} cut, {fit['skipped']} skipped "
                f"({context_note(fit['max_tokens'], meta.get('bos'))}).")

    def summary(self) -> str:
        """The findings, wrapped for a notebook, then how the prompts were fitted."""
        return "\n".join(t for t in (wrap(self.findings()), self.fitting()) if t)

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


#: what position 0 holds, as a summary says it (see depthutils.prompts.bos_mode)
BOS_NOTES = {"tokenizer": "BOS added by the tokenizer", "prepended": "BOS prepended by depthutils",
             "off": "no BOS (prepend_bos=False)", "unavailable": "no BOS (the tokenizer has none)"}


def context_note(max_tokens: int | None, bos: str | None) -> str:
    """``"max_tokens: 128 tokens; BOS prepended by depthutils"``: the fitting limit and position 0."""
    limit = f"{max_tokens} tokens" if max_tokens else "no context limit"
    return f"max_tokens: {limit}; {BOS_NOTES.get(bos, bos)}"


def make_meta(handle, *, dataset: str | None, n: int | None, seed: int | None = None, fit=None, **params) -> dict:
    """Metadata every result carries: model, data, fitting, parameters and package versions."""
    return {**handle.meta(), "dataset": dataset, "n": n, "seed": seed,
            "fit": fit.as_dict() if fit is not None else None, "params": params, "versions": versions()}


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


def context_depth(matrix, first: int, frac: float = 0.1) -> int | None:
    """The deepest row whose *context* columns ``[1, first)`` reach ``frac`` of the largest |value|.

    ``matrix`` is ``[rows = depth, T]`` (erasure effects or attributions); ``first`` is the
    first position that predicts the answer. ``None`` when no context position ever does.
    """
    m = np.abs(np.asarray(matrix, float))
    context = m[:, 1:first]
    if context.size == 0 or m.max() == 0:
        return None
    rows = np.flatnonzero(context.max(axis=1) > frac * m.max())
    return int(rows[-1]) if rows.size else None


#: the outcomes a verdict can have
OUTCOMES = ("shown", "mixed", "not shown")


@dataclass
class Verdict:
    """A computed verdict on a paper's claim: the claim, the criterion (a number and its
    thresholds), the outcome and this run's numbers. Chapters end with one."""

    claim: str
    criterion: str
    outcome: str
    numbers: str

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    def markdown(self) -> str:
        return (f"**Verdict: {self.outcome}.**\n\n- *Claim:* {self.claim}\n- *Criterion:* {self.criterion}\n"
                f"- *This run:* {self.numbers}")


def grade(value: float | None, shown: float, mixed: float, below: bool = True) -> str:
    """``"shown"`` when ``value`` is beyond the ``shown`` threshold, ``"mixed"`` beyond ``mixed``,
    else ``"not shown"`` (``below=True``: smaller is more in favour of the claim). None: not shown."""
    if value is None or not np.isfinite(value):
        return "not shown"
    sign = 1 if below else -1
    if sign * value <= sign * shown:
        return "shown"
    if sign * value <= sign * mixed:
        return "mixed"
    return "not shown"


def combine(outcomes) -> str:
    """Several criteria at once: shown if all are, not shown if none is (mixed counts half)."""
    outcomes = list(outcomes)
    if all(o == "shown" for o in outcomes):
        return "shown"
    if all(o == "not shown" for o in outcomes):
        return "not shown"
    return "mixed"


def context_verdict(results: dict, what: str) -> Verdict:
    """P1's Fig. 6 claim on several prompts' erasure or IG results (``{name: result}``), from each
    result's ``facts()['deepest_rel']`` (see :func:`context_depth`)."""
    facts = {name: r.facts() for name, r in results.items()}
    grades = [grade(f["deepest_rel"] if f["deepest_rel"] is not None else 0.0, 0.6, 0.8) for f in facts.values()]
    worst = max(grades, key=("shown", "mixed", "not shown").index)
    rel = lambda f: "never" if f["deepest_rel"] is None else f"{f['deepest_rel']:.2f}"
    return Verdict(
        claim="P1: context positions (operands, entities) stop mattering by about the middle of the network; "
              "after that the answer is computed at the last positions.",
        criterion=f"for every prompt, the relative depth of the deepest layer at which {what} at a context "
                  "position exceeds 10% of its maximum: shown if ≤ 0.6 for all prompts, mixed if ≤ 0.8, "
                  "not shown otherwise.",
        outcome=worst,
        numbers="; ".join(f"{name}: {rel(f)}" for name, f in facts.items()) + ".")
