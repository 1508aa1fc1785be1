"""P2's study: effective depth for a list of models × tasks, cached per model × task, and P2's
published Table 1 beside it (``data/reference``)."""
from __future__ import annotations

import csv
import hashlib
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from depthutils import data
from depthutils.core.cache import cache_key, cached
from depthutils.core.errors import DepthError, NothingFits
from depthutils.core.numbers import number
from depthutils.core.progress import progress
from depthutils.core.results import context_note
from depthutils.ladder import registry
from depthutils.measures.curves import OVERLAP_THRESHOLD
from depthutils.measures.effective_depth import METRICS, effective_depth
from depthutils.models.handle import load_model
from depthutils.models.sources import load_tokenizer, revision_of

P2_TASKS = ("hellaswag", "gsm8k", "aime24")
OWN_TASKS = ("addition", "multihop")
REFERENCE_CSV = Path(__file__).resolve().parents[2] / "data" / "reference" / "p2_effective_depth_table1.csv"
UNDEFINED = "—"
NO_FIT = "n/a"  # a task none of whose prompts fits the model's context
NOT_P2 = "·"    # a task P2's Table 1 does not have


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
                     for r in _reference_rows(reference)]
        return _markdown(self.tasks, rows, self.level if intervals else None, metrics)


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


def slope(x, ys) -> float | np.ndarray:
    """The least-squares slope of ``ys`` against ``x``: ``ys`` one value per ``x`` (a float), or one array of
    draws per ``x`` (an array, one slope per draw; NaN where a draw is NaN at some ``x``)."""
    x = np.asarray(x, float)
    y = np.asarray(ys, float).reshape(len(x), -1)
    b = ((x - x.mean())[:, None] * (y - y.mean(axis=0))).sum(axis=0) / ((x - x.mean()) ** 2).sum()
    return float(b[0]) if np.ndim(ys) == 1 else b


def _reference_rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def reference_table(path: Path = REFERENCE_CSV) -> str:
    """P2's published Table 1 as markdown, in the same layout as :meth:`Study.markdown`."""
    rows = [(r["model"], r["layers"], [(int(r[f"{m}_{t}_ed"]), float(r[f"{m}_{t}_ratio"]), None)
                                       for m in METRICS for t in P2_TASKS])
            for r in _reference_rows(path)]
    return _markdown(list(P2_TASKS), rows)


def reference_spread(metric: str, path: Path = REFERENCE_CSV, family: str = "Qwen2.5-{}-Instruct") -> float:
    """P2's own "stable" across scale: the largest minus the smallest mean ``metric`` ratio (over P2's three
    tasks) of one model family across its sizes in Table 1 (default: Qwen2.5-Instruct, 1.5B to 32B, the one
    plain Qwen2.5 family P2 gives at all four sizes). Chapter 9 grades the ladder's spread against it."""
    rows = [r for r in _reference_rows(path)
            if any(r["model"] == family.format(size) for size in ("1.5B", "7B", "14B", "32B"))]
    if len(rows) < 2:
        raise DepthError(f"P2's table at {path} has fewer than two sizes of {family.format('*')}.")
    means = [np.mean([float(r[f"{metric}_{t}_ratio"]) for t in P2_TASKS]) for r in rows]
    return round(float(max(means) - min(means)), 3)


def reference_floor_cells(metric: str = "kl", path: Path = REFERENCE_CSV) -> list[tuple[str, str, int]]:
    """The cells of P2's Table 1 whose ``metric`` ED is at layer 1 or below, (model, task, ED): where, on P2's own
    models, the KL curve is halved by the first layer, as on a curve whose maximum sits at ``h_0``."""
    return [(r["model"], t, int(r[f"{metric}_{t}_ed"])) for r in _reference_rows(path) for t in P2_TASKS
            if int(r[f"{metric}_{t}_ed"]) <= 1]


def reference_cells(metric: str, path: Path = REFERENCE_CSV) -> list[tuple[str, str, float]]:
    """Every cell of P2's Table 1 for ``metric``: (model, task, ratio), in the table's order."""
    return [(r["model"], t, float(r[f"{metric}_{t}_ratio"])) for r in _reference_rows(path) for t in P2_TASKS]


def reference_facts(path: Path = REFERENCE_CSV) -> dict:
    """The band of P2's published ratios, for the reading guide: for each metric, the smallest and the
    largest per-model median ratio over P2's three tasks (``{metric}_lo``, ``{metric}_hi``), the spread and
    the ED slope of :func:`reference_gains` (``{metric}_spread``, ``{metric}_ed_slope``); P2's largest
    base-to-long-CoT rise (:func:`reference_cot_tolerance`: ``cot_rise``, ``cot_rise_metric``,
    ``cot_rise_size``); and P2's overlap threshold (``overlap_threshold``)."""
    rows, out = _reference_rows(path), {"overlap_threshold": OVERLAP_THRESHOLD}
    for m in METRICS:
        medians = [float(np.median([float(r[f"{m}_{t}_ratio"]) for t in P2_TASKS])) for r in rows]
        out[f"{m}_lo"], out[f"{m}_hi"] = round(min(medians), 2), round(max(medians), 2)
        gains = reference_gains(m, path)
        out[f"{m}_spread"], out[f"{m}_ed_slope"] = gains["scale_spread"], round(gains["scale_ed_slope"], 2)
    out["cot_rise"], out["cot_rise_metric"], out["cot_rise_size"] = reference_cot_tolerance(path)
    return out


def _markdown(tasks, rows, level: float | None = None, metrics=METRICS) -> str:
    """A markdown table: ``rows`` of (model, L, [(ED, ratio, interval or None) per metric × task]);
    None is "—" + footnote; ``level`` names the intervals' level in a footnote."""
    out = ["| model | L | " + " | ".join(f"{m} · {t}" if len(metrics) > 1 else t for m in metrics for t in tasks) + " |",
           "|" + "---|" * (2 + len(metrics) * len(tasks))]
    undefined = no_fit = False
    band = lambda iv: "" if iv is None else f" [{iv[0]:.2f}–{iv[1]:.2f}]"
    for name, L, cells in rows:
        undefined |= any(ed is None for ed, _, _ in cells)
        no_fit |= any(ed == NO_FIT for ed, _, _ in cells)
        text = [f"{UNDEFINED}¹" if ed is None else f"{NO_FIT}²" if ed == NO_FIT else NOT_P2 if ed == NOT_P2
                else f"{ed} ({rt:.2f}){band(iv)}"
                for ed, rt, iv in cells]
        out.append(f"| {name} | {L} | " + " | ".join(text) + " |")
    if level is not None:
        out.append(f"\nED (ratio) [interval]: the bracket is the ratio's {100 * level:.0f}% percentile bootstrap "
                   "interval over the task's prompts (resample the prompts, recompute the curve and its ED); "
                   "where ED is undefined in some resamples, the interval is over the others.")
    if undefined:
        out.append("\n¹ undefined: no layer meets the metric's condition (the definitions under Measure), so there is no "
                   "effective depth to report (not a 0).")
    if no_fit:
        out.append("\n² not measured: no prompt of this task fits the model's context (max_tokens), "
                   "and a task prompt is never cut (its answer would be lost).")
    return "\n".join(out)


#: P2's long-CoT models in Table 1 and the base each was distilled from, by size (Qwen2.5-Math at 1.5B and 7B)
REFERENCE_COT = {"1.5B": ("DS-R1-Qwen-1.5B", "Qwen2.5-Math-1.5B"), "7B": ("DS-R1-Qwen-7B", "Qwen2.5-Math-7B"),
                 "14B": ("DS-R1-Qwen-14B", "Qwen2.5-14B"), "32B": ("DS-R1-Qwen-32B", "Qwen2.5-32B")}


def reference_gains(metric: str, path: Path = REFERENCE_CSV, family: str = "Qwen2.5-{}-Instruct") -> dict:
    """P2's own values, from Table 1, of the statistics chapter 9 grades, for ``metric``:
    ``scale_spread`` (:func:`reference_spread`), ``scale_ed_slope`` (over ``family``'s sizes, the
    least-squares slope of the mean ED over P2's tasks against L), ``cot_gain`` (per size of
    :data:`REFERENCE_COT`, the long-CoT model's mean ratio over P2's tasks minus its base's; sizes missing
    from the table are left out) and ``hard_gain`` (over ``family``'s sizes, the mean AIME24 ratio minus the
    mean HellaSwag and GSM8K ratio), rounded to 3 decimals."""
    rows = {r["model"]: r for r in _reference_rows(path)}
    mean = lambda r, tasks: float(np.mean([float(r[f"{metric}_{t}_ratio"]) for t in tasks]))  # noqa: E731
    cot = {size: round(mean(rows[c], P2_TASKS) - mean(rows[b], P2_TASKS), 3)
           for size, (c, b) in REFERENCE_COT.items() if c in rows and b in rows}
    ladder = [rows[family.format(s)] for s in ("1.5B", "7B", "14B", "32B") if family.format(s) in rows]
    hard = (round(float(np.mean([mean(r, ["aime24"]) for r in ladder])
                        - np.mean([mean(r, ["hellaswag", "gsm8k"]) for r in ladder])), 3) if ladder else None)
    ed = lambda r: float(np.mean([int(r[f"{metric}_{t}_ed"]) for t in P2_TASKS]))  # noqa: E731
    grows = round(slope([int(r["layers"]) for r in ladder], [ed(r) for r in ladder]), 3) if len(ladder) >= 2 else None
    return {"scale_spread": reference_spread(metric, path, family), "scale_ed_slope": grows, "cot_gain": cot,
            "hard_gain": hard}


def reference_cot_tolerance(path: Path = REFERENCE_CSV) -> tuple[float, str, str]:
    """P2's largest rise of the mean ratio from a base model to its long-CoT model in Table 1, over the pairs
    of :data:`REFERENCE_COT` and the three metrics, all of which P2 reads as “no significant difference”
    (§4.2): ``(rise, metric, size)``, the rise rounded to 3 decimals."""
    rises = [(gain, m, size) for m in METRICS for size, gain in reference_gains(m, path)["cot_gain"].items()]
    return max(rises)


def cot_pairs(path: Path = REFERENCE_CSV) -> list[tuple[str, str]]:
    """P2's base and long-CoT pairs (:data:`REFERENCE_COT`) as hub ids read from its Table 1: (base, CoT), by size."""
    hub = {r["model"]: r["hf_id"] for r in _reference_rows(path)}
    return [(hub[base], hub[cot]) for cot, base in REFERENCE_COT.values() if base in hub and cot in hub]
