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
import warnings
from dataclasses import dataclass, field
from importlib import metadata as _md
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from depthutils.core.errors import DepthError

_REGISTRY: dict[str, type] = {}
#: what :func:`result_class` calls when a kind is not registered yet: each imports modules that define kinds (the
#: package root adds one that imports every measurement and analysis module, so any saved result loads)
KIND_FINDERS: list = []


def result_class(kind: str) -> type:
    """The :class:`Result` subclass registered under ``kind``, importing the modules that define kinds first when
    it is not registered yet (a fresh interpreter that imported only the package root)."""
    if kind not in _REGISTRY:
        for find in KIND_FINDERS:
            find()
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise DepthError(f"No result kind {kind!r} in depthutils (known: {', '.join(sorted(_REGISTRY))}); the file "
                         "was saved by another version or by code outside the package.") from None


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


#: how a per-prompt array aggregates to the reported one (see :attr:`Result.PER_PROMPT`)
AGGREGATES = ("tokens", "mean", "max")


def aggregate(values, how: str, weights=None) -> np.ndarray:
    """Aggregate per-prompt ``values [N, ...]`` over prompts: ``"tokens"`` is the mean weighted by
    each prompt's token count (every token of every prompt counts once), ``"mean"`` the plain mean,
    ``"max"`` the max (NaN entries, such as ``j ≤ s`` of a future-effect matrix, stay NaN)."""
    v = np.asarray(values, float)
    if how == "tokens":
        w = np.asarray(weights, float)
        return np.tensordot(w, v, axes=1) / w.sum()
    if how == "mean":
        return v.mean(axis=0)
    if how == "max":
        with np.errstate(invalid="ignore"):
            return np.fmax.reduce(v, axis=0) if len(v) > 1 else v[0].copy()
    raise ValueError(f"how must be one of {AGGREGATES}, got {how!r}")


def bootstrap(n: int, statistic, *, level: float = 0.95, n_boot: int = 1000, seed: int = 0):
    """Percentile bootstrap over ``n`` prompts: ``(lo, hi)`` of ``statistic(idx)`` over ``n_boot``
    resamples ``idx`` (``n`` prompt indices drawn with replacement, seeded, so deterministic).

    ``statistic`` returns a number, an array, or None (undefined, e.g. an effective depth no layer
    reaches); undefined resamples are left out, and an entry undefined in every resample is NaN.
    """
    if not 0 < level < 1:
        raise DepthError(f"level must be between 0 and 1 (e.g. 0.95), got {level!r}.")
    if n < 1:
        raise DepthError("An interval needs at least one prompt.")
    rng = np.random.default_rng(seed)
    values = [statistic(rng.integers(0, n, n)) for _ in range(int(n_boot))]
    shape = next((np.shape(v) for v in values if v is not None), ())
    draws = np.stack([np.full(shape, np.nan) if v is None else np.asarray(v, float) for v in values])
    q = [50 * (1 - level), 50 * (1 + level)]
    with warnings.catch_warnings():  # all-NaN entries (undefined everywhere) stay NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(draws, q, axis=0)
    return (float(lo), float(hi)) if np.ndim(lo) == 0 else (lo, hi)


@dataclass
class Result:
    """Base class. Subclasses declare their arrays as fields; ``meta`` holds the rest.

    A result that averages (or maxes) over prompts also keeps the per-prompt values behind each
    aggregate: :attr:`PER_PROMPT` maps an aggregate field to ``(per-prompt field, how)`` (see
    :func:`aggregate`; ``"tokens"`` weighs by the ``prompt_tokens`` field). The aggregate is computed
    from them, so they aggregate back exactly, and :meth:`interval` bootstraps over prompts.
    """

    meta: dict = field(default_factory=dict)
    kind: ClassVar[str] = "result"
    PER_PROMPT: ClassVar[dict] = {}
    #: arrays measured on local models only: a remote run leaves them NaN (and its summary says so)
    LOCAL_ONLY: ClassVar[tuple] = ()

    def __init_subclass__(cls, **kw):
        """Register ``cls`` under its ``kind``; a kind taken by another class is an error (the same class imported
        again, e.g. on a module's reload, replaces itself)."""
        super(Result, cls).__init_subclass__(**kw)  # NDIF rebuilds it from source: no __class__ cell
        taken = _REGISTRY.get(cls.kind)
        if taken is not None and (taken.__module__, taken.__qualname__) != (cls.__module__, cls.__qualname__):
            raise DepthError(f"The result kind {cls.kind!r} is taken by {taken.__module__}.{taken.__qualname__}; "
                             f"give {cls.__module__}.{cls.__qualname__} a kind of its own.")
        _REGISTRY[cls.kind] = cls

    def arrays(self) -> dict[str, np.ndarray]:
        return {f.name: np.asarray(getattr(self, f.name)) for f in dataclasses.fields(self)
                if isinstance(getattr(self, f.name), np.ndarray)}

    def scalars(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "meta" and not isinstance(getattr(self, f.name), np.ndarray)}

    # -- per-prompt values and intervals ---------------------------------------------------------

    @property
    def n_prompts(self) -> int:
        """How many prompts the per-prompt arrays hold (0 for a result without them)."""
        values = getattr(self, next(iter(self.PER_PROMPT.values()))[0]) if self.PER_PROMPT else None
        return 0 if values is None else len(values)

    def aggregate(self, name: str, idx=None) -> np.ndarray:
        """The aggregate ``name`` recomputed from the per-prompt values (of prompts ``idx``, default all)."""
        if name not in self.PER_PROMPT:
            raise DepthError(f"{type(self).__name__} has no per-prompt values for {name!r}; "
                             f"choose from {', '.join(self.PER_PROMPT) or 'none'}.")
        per, how = self.PER_PROMPT[name]
        values = np.asarray(getattr(self, per), float)
        weights = getattr(self, "prompt_tokens", None)
        if idx is not None:
            values = values[idx]
            weights = None if weights is None else np.asarray(weights)[idx]
        return aggregate(values, how, weights)

    def with_aggregates(self) -> "Result":
        """Fill every aggregate field of :attr:`PER_PROMPT` from its per-prompt values; returns self."""
        for name in self.PER_PROMPT:
            setattr(self, name, self.aggregate(name))
        return self

    def resample(self, idx) -> "Result":
        """The same result on prompts ``idx`` (with repeats): per-prompt arrays indexed, aggregates
        recomputed. Anything derived from the aggregates (facts, verdict numbers) follows."""
        idx = np.asarray(idx)
        per = {p for p, _ in self.PER_PROMPT.values()} | ({"prompt_tokens"} if hasattr(self, "prompt_tokens") else set())
        return dataclasses.replace(self, **{p: np.asarray(getattr(self, p))[idx] for p in per}).with_aggregates()

    def interval(self, what, level: float = 0.95, n_boot: int = 1000, seed: int = 0):
        """A percentile bootstrap interval ``(lo, hi)`` over prompts, deterministic for ``seed``.

        ``what`` is an aggregate field (its interval has the field's shape) or a function of a
        resampled result returning a number or None (e.g. ``lambda r: r.facts()["ratio"]``).
        Each resample draws the prompts with replacement and recomputes the *same* aggregate
        the field reports: a token-weighted mean, a plain mean, or P1's max over prompts.

        For a max over prompts the bootstrap is biased: a resample can never exceed the
        observed max and holds it only in about 63% of draws, so the interval's upper end is
        the observed max itself and its lower end is too low. It says how much the max hangs
        on a few prompts, not where a population max lies; :meth:`mean_interval` gives the
        mean over prompts, a smooth statistic the bootstrap estimates well.
        """
        if not self.n_prompts:
            raise DepthError(f"This {type(self).__name__} keeps no per-prompt values, so it has no interval over "
                             "prompts; recompute it with the measurement function.")
        stat = ((lambda idx: self.aggregate(what, idx)) if isinstance(what, str)
                else (lambda idx: what(self.resample(idx))))
        return bootstrap(self.n_prompts, stat, level=level, n_boot=n_boot, seed=seed)

    def mean_interval(self, name: str, level: float = 0.95, n_boot: int = 1000, seed: int = 0):
        """``(mean, lo, hi)``: the plain mean over prompts of ``name``'s per-prompt values and its
        bootstrap interval (the companion of a max over prompts; see :meth:`interval`)."""
        per, _ = self.PER_PROMPT[name]
        values = np.asarray(getattr(self, per), float)
        lo, hi = bootstrap(len(values), lambda idx: values[idx].mean(axis=0), level=level, n_boot=n_boot, seed=seed)
        return values.mean(axis=0), lo, hi

    #: keys of :meth:`facts` that :meth:`intervals` bootstraps over prompts
    INTERVAL_FACTS: ClassVar[tuple] = ()

    def fact_intervals(self, keys, level: float = 0.95, n_boot: int = 1000, seed: int = 0) -> dict:
        """``{key: (lo, hi)}``: the percentile bootstrap interval over prompts of ``facts()[key]`` for every key of
        ``keys``, all read from the same resamples, each recomputed once; a key's interval is the one
        :meth:`interval` gives it alone (undefined resamples left out per key), ``(None, None)`` where it is
        undefined in every resample or the result keeps no per-prompt values."""
        keys = tuple(keys)
        out = dict.fromkeys(keys, (None, None))
        if self.n_prompts and keys:
            facts = lambda r: [np.nan if (v := r.facts()[key]) is None else float(v) for key in keys]  # noqa: E731
            lo, hi = self.interval(facts, level=level, n_boot=n_boot, seed=seed)
            out.update({key: (float(a), float(b)) for key, a, b in zip(keys, np.atleast_1d(lo), np.atleast_1d(hi))
                        if not np.isnan(a)})
        return out

    def intervals(self, level: float = 0.95, n_boot: int = 1000, seed: int = 0) -> dict:
        """``{key_lo, key_hi}`` for every key of :attr:`INTERVAL_FACTS`: the fact recomputed on prompt resamples
        (:meth:`fact_intervals`, rounded to 3 digits; None where undefined, or without per-prompt values)."""
        out = {}
        for key, (lo, hi) in self.fact_intervals(self.INTERVAL_FACTS, level, n_boot, seed).items():
            out[f"{key}_lo"], out[f"{key}_hi"] = (None, None) if lo is None else (round(lo, 3), round(hi, 3))
        return out

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
        """The findings, one line (the page wraps it at its text width: ``_static/book.css``), then how the prompts
        were fitted."""
        return "\n".join(t for t in (self.findings(), self.fitting()) if t)

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
        cls = result_class(doc["kind"])
        with np.load(path.with_suffix(".npz"), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        return cls(meta=doc["meta"], **doc["fields"], **arrays)


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


#: what position 0 holds, as a summary says it (see depthutils.core.prompts.bos_mode)
BOS_NOTES = {"tokenizer": "BOS added by the tokenizer", "prepended": "BOS prepended by depthutils",
             "off": "no BOS (prepend_bos=False)", "unavailable": "no BOS (the tokenizer has none)"}


def context_note(max_tokens: int | None, bos: str | None) -> str:
    """``"max_tokens: 128 tokens; BOS prepended by depthutils"``: the fitting limit and position 0."""
    limit = f"{max_tokens} tokens" if max_tokens else "no context limit"
    return f"max_tokens: {limit}; {BOS_NOTES.get(bos, f'{bos} prepended by depthutils as the start token')}"


def make_meta(handle, *, dataset: str | None, n: int | None, seed: int | None = None, fit=None, **params) -> dict:
    """Metadata every result carries: model, data, fitting, parameters and package versions."""
    return {**handle.meta(), "dataset": dataset, "n": n, "seed": seed,
            "fit": fit.as_dict() if fit is not None else None, "params": params, "versions": versions()}


def describe(prompts) -> tuple[str, int]:
    """(dataset name, n) of a list of prompts."""
    sources = sorted({p.source or "custom" for p in prompts})
    return "+".join(sources), len(prompts)


def halves(values) -> tuple[float, float]:
    """Means over the first and the second half of the layers (the middle layer goes to the first);
    NaN entries (undefined, or left out as structural zeros) are skipped."""
    v = np.asarray(values, float)
    mid = (len(v) + 1) // 2
    with warnings.catch_warnings():  # a half with no defined entry is NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nanmean(v[:mid])), float(np.nanmean(v[mid:]))


def half_sizes(values) -> tuple[int, int]:
    """How many defined (non-NaN) entries each half of :func:`halves` averages."""
    v = np.isfinite(np.asarray(values, float))
    mid = (len(v) + 1) // 2
    return int(v[:mid].sum()), int(v[mid:].sum())


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


def paired_interval(a: "Result", b: "Result", statistic, *, level: float = 0.95, n_boot: int = 1000,
                    seed: int = 0):
    """Bootstrap interval of ``statistic(a) − statistic(b)`` for two results on the *same* prompts
    (each resample draws the same prompt indices for both: a paired bootstrap). None if undefined."""
    if a.n_prompts != b.n_prompts or not a.n_prompts:
        raise DepthError(f"A paired interval needs two results on the same prompts; got {a.n_prompts} and "
                         f"{b.n_prompts} prompts.")

    def diff(idx):
        x, y = statistic(a.resample(idx)), statistic(b.resample(idx))
        return None if x is None or y is None else x - y
    return bootstrap(a.n_prompts, diff, level=level, n_boot=n_boot, seed=seed)
