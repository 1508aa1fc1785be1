"""P2: effective depth from the cosine, KL and top-5-overlap curves (spec §8).

The three metrics are plain functions of a curve, so the book can recompute a
table from cached curves; each returns ``None`` when no layer qualifies.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import csv
import hashlib
import warnings
import zlib

import numpy as np

from . import data
from ._run import encode_all, progress
from .contributions import contributions_of, prompt_stats
from .curves import ed_cos, ed_kl, ed_overlap, ratio
from .errors import DepthError, NothingFits
from .ladder import registry
from .logit_lens import logit_lens_of, prompt_lens
from .cache import cache_key, cached
from .models import load_model, load_tokenizer, revision_of
from .remote import each
from .results import Result, Verdict, context_note, interval_grade

METRICS = ("cos", "kl", "overlap")


@dataclass
class EffectiveDepthResult(Result):
    """The three per-layer curves (``[L]`` each) and P2's effective depths and ratios.

    The curves are token means; the per-prompt curves behind them (``<curve>_by_prompt``,
    ``[N, L]``, weighed back by ``prompt_tokens``) give each effective depth an interval:
    :meth:`ratio_interval` resamples the prompts, recomputes the curve and its effective depth.
    """

    mean_cos: np.ndarray = None
    kl: np.ndarray = None
    overlap: np.ndarray = None
    ed_cos: int | None = None
    ed_kl: int | None = None
    ed_overlap: int | None = None
    mean_cos_by_prompt: np.ndarray = None
    kl_by_prompt: np.ndarray = None
    overlap_by_prompt: np.ndarray = None
    prompt_tokens: np.ndarray = None
    kind: ClassVar[str] = "effective_depth"
    PER_PROMPT: ClassVar[dict] = {c: (f"{c}_by_prompt", "tokens") for c in ("mean_cos", "kl", "overlap")}

    def with_aggregates(self) -> "EffectiveDepthResult":
        """The curves from the per-prompt curves, then the effective depths from the curves."""
        super().with_aggregates()
        self.ed_cos, self.ed_kl, self.ed_overlap = ed_cos(self.mean_cos), ed_kl(self.kl), ed_overlap(self.overlap)
        return self

    def ratio_interval(self, metric: str, level: float = 0.95, n_boot: int = 1000, seed: int = 0):
        """``(lo, hi)`` of the ``metric`` ratio over prompt resamples (NaN if undefined in all of them)."""
        return self.interval(lambda r: r.ratio(metric), level=level, n_boot=n_boot, seed=seed)

    def ratio_draws(self, metric: str, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
        """The ``metric`` ratio in each of ``n_boot`` prompt resamples (NaN where undefined)."""
        rng = np.random.default_rng(seed)
        n = self.n_prompts
        draws = [self.resample(rng.integers(0, n, n)).ratio(metric) for _ in range(n_boot)]
        return np.array([np.nan if d is None else d for d in draws])

    @property
    def n_layers(self) -> int:
        return len(self.mean_cos)

    def ed(self, metric: str) -> int | None:
        return getattr(self, f"ed_{metric}")

    def ratio(self, metric: str) -> float | None:
        return ratio(self.ed(metric), self.n_layers)

    @classmethod
    def from_curves(cls, mean_cos, kl, overlap, meta: dict | None = None) -> "EffectiveDepthResult":
        """From aggregate curves alone (no per-prompt values, so no intervals)."""
        return cls(meta=meta or {}, mean_cos=np.asarray(mean_cos, float), kl=np.asarray(kl, float),
                   overlap=np.asarray(overlap, float), ed_cos=ed_cos(mean_cos), ed_kl=ed_kl(kl),
                   ed_overlap=ed_overlap(overlap))

    @classmethod
    def from_prompts(cls, contributions, lens, meta: dict | None = None) -> "EffectiveDepthResult":
        """From a contributions and a logit-lens result on the same prompts (per-prompt curves kept)."""
        if not np.array_equal(contributions.prompt_tokens, lens.prompt_tokens):
            raise DepthError("The contributions and the logit lens were measured on different prompts.")
        cos = (contributions.attn_cos_by_prompt + contributions.mlp_cos_by_prompt
               + contributions.layer_cos_by_prompt) / 3
        return cls(meta=meta or {}, mean_cos_by_prompt=cos, kl_by_prompt=lens.kl_by_prompt,
                   overlap_by_prompt=lens.overlap_by_prompt, prompt_tokens=lens.prompt_tokens).with_aggregates()


def _both(model, item) -> tuple:
    """One prompt's contributions and logit-lens statistics (two traces)."""
    return prompt_stats(model, item[0]), prompt_lens(model, item)


def effective_depth(model, prompts, *, k: int = 5, max_tokens: int | None = None, n: int | None = None,
                    progress_bar: bool = True) -> EffectiveDepthResult:
    """P2's three effective depths of ``model`` on ``prompts`` (contributions + logit lens).

    A task prompt is context plus gold answer, so a prompt whose answer would fall beyond
    ``max_tokens`` (default: the model's context) is skipped, not cut; ``n`` keeps the first
    ``n`` prompts that fit. The result's ``meta["fit"]`` says how many were used and skipped.
    """
    prompts, _, fit = encode_all(model, prompts, max_tokens=max_tokens, limit=n, rule="skip")
    prompts, encs, cut = encode_all(model, prompts, max_tokens=max_tokens)  # as the two measurements read them
    both = each(model, _both, [(e, k) for e in encs], "effective depth", enabled=progress_bar)  # NDIF: one request
    c = contributions_of(model, prompts, encs, cut, [b[0] for b in both])
    lens = logit_lens_of(model, prompts, encs, cut, k, [b[1] for b in both])
    meta = {**c.meta, "fit": fit.as_dict(), "params": {"k": k, "n": n}}
    return EffectiveDepthResult.from_prompts(c, lens, meta)


# ---------------------------------------------------------------------------------------
# P2's study: effective depth for a list of models × tasks, cached per model × task

P2_TASKS = ("hellaswag", "gsm8k", "aime24")
PROJECT_TASKS = ("addition", "multihop")
REFERENCE_CSV = Path(__file__).resolve().parents[1] / "data" / "reference" / "p2_effective_depth_table1.csv"
UNDEFINED = "—"
NO_FIT = "n/a"  # a task none of whose prompts fits the model's context


def task_prompts(task: str, tokenizer, *, aime_max_tokens: int = 400):
    """Every candidate prompt of one task of the study, in order (the study keeps the first ones
    that fit the model): P2's three, or the project's held-out generated tasks."""
    if task == "aime24":  # P2: problems of at most 400 tokens
        short = data.aime24(None, max_tokens=aime_max_tokens, tokenizer=tokenizer)
        if not short:
            raise DepthError(f"No AIME24 problem fits in {aime_max_tokens} tokens of this tokenizer; raise aime_max_tokens.")
        return short
    if task in PROJECT_TASKS:
        return data.load(task, None, heldout=True)
    if task in data.LOADERS:
        return data.load(task, None)
    raise DepthError(f"Unknown task {task!r}; choose from {', '.join(P2_TASKS + PROJECT_TASKS)} or a data loader name.")


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
                lines.append(f"   {m:>7}: {fmt(c)} − {fmt(b)} = " + (UNDEFINED if None in (b, c) else f"{c - b:+.2f}"))
        lines.append("3. Difficulty: mean ratio over the ladder, by task:")
        for m in METRICS:
            lines.append(f"   {m:>7}: " + ", ".join(f"{t} {fmt(self.mean_ratio(ladder, [t], m))}" for t in self.tasks))
        return "\n".join(lines)

    def facts(self, ladder, base: str | None = None, cot: str | None = None, metric: str = "kl") -> dict:
        """The numbers behind the three verdicts: mean ``metric`` ratios and the differences the verdicts
        judge, each with its bootstrap interval (``*_lo``, ``*_hi``), rounded; None: not measurable.

        Scale compares the ladder models with the largest and the smallest mean ratio (``scale_hi_model``,
        ``scale_lo_model``); chain of thought is ``cot − base``; difficulty is AIME24 minus the mean of
        HellaSwag and GSM8K over the ladder.
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

    def verdicts(self, ladder, base: str | None = None, cot: str | None = None, metric: str = "kl") -> list[Verdict]:
        """P2's three questions as computed verdicts, each on a difference and its 95% bootstrap interval.

        A claim that a ratio does not change (by more than a tolerance δ) is *shown* when the whole
        interval of the change lies within δ, *not shown* when the whole interval lies beyond δ (a
        change larger than δ, outside the noise), and *mixed* when the interval straddles δ: at this
        number of prompts the run cannot tell.
        """
        f = self.facts(ladder, base, cot, metric)
        fmt = lambda v: "not measurable" if v is None else f"{v:.2f}"
        band = lambda k: "" if f[f"{k}_lo"] is None else f" [{f[f'{k}_lo']:.2f}, {f[f'{k}_hi']:.2f}]"
        pct = f"{100 * self.level:.0f}%"
        scale = " → ".join(f"{m} {fmt(f[f'scale_{i}'])}{band(f'scale_{i}')}" for i, m in enumerate(ladder))
        return [
            Verdict(claim="P2: the effective-depth ratio stays roughly constant as models get deeper.",
                    criterion=f"the largest minus the smallest mean {metric} ratio over {', '.join(ladder)}, with "
                              f"its {pct} bootstrap interval over prompts: shown if the interval lies within 0.10, "
                              "not shown if it lies wholly above 0.10, mixed if it straddles 0.10.",
                    outcome=interval_grade(f["scale_spread"], f["scale_spread_lo"], f["scale_spread_hi"], 0.10),
                    numbers=f"ratios {scale}; {f['scale_hi_model']} − {f['scale_lo_model']} = "
                            f"{fmt(f['scale_spread'])}{band('scale_spread')}."),
            Verdict(claim="P2: chain-of-thought training does not raise the effective-depth ratio.",
                    criterion=f"mean {metric} ratio of {cot} minus {base}, with its {pct} bootstrap interval: shown "
                              "if the interval lies below 0.05, not shown if it lies wholly above 0.05, mixed if it "
                              "straddles 0.05.",
                    outcome=interval_grade(f["cot_gain"], f["cot_gain_lo"], f["cot_gain_hi"], 0.05, two_sided=False),
                    numbers=f"{fmt(f['cot'])} − {fmt(f['base'])} = {fmt(f['cot_gain'])}{band('cot_gain')}."),
            Verdict(claim="P2: harder tasks (AIME24) do not use more of the depth than easier ones "
                          "(HellaSwag, GSM8K).",
                    criterion=f"mean {metric} ratio over the ladder on AIME24 minus that on HellaSwag and GSM8K, "
                              f"with its {pct} bootstrap interval: shown if the interval lies below 0.05, not shown "
                              "if it lies wholly above 0.05, mixed if it straddles 0.05.",
                    outcome=interval_grade(f["hard_gain"], f["hard_gain_lo"], f["hard_gain_hi"], 0.05,
                                           two_sided=False),
                    numbers=f"{fmt(f['hard'])} − {fmt(f['easy'])} = {fmt(f['hard_gain'])}{band('hard_gain')}."),
        ]

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

    def markdown(self, intervals: bool = True) -> str:
        """P2's Table 1 layout: one row per model, ``ED (ratio) [lo–hi]`` per metric × task, the bracket
        being the ratio's bootstrap interval over prompts; undefined is "—"."""
        rows = []
        for model in self.models:
            cells = [(*self.cell(model, t, m), self.cell_interval(model, t, m) if intervals else None)
                     for m in METRICS for t in self.tasks]
            rows.append((model, self.n_layers(model), cells))
        return _markdown(self.tasks, rows, self.level if intervals else None)


def tokens_note(models) -> str:
    """Whether ``models`` saw equal training tokens, from the embedded models' cards, as a phrase
    for the reading guide: "equal (14.3M each)", "unequal (ladder-4 14.3M, ...)" or "unknown (...)"."""
    tokens = {m: registry.training_tokens(m) for m in models}
    if not tokens or any(t is None for t in tokens.values()):
        return "unknown (only the embedded models' cards state them)"
    if len(set(tokens.values())) == 1:
        return f"equal ({next(iter(tokens.values())) / 1e6:.1f}M each)"
    return "unequal (" + ", ".join(f"{m} {t / 1e6:.1f}M" for m, t in tokens.items()) + ")"


def study(models, tasks=P2_TASKS + PROJECT_TASKS, *, n: int = 10, aime_n: int = 5, aime_max_tokens: int = 400,
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


def _reference_rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def reference_table(path: Path = REFERENCE_CSV) -> str:
    """P2's published Table 1 as markdown, in the same layout as :meth:`Study.markdown`."""
    rows = [(r["model"], r["layers"], [(int(r[f"{m}_{t}_ed"]), float(r[f"{m}_{t}_ratio"]), None)
                                       for m in METRICS for t in P2_TASKS])
            for r in _reference_rows(path)]
    return _markdown(list(P2_TASKS), rows)


def reference_facts(path: Path = REFERENCE_CSV) -> dict:
    """The band of P2's published ratios, for the reading guide: for each metric, the smallest and the
    largest per-model median ratio over P2's three tasks (``{metric}_lo``, ``{metric}_hi``)."""
    rows, out = _reference_rows(path), {}
    for m in METRICS:
        medians = [float(np.median([float(r[f"{m}_{t}_ratio"]) for t in P2_TASKS])) for r in rows]
        out[f"{m}_lo"], out[f"{m}_hi"] = round(min(medians), 2), round(max(medians), 2)
    return out


def _markdown(tasks, rows, level: float | None = None) -> str:
    """A markdown table: ``rows`` of (model, L, [(ED, ratio, interval or None) per metric × task]);
    None is "—" + footnote; ``level`` names the intervals' level in a footnote."""
    out = ["| model | L | " + " | ".join(f"{m} · {t}" for m in METRICS for t in tasks) + " |",
           "|" + "---|" * (2 + len(METRICS) * len(tasks))]
    undefined = no_fit = False
    band = lambda iv: "" if iv is None else f" [{iv[0]:.2f}–{iv[1]:.2f}]"
    for name, L, cells in rows:
        undefined |= any(ed is None for ed, _, _ in cells)
        no_fit |= any(ed == NO_FIT for ed, _, _ in cells)
        text = [f"{UNDEFINED}¹" if ed is None else f"{NO_FIT}²" if ed == NO_FIT else f"{ed} ({rt:.2f}){band(iv)}"
                for ed, rt, iv in cells]
        out.append(f"| {name} | {L} | " + " | ".join(text) + " |")
    if level is not None:
        out.append(f"\nED (ratio) [interval]: the bracket is the ratio's {100 * level:.0f}% percentile bootstrap "
                   "interval over the task's prompts (resample the prompts, recompute the curve and its ED); "
                   "where ED is undefined in some resamples, the interval is over the others.")
    if undefined:
        out.append("\n¹ undefined: no layer meets the metric's condition (spec §8), so there is no "
                   "effective depth to report (not a 0).")
    if no_fit:
        out.append("\n² not measured: no prompt of this task fits the model's context (max_tokens), "
                   "and a task prompt is never cut (its answer would be lost).")
    return "\n".join(out)
