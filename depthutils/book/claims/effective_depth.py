"""Chapter 9's three claims (P2: effective depth across model size, long chain of thought and task difficulty):
their verdicts, graded together on every informative metric, and their figures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import seaborn as sns
from matplotlib.lines import Line2D

from depthutils.analysis.p2_table import reference_spread
from depthutils.analysis.study import METRICS, Study
from depthutils.book.claim_table import CLAIMS, GROWS, LEVEL, SCALE_WORDS, Claim
from depthutils.book.claims import degenerate, degenerate_sentence
from depthutils.book.grading import COMBINED, Verdict, combine, grade, interval_text, not_tested, verdict_of
from depthutils.book.plotstyle import integer_ticks, lines, long_form, subplots, yerr
from depthutils.core.depth import layer_depth
from depthutils.core.numbers import enclose, listing, plain

__all__ = ["cot_figure", "curves_figure", "ratio_figure", "verdicts"]


def _grows(slope, lo, hi) -> str:
    """The ED-against-L slope graded against :data:`GROWS`: shown if its interval lies wholly above 0, not
    shown if wholly at or below it, mixed otherwise (:func:`grade` with the boundary on the other side: a
    slope exactly 0, an ED that does not grow, is no rise); the interval widened to hold the slope, as printed."""
    if slope is None:
        return "not tested"
    lo, hi = (slope, slope) if lo is None or hi is None else enclose(slope, lo, hi)
    return "shown" if lo > GROWS.value else "not shown" if hi <= GROWS.value else "mixed"


def _scale_criterion(c: Claim) -> str:
    """The scale claim's two-part rule in words, with each metric's tolerance and P2's words on that metric."""
    groups = {}  # the metrics P2 speaks of in the same words share them
    for m in METRICS:
        groups.setdefault(SCALE_WORDS[m], []).append(f"{m} {reference_spread(m):.3f}")
    tolerances = "; ".join(f"{', '.join(ms)} ({words})" for words, ms in groups.items())
    return (f"{c.statistic}, per metric (cos, KL, overlap) that is informative for the models compared, with its "
            f"{100 * LEVEL:.0f}% bootstrap interval over prompts. ED grows: shown if the slope's interval lies wholly "
            f"above 0, not shown if wholly at or below 0, mixed otherwise ({GROWS.source}). The ratio is stable: "
            f"shown if the spread's interval lies at or below the metric's tolerance, not shown if wholly above it, "
            f"mixed otherwise; the tolerance is {c.shown.source}: {tolerances}. Metrics are combined within each "
            f"part, and the two parts into the claim: {COMBINED}.")


def verdicts(study: Study, ladder, base: str | None = None, cot: str | None = None) -> dict[str, Verdict]:
    """Chapter 9: P2's three questions, each graded on every metric that is informative for the models compared.
    Scale is graded in two parts, ED grows with L (:func:`_grows`) and the ratio is stable (within P2's own
    spread of that metric), and is shown only if both are."""
    step = lambda models: float(np.mean([1.0 / study.n_layers(m) for m in models]))
    easy = [t for t in ("hellaswag", "gsm8k") if t in study.tasks]
    questions = {
        "scale": (ladder if len(ladder) >= 2 else None, study.tasks, reference_spread),
        "cot": ([base, cot] if base and cot else None, study.tasks, lambda m: CLAIMS["cot"].shown.value),
        "difficulty": (ladder if easy and "aime24" in study.tasks else None, easy + ["aime24"], lambda m: step(ladder)),
    }
    why_not = {"scale": "needs at least two ladder models", "cot": "needs a base and a chain-of-thought model",
               "difficulty": "needs AIME24 and HellaSwag or GSM8K"}
    out = {}
    for name, (models, tasks, tol) in questions.items():
        c = CLAIMS[name]
        key = c.fact.split(", ")[-1]
        if models is None:
            out[name] = not_tested(name, f"this run {why_not[name]}.")
            continue
        grades, parts, notes, values = [], [], [], []
        growth, grown, grown_values = [], [], []  # scale only: does ED grow with L
        for metric in METRICS:
            why = degenerate(study, models, tasks, metric)
            if why:
                notes.append(degenerate_sentence(metric, why))
                continue
            f = study.facts(ladder, base, cot, metric)
            t = tol(metric)
            g = grade(f[key], f[f"{key}_lo"], f[f"{key}_hi"], t, t)
            grades.append(g)
            parts.append(f"{metric}: {interval_text(f[key], f[f'{key}_lo'], f[f'{key}_hi'])} against {t:.2f} ({g})")
            values.append(f"{metric} {interval_text(f[key], f[f'{key}_lo'], f[f'{key}_hi'], '+.2f')}")
            if name == "scale":
                slope = interval_text(f["scale_ed_slope"], f["scale_ed_slope_lo"], f["scale_ed_slope_hi"], "+.2f")
                growth.append(_grows(f["scale_ed_slope"], f["scale_ed_slope_lo"], f["scale_ed_slope_hi"]))
                mean_ed = listing(plain(ed, 2) for ed in f["scale_ed"])
                grown.append(f"{metric}: {slope} layers per layer, mean ED {mean_ed} ({growth[-1]})")
                grown_values.append(f"{metric} {slope}")
        numbers = "; ".join(parts) or "no metric is informative"
        outcome = combine(grades)
        value = "; ".join(values)
        criterion = (f"{c.statistic}, per metric (cos, KL, overlap) that is informative for the models compared, "
                     f"with its {100 * LEVEL:.0f}% bootstrap interval over prompts: shown if it lies at or below the "
                     f"tolerance{'' if c.shown.value is None else f', {c.shown.value:.2f}'} ({c.shown.source}), "
                     f"not shown if wholly above it, mixed otherwise; metrics combined: {COMBINED}.")
        if name == "scale":
            numbers = (f"ED against L: {'; '.join(grown) or 'no metric is informative'}; ED grows: "
                       f"{combine(growth)}. Ratio spread: {numbers}; ratio stable: {outcome}")
            value = f"ED slope: {', '.join(grown_values)}; ratio spread: {', '.join(values)}"
            outcome = combine([combine(growth), outcome])
            criterion = _scale_criterion(c)
        if outcome == "not tested":
            notes.append("No metric is informative for these models, so this run cannot test the claim.")
        out[name] = verdict_of(c, outcome, numbers + ".", notes, value=value, criterion=criterion)
    out["scale"].also = [out["cot"], out["difficulty"]]  # the chapter's one paper-vs-run table shows all three
    return out


#: each metric's axis label
METRIC_LABELS = {"cos": "mean cosine c̄_l", "kl": "KL(q_l ‖ q_L) / max", "overlap": "top-5 overlap"}


def curves_figure(study, task: str):
    """The per-layer curves behind one task's effective depths, one panel per metric: each model's
    token-weighted mean curve with its 95% band over prompts (KL divided by its curve's max), the
    metric's threshold (dashed) and each model's effective depth (dotted)."""
    fig, axes = subplots(1, 3, height=3.6, sharex=True)
    colors = dict(zip(study.models, sns.color_palette("tab10", len(study.models))))
    for model in study.models:
        r = study.results[(model, task)]
        if r is None:  # no prompt of this task fits the model's context
            continue
        x = layer_depth(np.arange(r.n_layers), r.n_layers)
        for ax, curve, metric in zip(axes, ("mean_cos", "kl", "overlap"), METRICS):
            df = long_form(r, {curve: model}, x=x)
            if curve == "kl" and r.kl.max() > 0:
                df["value"] /= r.kl.max()
            lines(ax, df, {model: colors[model]}, legend=False)
            ed = r.ed(metric)
            if ed is not None:
                ax.axvline(layer_depth(ed, r.n_layers), color=colors[model], ls=":", lw=1)
    for ax, metric, thr in zip(axes, METRICS, (0.0, 0.5, 0.3)):
        ax.axhline(thr, color="k", lw=0.8, ls="--")
        ax.set(xlabel="(l + 1) / L, lens on hₗ", ylabel=METRIC_LABELS[metric], title=f"ED from {metric}")
    handles = [Line2D([], [], color=colors[m], marker="o", ms=4, label=m) for m in study.models]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(4, len(handles)))
    fig.suptitle(f"{task}: P2's three metrics per layer l (read at its input hₗ), at relative depth (l + 1) / L\n"
                 "dashed: threshold; dotted: "
                 "each model's ED; bands: 95% CI over prompts")
    return fig


def ratio_figure(study, models, uncontrolled=None):
    """P2's scale question: effective-depth ratio against the number of layers, per metric and task,
    with each cell's 95% bootstrap interval over prompts. ``uncontrolled`` (a study of other models, e.g. the
    real pretrained ones) adds their cells as hollow markers: other data, training and tokenizer, so they are
    shown beside the controlled ladder, never joined to it."""
    fig, axes = subplots(1, 3, height=3.8, sharey=True)
    depths = [study.n_layers(m) for m in models]
    extra = list(uncontrolled.models) if uncontrolled is not None else []
    for ax, metric in zip(axes, METRICS):
        for j, task in enumerate(study.tasks):
            ratios = [study.cell(m, task, metric)[1] for m in models]
            bands = [study.cell_interval(m, task, metric) for m in models]
            shift = (j - (len(study.tasks) - 1) / 2) * 0.12  # keep the bars of different tasks apart
            line = ax.errorbar(np.array(depths, float) + shift, [np.nan if r is None else r for r in ratios],
                               yerr=yerr(ratios, bands), marker="o", ms=4, capsize=2, label=task)
            for m in (extra if extra and task in uncontrolled.tasks else []):
                r = uncontrolled.cell(m, task, metric)[1]
                if r is not None:
                    ax.errorbar([uncontrolled.n_layers(m) + shift], [r], yerr=yerr([r], [uncontrolled.cell_interval(m, task, metric)]),
                                marker="D", ms=5, mfc="none", ls="none", capsize=2, color=line[0].get_color())
        ax.set(xlabel="layers L", title=f"ED from {metric}", ylim=(0, 1.05))
        integer_ticks(ax)
    axes[0].set_ylabel("ratio (ED + 1) / L")
    handles, labels = axes[0].get_legend_handles_labels()
    if extra:  # one line a model, named by its folder's or hub id's last part: the legend fits the column
        handles.append(Line2D([], [], marker="D", mfc="none", ls="none", color="0.3",
                              label="\n".join(["real models (uncontrolled):"]
                                              + [f"{Path(m).name} (L = {uncontrolled.n_layers(m)})" for m in extra])))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(3, len(handles)))
    fig.suptitle("Does effective depth keep up with total depth?\n(bars: 95% bootstrap CI over prompts; "
                 "missing points: undefined)")
    return fig


def cot_figure(study, base: str, cot: str):
    """P2's training question: effective-depth ratio of a base model and its CoT fine-tune, with 95% CIs;
    one panel per metric, and an undefined effective depth written as such, not drawn as a bar of 0."""
    fig, axes = subplots(1, 3, height=3.8, sharey=True)
    x = np.arange(len(study.tasks))
    for ax, metric in zip(axes, METRICS):
        for off, name, color in ((-0.2, base, "C0"), (0.2, cot, "C1")):
            vals = [study.cell(name, t, metric)[1] for t in study.tasks]
            ax.bar(x + off, [np.nan if v is None else v for v in vals], width=0.4, label=name, color=color,
                   yerr=yerr(vals, [study.cell_interval(name, t, metric) for t in study.tasks]), capsize=2)
            for xi, v in zip(x + off, vals):
                if v is None:
                    ax.text(xi, 0.02, "undefined", rotation=90, ha="center", va="bottom", color=color)
        ax.set_xticks(x, study.tasks, rotation=90)
        ax.set(title=f"ED from {metric}", ylim=(0, 1.1))
    axes[0].set_ylabel("ratio (ED + 1) / L")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2)
    fig.suptitle(f"Base vs chain-of-thought: {base} vs {cot}\n(bars: 95% bootstrap CI over prompts)")
    return fig
