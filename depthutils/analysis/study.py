"""P2's study: effective depth for a list of models × tasks, cached per model × task, and P2's
published Table 1 beside it (``data/reference``)."""
from __future__ import annotations

import hashlib
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from depthutils import data
from depthutils.analysis.p2_table import (
    NO_FIT,
    NOT_P2,
    P2_TASKS,
    UNDEFINED,
    reference_rows,
    slope,
    table_markdown,
)
from depthutils.core.cache import cache_key, cached
from depthutils.core.errors import DepthError, NothingFits
from depthutils.core.numbers import number
from depthutils.core.progress import progress
from depthutils.core.results import context_note
from depthutils.ladder import registry
from depthutils.measures.effective_depth import METRICS, effective_depth
from depthutils.models.handle import load_model
from depthutils.models.sources import load_tokenizer, revision_of

OWN_TASKS = ("addition", "multihop")


def task_prompts(task: str, tokenizer, *, aime_max_tokens: int = 400):
    """Every candidate prompt of one task of the study, in order (the study keeps the first ones
    that fit the model): P2's three, or the project's held-out generated tasks."""
    if task == "aime24":  # P2: problems of at most 400 tokens
        short = data.aime24(None, max_tokens=aime_max_tokens, tokenizer=tokenizer)
        if not short:
            raise DepthError(f"No AIME24 problem fits in {aime_max_tokens} tokens of this tokenizer; raise aime_max_tokens.")
        return short
    if task in OWN_TASKS:
        return data.load(task, None, heldout=True)
    if task in data.LOADERS:
        return data.load(task, None)
    raise DepthError(f"Unknown task {task!r}; choose from {', '.join(P2_TASKS + OWN_TASKS)} or a data loader name.")


@dataclass
class Study:
    """Effective depth of every model on every task (``results[(model, task)]``)."""

    models: list
    tasks: list
    results: dict
    hits: int = 0
    n_boot: int = 1000
    level: float = 0.95
    _draws: dict = field(default_factory=dict, repr=False)

    def draws(self, model: str, task: str, metric: str) -> np.ndarray | None:
        """The cell's ratio in each of :attr:`n_boot` prompt resamples (NaN where undefined); None if
        the cell was not measured. Every model of a task is resampled with the same seed, so models
        that share the task's prompts are compared prompt for prompt (a paired bootstrap)."""
        r = self.results[(model, task)]
        if r is None or not r.n_prompts:
            return None
        key = (model, task, metric)
        if key not in self._draws:
            self._draws[key] = r.ratio_draws(metric, self.n_boot, seed=zlib.crc32(task.encode()))
        return self._draws[key]

    def _band(self, draws) -> tuple[float, float] | None:
        if draws is None or np.isnan(draws).all():
            return None
        lo, hi = np.nanpercentile(draws, [50 * (1 - self.level), 50 * (1 + self.level)])
        return float(lo), float(hi)

    def cell_interval(self, model: str, task: str, metric: str) -> tuple[float, float] | None:
        """The 95% bootstrap interval of one cell's ratio (None: not measured or never defined)."""
        return self._band(self.draws(model, task, metric))

    def mean_ratio_draws(self, models, tasks, metric: str) -> np.ndarray | None:
        """:meth:`mean_ratio` in each resample (the tasks resampled independently, models paired)."""
        cells = [d for d in (self.draws(m, t, metric) for m in models for t in tasks) if d is not None]
        if not cells:
            return None
        with warnings.catch_warnings():  # a resample where every cell is undefined stays NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(np.stack(cells), axis=0)

    def mean_ratio_interval(self, models, tasks, metric: str) -> tuple[float, float] | None:
        return self._band(self.mean_ratio_draws(models, tasks, metric))

    def difference_interval(self, a: tuple, b: tuple, metric: str) -> tuple[float, float] | None:
        """Interval of ``mean_ratio(*a) − mean_ratio(*b)``; ``a`` and ``b`` are ``(models, tasks)``."""
        da, db = self.mean_ratio_draws(*a, metric), self.mean_ratio_draws(*b, metric)
        return None if da is None or db is None else self._band(da - db)

    def cell(self, model: str, task: str, metric: str) -> tuple[int | str | None, float | None]:
        """(ED, ratio); ED is None when undefined and :data:`NO_FIT` when no prompt fits the model."""
        r = self.results[(model, task)]
        return (NO_FIT, None) if r is None else (r.ed(metric), r.ratio(metric))

    def n_layers(self, model: str) -> int | str:
        measured = [r for (m, _), r in self.results.items() if m == model and r is not None]
        return measured[0].n_layers if measured else "?"

    def mean_ratio(self, models, tasks, metric: str) -> float | None:
        """Mean ratio over the given models × tasks, ignoring undefined cells (None if all are)."""
        vals = [self.results[(m, t)].ratio(metric) for m in models for t in tasks if self.results[(m, t)]]
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
                diff = UNDEFINED if None in (b, c) else number(c - b, "+.2f")
                lines.append(f"   {m:>7}: {fmt(c)} − {fmt(b)} = {diff}")
        lines.append("3. Difficulty: mean ratio over the ladder, by task:")
        for m in METRICS:
            lines.append(f"   {m:>7}: " + ", ".join(f"{t} {fmt(self.mean_ratio(ladder, [t], m))}" for t in self.tasks))
        return "\n".join(lines)

    def facts(self, ladder, base: str | None = None, cot: str | None = None, metric: str = "kl") -> dict:
        """The numbers behind the three verdicts: mean ``metric`` ratios and the differences the verdicts
        judge, each with its bootstrap interval (``*_lo``, ``*_hi``), rounded; None: not measurable.

        Scale compares the ladder models with the largest and the smallest mean ratio (``scale_hi_model``,
        ``scale_lo_model``), and fits the models' mean ED over tasks (``scale_ed``, in layers: mean ratio × L
        − 1) against L by least squares (``scale_ed_slope``, None with fewer than two depths; a resample in
        which a model's ED is undefined on every task leaves the slope out); chain of thought is
        ``cot − base``; difficulty is AIME24 minus the mean of HellaSwag and GSM8K over the ladder.
        """
        r2 = lambda v: None if v is None else round(float(v), 2)
        out = {"metric": metric}

        def put(name, value, band):
            out[name] = r2(value)
            out[f"{name}_lo"], out[f"{name}_hi"] = (None, None) if band is None else (r2(band[0]), r2(band[1]))

        scale = {m: self.mean_ratio([m], self.tasks, metric) for m in ladder}
        for i, m in enumerate(ladder):
            put(f"scale_{i}", scale[m], self.mean_ratio_interval([m], self.tasks, metric))
        out["scale"] = [r2(v) for v in scale.values()]
        defined = {m: v for m, v in scale.items() if v is not None}
        if len(defined) >= 2:
            hi_m, lo_m = max(defined, key=defined.get), min(defined, key=defined.get)
            put("scale_spread", defined[hi_m] - defined[lo_m],
                self.difference_interval(([hi_m], self.tasks), ([lo_m], self.tasks), metric))
            out["scale_hi_model"], out["scale_lo_model"] = hi_m, lo_m
        else:
            put("scale_spread", None, None)
            out["scale_hi_model"] = out["scale_lo_model"] = None
        out["scale_first"], out["scale_last"] = (out["scale"][0], out["scale"][-1]) if ladder else (None, None)
        layers = {m: self.n_layers(m) for m in defined}
        out["scale_ed"] = [r2(defined[m] * layers[m] - 1) if m in defined else None for m in ladder]
        ed_draws = [self.mean_ratio_draws([m], self.tasks, metric) * layers[m] - 1 for m in defined]
        grows = len(set(layers.values())) >= 2
        put("scale_ed_slope", slope(list(layers.values()), [defined[m] * layers[m] - 1 for m in defined])
            if grows else None, self._band(slope(list(layers.values()), ed_draws)) if grows else None)
        out["scale_tokens"] = tokens_note(ladder)
        b = self.mean_ratio([base], self.tasks, metric) if base else None
        c = self.mean_ratio([cot], self.tasks, metric) if cot else None
        put("base", b, self.mean_ratio_interval([base], self.tasks, metric) if base else None)
        put("cot", c, self.mean_ratio_interval([cot], self.tasks, metric) if cot else None)
        put("cot_gain", None if None in (b, c) else c - b,
            self.difference_interval(([cot], self.tasks), ([base], self.tasks), metric) if base and cot else None)
        easy_tasks = [t for t in ("hellaswag", "gsm8k") if t in self.tasks]
        hard = self.mean_ratio(ladder, ["aime24"], metric) if "aime24" in self.tasks else None
        easy = self.mean_ratio(ladder, easy_tasks, metric) if easy_tasks else None
        put("hard", hard, self.mean_ratio_interval(ladder, ["aime24"], metric) if "aime24" in self.tasks else None)
        put("easy", easy, self.mean_ratio_interval(ladder, easy_tasks, metric) if easy_tasks else None)
        put("hard_gain", None if None in (hard, easy) else hard - easy,
            self.difference_interval((ladder, ["aime24"]), (ladder, easy_tasks), metric)
            if hard is not None and easy is not None else None)
        return out

    def fitting(self) -> str:
        """How many prompts each model × task used and skipped (a task prompt is never cut)."""
        lines = [f"Prompts: used (skipped) per task ({', '.join(self.tasks)}):"]
        for model in self.models:
            rs = [self.results[(model, t)] for t in self.tasks]
            cells = [f"{r.meta['fit']['used']} ({r.meta['fit']['skipped']})" if r else "none fits" for r in rs]
            meta = next((r.meta for r in rs if r), {})
            note = context_note(meta.get("fit", {}).get("max_tokens"), meta.get("bos")) if meta else ""
            lines.append(f"   {model}: {', '.join(cells)}" + (f" ({note})" if note else ""))
        tokens = {m: registry.training_tokens(m) for m in self.models}
        if any(t is not None for t in tokens.values()):  # embedded models: is depth the only difference?
            lines.append("Training tokens (model cards): " + ", ".join(
                f"{m} {'unknown' if t is None else f'{t / 1e6:.1f}M'}" for m, t in tokens.items()))
        return "\n".join(lines)

    def markdown(self, intervals: bool = True, reference: Path | None = None, metrics=METRICS) -> str:
        """P2's Table 1 layout: one row per model, ``ED (ratio) [lo–hi]`` per metric × task, the bracket
        being the ratio's bootstrap interval over prompts; undefined is "—". With ``reference`` (P2's table,
        e.g. :data:`REFERENCE_CSV`), P2's published rows follow this run's, in the same columns ("·" for a
        task P2 did not measure). ``metrics`` narrows the table to some of the metrics (one per table keeps
        it within a page's width)."""
        rows = []
        for model in self.models:
            cells = [(*self.cell(model, t, m), self.cell_interval(model, t, m) if intervals else None)
                     for m in metrics for t in self.tasks]
            rows.append((model, self.n_layers(model), cells))
        if reference is not None:
            rows += [(f"P2: {r['model']}", r["layers"],
                      [(int(r[f"{m}_{t}_ed"]), float(r[f"{m}_{t}_ratio"]), None) if t in P2_TASKS else (NOT_P2, None, None)
                       for m in metrics for t in self.tasks])
                     for r in reference_rows(reference)]
        return table_markdown(self.tasks, rows, self.level if intervals else None, metrics)


def tokens_note(models) -> str:
    """Whether ``models`` saw equal training tokens, from the embedded models' cards, as a phrase
    for the reading guide: "equal (14.3M each)", "unequal (ladder-4 14.3M, ...)" or "unknown (...)"."""
    tokens = {m: registry.training_tokens(m) for m in models}
    if not tokens or any(t is None for t in tokens.values()):
        return "unknown (only the embedded models' cards state them)"
    if len(set(tokens.values())) == 1:
        return f"equal ({next(iter(tokens.values())) / 1e6:.1f}M each)"
    return "unequal (" + ", ".join(f"{m} {t / 1e6:.1f}M" for m, t in tokens.items()) + ")"


def study(models, tasks=P2_TASKS + OWN_TASKS, *, n: int = 10, aime_n: int = 5, aime_max_tokens: int = 400,
          k: int = 5, max_tokens: int | None = None, cache_dir: str | Path = "cache", device: str = "auto",
          dtype="auto", remote: bool = False, progress_bar: bool = True) -> Study:
    """P2's effective-depth study. Each model × task is cached; adding a model computes only that model.

    Each task keeps its first ``n`` prompts (AIME24: ``aime_n``) whose answer fits in
    ``max_tokens`` (default: each model's context); a task none of whose prompts fits a
    model is reported as :data:`NO_FIT` for that model, not as a crash.
    """
    if not models or not tasks:
        raise DepthError("study needs at least one model and one task.")
    results, hits = {}, 0
    for model in models:
        tok, rev, handle = load_tokenizer(model), revision_of(model), None
        for task in progress(tasks, f"effective depth · {model}", enabled=progress_bar):
            prompts = task_prompts(task, tok, aime_max_tokens=aime_max_tokens)
            limit = aime_n if task == "aime24" else n
            digest = hashlib.sha256("\x00".join(p.text for p in prompts).encode()).hexdigest()
            key = cache_key(kind="effective_depth", model=model, revision=rev, task=task, prompts=digest,
                            n=limit, k=k, max_tokens=max_tokens, dtype=str(dtype), remote=remote)

            def compute():
                nonlocal handle
                handle = handle or load_model(model, device=device, dtype=dtype, remote=remote)
                r = effective_depth(handle, prompts, k=k, max_tokens=max_tokens, n=limit, progress_bar=False)
                r.meta.update(task=task, dataset=task)
                return r
            slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in model)
            try:
                results[(model, task)], hit = cached(cache_dir, f"ed-{slug}-{task}", key, compute)
            except NothingFits:
                results[(model, task)], hit = None, False
            hits += hit
    return Study(list(models), list(tasks), results, hits)
