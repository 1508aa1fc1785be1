"""P2: effective depth from the cosine, KL and top-5-overlap curves (spec §8).

The three metrics are plain functions of a curve, so the book can recompute a
table from cached curves; each returns ``None`` when no layer qualifies.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import hashlib

import numpy as np

from . import data
from ._run import encode_all, progress
from .contributions import contributions
from .curves import ed_cos, ed_kl, ed_overlap, ratio
from .errors import DepthError, NothingFits
from .logit_lens import logit_lens
from .cache import cache_key, cached
from .models import load_model, load_tokenizer, revision_of
from .results import Result, Verdict, context_note, grade

METRICS = ("cos", "kl", "overlap")


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


def effective_depth(model, prompts, *, k: int = 5, max_tokens: int | None = None, n: int | None = None,
                    progress_bar: bool = True) -> EffectiveDepthResult:
    """P2's three effective depths of ``model`` on ``prompts`` (contributions + logit lens).

    A task prompt is context plus gold answer, so a prompt whose answer would fall beyond
    ``max_tokens`` (default: the model's context) is skipped, not cut; ``n`` keeps the first
    ``n`` prompts that fit. The result's ``meta["fit"]`` says how many were used and skipped.
    """
    prompts, _, fit = encode_all(model, prompts, max_tokens=max_tokens, limit=n, rule="skip")
    c = contributions(model, prompts, max_tokens=max_tokens, progress_bar=progress_bar)
    lens = logit_lens(model, prompts, k=k, max_tokens=max_tokens, progress_bar=progress_bar)
    meta = {**c.meta, "fit": fit.as_dict(), "params": {"k": k, "n": n}}
    return EffectiveDepthResult.from_curves(c.mean_cos, lens.kl, lens.overlap, meta)


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
        """The numbers behind the three verdicts (mean ``metric`` ratios, rounded; None: not measurable)."""
        r2 = lambda v: None if v is None else round(v, 2)
        scale = [self.mean_ratio([m], self.tasks, metric) for m in ladder]
        spread = None if None in scale or len(scale) < 2 else max(scale) - min(scale)
        b = self.mean_ratio([base], self.tasks, metric) if base else None
        c = self.mean_ratio([cot], self.tasks, metric) if cot else None
        hard = self.mean_ratio(ladder, ["aime24"], metric) if "aime24" in self.tasks else None
        easy_tasks = [t for t in ("hellaswag", "gsm8k") if t in self.tasks]
        easy = self.mean_ratio(ladder, easy_tasks, metric) if easy_tasks else None
        return {"metric": metric, "scale": [r2(v) for v in scale], "scale_spread": r2(spread),
                "scale_first": r2(scale[0]) if scale else None, "scale_last": r2(scale[-1]) if scale else None,
                "base": r2(b), "cot": r2(c), "cot_gain": r2(None if None in (b, c) else c - b),
                "hard": r2(hard), "easy": r2(easy), "hard_gain": r2(None if None in (hard, easy) else hard - easy)}

    def verdicts(self, ladder, base: str | None = None, cot: str | None = None, metric: str = "kl") -> list[Verdict]:
        """P2's three questions as computed verdicts (on the ``metric`` ratio, averaged over tasks)."""
        f = self.facts(ladder, base, cot, metric)
        fmt = lambda v: "not measurable" if v is None else f"{v:.2f}"
        return [
            Verdict(claim="P2: the effective-depth ratio stays roughly constant as models get deeper.",
                    criterion=f"max − min over {' → '.join(ladder)} of the mean {metric} ratio: shown if ≤ 0.10, "
                              "mixed if ≤ 0.20, not shown above.",
                    outcome=grade(f["scale_spread"], 0.10, 0.20),
                    numbers=f"ratios {' → '.join(fmt(v) for v in f['scale'])}; spread {fmt(f['scale_spread'])}."),
            Verdict(claim="P2: chain-of-thought training does not raise the effective-depth ratio.",
                    criterion=f"mean {metric} ratio of {cot} minus {base}: shown if ≤ 0.05, mixed if ≤ 0.10, "
                              "not shown above.",
                    outcome=grade(f["cot_gain"], 0.05, 0.10),
                    numbers=f"{fmt(f['cot'])} − {fmt(f['base'])} = {fmt(f['cot_gain'])}."),
            Verdict(claim="P2: harder tasks (AIME24) do not use more of the depth than easier ones "
                          "(HellaSwag, GSM8K).",
                    criterion=f"mean {metric} ratio over the ladder on AIME24 minus that on HellaSwag and GSM8K: "
                              "shown if ≤ 0.05, mixed if ≤ 0.10, not shown above.",
                    outcome=grade(f["hard_gain"], 0.05, 0.10),
                    numbers=f"{fmt(f['hard'])} − {fmt(f['easy'])} = {fmt(f['hard_gain'])}."),
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
        return "\n".join(lines)

    def markdown(self) -> str:
        """P2's Table 1 layout: one row per model, ED (ratio) per metric × task; undefined is "—"."""
        rows = []
        for model in self.models:
            cells = [self.cell(model, t, m) for m in METRICS for t in self.tasks]
            rows.append((model, self.n_layers(model), cells))
        return _markdown(self.tasks, rows)


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
    undefined = no_fit = False
    for name, L, cells in rows:
        undefined |= any(ed is None for ed, _ in cells)
        no_fit |= any(ed == NO_FIT for ed, _ in cells)
        text = [f"{UNDEFINED}¹" if ed is None else f"{NO_FIT}²" if ed == NO_FIT else f"{ed} ({rt:.2f})"
                for ed, rt in cells]
        out.append(f"| {name} | {L} | " + " | ".join(text) + " |")
    if undefined:
        out.append("\n¹ undefined: no layer meets the metric's condition (spec §8), so there is no "
                   "effective depth to report (not a 0).")
    if no_fit:
        out.append("\n² not measured: no prompt of this task fits the model's context (max_tokens), "
                   "and a task prompt is never cut (its answer would be lost).")
    return "\n".join(out)
