"""P2: effective depth from the cosine, KL and top-5-overlap curves (spec §8).

The three metrics are plain functions of a curve, so the book can recompute a
table from cached curves; each returns ``None`` when no layer qualifies.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from .errors import DepthError
from .results import Result

METRICS = ("cos", "kl", "overlap")


def ed_cos(mean_cos) -> int | None:
    """The last ``l`` with ``c̄_l < 0`` and ``c̄_{l+1} ≥ 0``; None if there is none."""
    c = np.asarray(mean_cos, dtype=float)
    hits = [l for l in range(len(c) - 1) if c[l] < 0 <= c[l + 1]]
    return hits[-1] if hits else None


def ed_kl(kl) -> int | None:
    """The first ``l`` with ``KL_l < 0.5 · max KL``; None if there is none."""
    v = np.asarray(kl, dtype=float)
    if v.size == 0 or not np.isfinite(v).all():
        return None
    hits = np.flatnonzero(v < 0.5 * v.max())
    return int(hits[0]) if hits.size else None


def ed_overlap(overlap, threshold: float = 0.3) -> int | None:
    """The first ``l`` with ``overlap_l > threshold`` (P2: 0.3); None if there is none."""
    hits = np.flatnonzero(np.asarray(overlap, dtype=float) > threshold)
    return int(hits[0]) if hits.size else None


def ratio(ed: int | None, n_layers: int) -> float | None:
    """``(ED + 1) / L``, or None when ED is undefined."""
    return None if ed is None else (ed + 1) / n_layers


@dataclass
class EffectiveDepthResult(Result):
    """The three per-layer curves (``[L]`` each) and P2's effective depths and ratios."""

    mean_cos: np.ndarray = None
    kl: np.ndarray = None
    overlap: np.ndarray = None
    ed_cos: int | None = None
    ed_kl: int | None = None
    ed_overlap: int | None = None
    kind: ClassVar[str] = "effective_depth"

    @property
    def n_layers(self) -> int:
        return len(self.mean_cos)

    def ed(self, metric: str) -> int | None:
        return getattr(self, f"ed_{metric}")

    def ratio(self, metric: str) -> float | None:
        return ratio(self.ed(metric), self.n_layers)

    @classmethod
    def from_curves(cls, mean_cos, kl, overlap, meta: dict | None = None) -> "EffectiveDepthResult":
        return cls(meta=meta or {}, mean_cos=np.asarray(mean_cos, float), kl=np.asarray(kl, float),
                   overlap=np.asarray(overlap, float), ed_cos=ed_cos(mean_cos), ed_kl=ed_kl(kl),
                   ed_overlap=ed_overlap(overlap))


def effective_depth(model, prompts, *, k: int = 5, progress_bar: bool = True) -> EffectiveDepthResult:
    """P2's three effective depths of ``model`` on ``prompts`` (contributions + logit lens)."""
    from .contributions import contributions
    from .logit_lens import logit_lens

    c = contributions(model, prompts, progress_bar=progress_bar)
    lens = logit_lens(model, prompts, k=k, progress_bar=progress_bar)
    meta = {**c.meta, "params": {"k": k}}
    return EffectiveDepthResult.from_curves(c.mean_cos, lens.kl, lens.overlap, meta)


# ---------------------------------------------------------------------------------------
# P2's study: effective depth for a list of models × tasks, cached per model × task

P2_TASKS = ("hellaswag", "gsm8k", "aime24")
PROJECT_TASKS = ("addition", "multihop")
REFERENCE_CSV = Path(__file__).resolve().parents[1] / "data" / "reference" / "p2_effective_depth_table1.csv"
UNDEFINED = "—"


def task_prompts(task: str, n: int, tokenizer, *, aime_n: int = 5, aime_max_tokens: int = 400):
    """The prompts of one task of the study: P2's three, or the project's held-out generated tasks."""
    from . import data

    if task == "aime24":  # P2: 5 problems of at most 400 tokens (fewer if fewer qualify)
        short = data.aime24(None, max_tokens=aime_max_tokens, tokenizer=tokenizer)
        if not short:
            raise DepthError(f"No AIME24 problem fits in {aime_max_tokens} tokens of this tokenizer; raise aime_max_tokens.")
        return short[:aime_n]
    if task in PROJECT_TASKS:
        return data.load(task, n, heldout=True)
    if task in data.LOADERS:
        return data.load(task, n)
    raise DepthError(f"Unknown task {task!r}; choose from {', '.join(P2_TASKS + PROJECT_TASKS)} or a data loader name.")


@dataclass
class Study:
    """Effective depth of every model on every task (``results[(model, task)]``)."""

    models: list
    tasks: list
    results: dict
    hits: int = 0

    def cell(self, model: str, task: str, metric: str) -> tuple[int | None, float | None]:
        r = self.results[(model, task)]
        return r.ed(metric), r.ratio(metric)

    def mean_ratio(self, models, tasks, metric: str) -> float | None:
        """Mean ratio over the given models × tasks, ignoring undefined cells (None if all are)."""
        vals = [self.results[(m, t)].ratio(metric) for m in models for t in tasks]
        vals = [v for v in vals if v is not None]
        return float(np.mean(vals)) if vals else None

    def answers(self, ladder, base: str | None = None, cot: str | None = None) -> str:
        """P2's three questions, answered with this study's numbers (mean ratios; '—' if undefined)."""
        fmt = lambda v: UNDEFINED if v is None else f"{v:.2f}"
        lines = ["1. Scale: mean ratio over tasks, by model (" + " → ".join(ladder) + "):"]
        for m in METRICS:
            lines.append(f"   {m:>7}: " + " → ".join(fmt(self.mean_ratio([x], self.tasks, m)) for x in ladder))
        if base and cot:
            lines.append(f"2. Chain of thought: mean ratio of {cot} minus {base}:")
            for m in METRICS:
                b, c = self.mean_ratio([base], self.tasks, m), self.mean_ratio([cot], self.tasks, m)
                lines.append(f"   {m:>7}: {fmt(c)} − {fmt(b)} = " + (UNDEFINED if None in (b, c) else f"{c - b:+.2f}"))
        lines.append("3. Difficulty: mean ratio over the ladder, by task:")
        for m in METRICS:
            lines.append(f"   {m:>7}: " + ", ".join(f"{t} {fmt(self.mean_ratio(ladder, [t], m))}" for t in self.tasks))
        return "\n".join(lines)

    def markdown(self) -> str:
        """P2's Table 1 layout: one row per model, ED (ratio) per metric × task; undefined is "—"."""
        rows = []
        for model in self.models:
            cells = [self.cell(model, t, m) for m in METRICS for t in self.tasks]
            rows.append((model, self.results[(model, self.tasks[0])].n_layers, cells))
        return _markdown(self.tasks, rows)


def study(models, tasks=P2_TASKS + PROJECT_TASKS, *, n: int = 10, aime_n: int = 5, aime_max_tokens: int = 400,
          k: int = 5, cache_dir: str | Path = "cache", device: str = "auto", dtype="auto", remote: bool = False,
          progress_bar: bool = True) -> Study:
    """P2's effective-depth study. Each model × task is cached; adding a model computes only that model."""
    import hashlib

    from ._run import progress
    from .cache import cache_key, cached
    from .models import load_model, load_tokenizer, revision_of

    if not models or not tasks:
        raise DepthError("study needs at least one model and one task.")
    results, hits = {}, 0
    for model in models:
        tok, rev, handle = load_tokenizer(model), revision_of(model), None
        for task in progress(tasks, f"effective depth · {model}", enabled=progress_bar):
            prompts = task_prompts(task, n, tok, aime_n=aime_n, aime_max_tokens=aime_max_tokens)
            digest = hashlib.sha256("\x00".join(p.text for p in prompts).encode()).hexdigest()
            key = cache_key(kind="effective_depth", model=model, revision=rev, task=task, prompts=digest,
                            n=len(prompts), k=k, dtype=str(dtype), remote=remote)

            def compute():
                nonlocal handle
                handle = handle or load_model(model, device=device, dtype=dtype, remote=remote)
                r = effective_depth(handle, prompts, k=k, progress_bar=False)
                r.meta.update(task=task, dataset=task)
                return r
            slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in model)
            results[(model, task)], hit = cached(cache_dir, f"ed-{slug}-{task}", key, compute)
            hits += hit
    return Study(list(models), list(tasks), results, hits)


def reference_table(path: Path = REFERENCE_CSV) -> str:
    """P2's published Table 1 as markdown, in the same layout as :meth:`Study.markdown`."""
    import csv

    rows = [(r["model"], r["layers"], [(int(r[f"{m}_{t}_ed"]), float(r[f"{m}_{t}_ratio"]))
                                       for m in METRICS for t in P2_TASKS])
            for r in csv.DictReader(path.open())]
    return _markdown(list(P2_TASKS), rows)


def _markdown(tasks, rows) -> str:
    """A markdown table: ``rows`` of (model, L, [(ED, ratio) per metric × task]); None is "—" + footnote."""
    out = ["| model | L | " + " | ".join(f"{m} · {t}" for m in METRICS for t in tasks) + " |",
           "|" + "---|" * (2 + len(METRICS) * len(tasks))]
    undefined = False
    for name, L, cells in rows:
        undefined |= any(ed is None for ed, _ in cells)
        text = [f"{UNDEFINED}¹" if ed is None else f"{ed} ({rt:.2f})" for ed, rt in cells]
        out.append(f"| {name} | {L} | " + " | ".join(text) + " |")
    if undefined:
        out.append("\n¹ undefined: no layer meets the metric's condition (spec §8), so there is no "
                   "effective depth to report (not a 0).")
    return "\n".join(out)
