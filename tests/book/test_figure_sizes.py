"""Every figure of chapters 1, 3–7 and 10 drawn for the book's text column: on a small input shaped like a run's (a
shallow model and a deep one, 30 layers as SmolLM2), each is :data:`~depthutils.book.plotstyle.COLUMN_IN` wide,
nothing spills out of it (so the saved PNG is that wide too), no text is below
:data:`~depthutils.book.plotstyle.MIN_FONT_PT` and no two tick labels of one axis overlap
(:func:`~depthutils.book.plotstyle.legibility`)."""
from __future__ import annotations

import functools
import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from depthutils.analysis import known_facts  # noqa: E402
from depthutils.analysis.objectives import objectives  # noqa: E402
from depthutils.analysis.solved_split import SolvedSplit  # noqa: E402
from depthutils.book import claims  # noqa: E402
from depthutils.book.claims.objectives import figures as objectives_figures  # noqa: E402
from depthutils.book.plotstyle import COLUMN_IN, MIN_FONT_PT, legibility  # noqa: E402
from depthutils.book.reviews import early_exit, massive_clamp, norm_growth, only_deeper  # noqa: E402
from depthutils.measures import ig_rules  # noqa: E402
from depthutils.measures.cross_model_mapping import MappingResult  # noqa: E402
from depthutils.measures.early_exit import EarlyExitResult  # noqa: E402
from depthutils.measures.integrated_gradients import IGResult  # noqa: E402
from depthutils.measures.massive_clamp import MassiveClampResult  # noqa: E402
from depthutils.measures.norm_growth import NormGrowthResult  # noqa: E402
from depthutils.measures.tuned_lens import TunedLensResult  # noqa: E402

#: the depths drawn: an embedded ladder model and SmolLM2's 30 layers
DEPTHS = (8, 30)
N = 12  # prompts per result
rng = functools.partial(np.random.default_rng, 0)


def _meta(model: str, L: int, **params) -> dict:
    return {"model": model, "n_layers": L, "n": N, "dataset": "gsm8k", "params": params}


def _rising(L: int, at: float, width: float = 0.08) -> np.ndarray:
    """``[N, L+1]`` per-prompt shares rising from 0 to 1 around relative depth ``at``, each prompt a little apart."""
    x = np.arange(L + 1) / L
    shift = rng().normal(0, 0.05, (N, 1))
    return 1 / (1 + np.exp(-(x[None] - at - shift) / width))


def norm_result(L: int) -> NormGrowthResult:
    """Norms that grow with depth, a massive component at position 0 from h_3, the lens agreeing late."""
    g = rng()
    h = np.geomspace(3, 900, L + 1)[None] * g.lognormal(0, 0.1, (N, 1))
    first = np.r_[3.0, 40, 800, np.full(L - 2, 2e4)][None].repeat(N, 0)
    delta = np.diff(h, axis=1) + g.uniform(10, 40, (N, L))
    median = np.full((N, L + 1), 0.5)
    return NormGrowthResult(h_norm_by_prompt=h, delta_norm_by_prompt=delta, ratio_by_prompt=delta / h[:, :L],
                            h_first_by_prompt=first, peak_first_by_prompt=first / 20, peak_rest_by_prompt=h / 10,
                            median_abs_by_prompt=median, lens_kl_by_prompt=1 - _rising(L, 0.7)[:, :L],
                            lens_overlap_by_prompt=_rising(L, 0.7)[:, :L], prompt_tokens=g.integers(20, 90, N),
                            meta=_meta("smollm2-135m" if L > 20 else "ladder-8", L)).with_aggregates()


def clamp_result(L: int) -> MassiveClampResult:
    """A lens KL that falls late, higher with position 0's massive component clamped from h_3, the control as clean."""
    g, per = rng(), {}
    kl = 12 * (1 - _rising(L, 0.7)[:, :L]) + 0.2
    for r, scale in (("clean", 1.0), ("clamp", 1.4), ("control", 1.02)):
        per[f"lens_kl_{r}_by_prompt"] = kl * scale
        per[f"ratio_{r}_by_prompt"] = g.uniform(0.2, 0.6, (N, L)) * scale
        per[f"peak_{r}_by_prompt"] = np.repeat(np.r_[5.0, 40, 800, np.full(L - 3, 1.2e4)][None], N, 0) / (
            30 if r == "clamp" else 1)
    clamped = np.r_[0.0, 0, 0, np.ones(L - 3)]
    return MassiveClampResult(**per, clamped_by_prompt=np.repeat(clamped[None], N, 0),
                              dims_by_prompt=np.repeat(np.eye(64)[7][None], N, 0),
                              output_kl_clamp_by_prompt=g.uniform(5, 10, N), output_kl_control_by_prompt=np.zeros(N),
                              output_agree_clamp_by_prompt=g.uniform(0, 0.2, N),
                              output_agree_control_by_prompt=np.ones(N), prompt_tokens=g.integers(20, 90, N),
                              meta=_meta("smollm2-135m" if L > 20 else "ladder-8", L,
                                         start_token="<|endoftext|>")).with_aggregates()


def exit_results(L: int) -> dict:
    """Two sets of prompts cut early, and the tuned readout's KL and overlap, as chapter 3's run gives them."""
    out = {}
    for name, at in (("GSM8K answers", 0.6), ("facts it knows", 0.8)):
        gold = _rising(L, at) * 0.7
        correct = rng().integers(2, 6, N).astype(float)
        out[name] = EarlyExitResult(
            gold_by_prompt=gold, agree_by_prompt=_rising(L, at - 0.1), skip_gold_by_prompt=gold[:, L // 2],
            skip_agree_by_prompt=gold[:, L // 2], correct_by_prompt=correct, kept_by_prompt=np.floor(correct / 3),
            tuned_gold_by_prompt=_rising(L, at - 0.2)[:, :L] * 0.7, tuned_skip_gold_by_prompt=gold[:, L // 2] + 0.1,
            tuned_skip_agree_by_prompt=gold[:, L // 2], tuned_kept_by_prompt=np.floor(correct / 2),
            meta=_meta("smollm2-135m" if L > 20 else "ladder-8", L)).with_aggregates()
    lens = {f"{k}_by_prompt": v for k, v in (("kl", 8 * (1 - _rising(L, 0.4))[:, :L] + 0.05),
                                              ("raw_kl", 12 * (1 - _rising(L, 0.7))[:, :L] + 0.1),
                                              ("overlap", _rising(L, 0.4)[:, :L]),
                                              ("raw_overlap", _rising(L, 0.7)[:, :L]))}
    out[early_exit.LENS_KEY] = TunedLensResult(**lens, prompt_tokens=np.full(N, 8.0),
                                               meta=_meta(out["facts it knows"].meta["model"], L, fit_tokens=3600)
                                               ).with_aggregates()
    return out


def split_result(L: int) -> SolvedSplit:
    """Chapter 6's split of two task families' problems between a shallow model and one of ``L`` layers."""
    g = rng()
    n = 90
    return SolvedSplit(prompt_scores=g.uniform(0.1, 0.9, n), prompt_tasks=np.repeat(["addition", "multihop"], n // 2),
                       prompt_levels=np.tile([1, 2, 3], n // 3), shallow_correct=(g.random(n) < 0.4).astype(float),
                       deep_correct=(g.random(n) < 0.6).astype(float),
                       meta={**_meta(f"ladder-{L}", L, shallow=f"ladder-{L // 2}"), "n": n})


def mapping_result(Ls: int, Lt: int, target: str, slope: float = 1.0) -> MappingResult:
    """A map from ``Ls`` source layers to ``Lt`` target layers, best near ``slope`` × the relative depth; one
    cell far above the others (a bad fit at the last layers)."""
    s, t = (np.arange(Ls)[:, None] + 1) / Ls, (np.arange(Lt)[None] + 1) / Lt
    error = 0.2 + np.abs(t - slope * s)[None] + rng().uniform(0, 0.05, (N, Ls, Lt))
    error[:, -1, -1] = 6.0
    return MappingResult(error_by_prompt=error, prompt_tokens=np.full(N, 30.0),
                         meta=_meta(target, Lt, source=f"ladder-{Ls}", target=target)).with_aggregates()


class Measured:
    """One prompt's measurement as :func:`~depthutils.book.claims.context.sample_figure` reads it."""

    def __init__(self, rel: float | None, prompt: str, model: str):
        self.rel, self.meta = rel, {"model": model, "params": {"prompt": prompt}}

    def facts(self):
        return {"deepest_rel": self.rel}


def kind_sample(L: int) -> claims.context.KindSample:
    """The book's first twelve curated two-hop facts (long prompts, many alike in their first words and their
    last), one not counted."""
    with open(known_facts.CURATED, encoding="utf-8") as f:
        prompts = [x["prompt"] for x in json.load(f)["facts"][:N]]
    values = rng().uniform(0.3, 0.9, N).round(2)
    results = {("multihop" if i == 0 else f"multihop_{i + 1}"): Measured(
        None if i == 3 else float(v), prompts[i], "smollm2-135m" if L > 20 else "ladder-8")
        for i, v in enumerate(values)}
    return claims.context.KindSample("multihop", results)


def ig_rules_inputs(L: int) -> tuple[dict, IGResult]:
    """Three rules' attributions on one prompt of ``L`` layers, and the converged reference."""
    g, T = rng(), 9

    def ig(rule: str, steps: int, off: float) -> IGResult:
        ref = np.linspace(0.1, 1, L)[:, None] * np.ones((L, T))
        return IGResult(attribution=ref + off * g.standard_normal((L, T)), error=np.full((L, T), max(off, 1e-6)),
                        residual=np.full(L, off / 2), evaluations=steps * L, rounds=steps // 16,
                        meta={"model": "ladder-8", "params": {"rule": rule, "steps": steps,
                                                              "prompt": "5 + 7 + 5 + 3 + 1 + 7 = ", "answer": "28"}})

    rules = {"Riemann, K = 256 (P1)": ig("riemann", 256, 1e-3), "Gauss, 16 nodes": ig("gauss", 16, 1e-2),
             "adaptive": ig("adaptive", 40, 1e-4)}
    return rules, ig("gauss", 256, 0.0)


def profile() -> ig_rules.Profile:
    alpha = np.linspace(0, 1, 513)
    f = 1 / (1 + np.exp(-(alpha - 0.62) / 0.01))
    return ig_rules.Profile(layer=5, alpha=alpha, f=f, df=np.gradient(f, alpha))


@functools.lru_cache(maxsize=1)
def grading():
    """Chapter 10's grading of the shipped runs' tables (no model is run)."""
    return claims.objectives.grading(objectives(live=[], n_boot=30, progress_bar=False))


#: the figures with a tick per layer (or a few layers), drawn on the deep model too
PER_LAYER = ("norm_growth", "massive_clamp", "mapping", "mapping_null", "rule_figure")


def figures(L: int) -> dict:
    """``{name: () -> Figure}``: every figure of these chapters on inputs of ``L`` layers (past the shallow
    model, only those with per-layer ticks), each input built when its figure is drawn."""
    lens = lambda: exit_results(L)[early_exit.LENS_KEY]  # noqa: E731
    maps = lambda: [mapping_result(L // 2, L, f"ladder-{L}"), mapping_result(L // 4, L, f"ladder-{L}", 0.8)]  # noqa: E731
    untrained = lambda: mapping_result(L // 2, L, f"ladder-{L}-untrained", 0.0)  # noqa: E731
    out = {"norm_growth": lambda: norm_growth.figure(norm_result(L)),
           "massive_clamp": lambda: massive_clamp.figure(clamp_result(L)),
           "early_exit": lambda: early_exit.figure(exit_results(L)),
           "early_exit_without_lens": lambda: early_exit.figure(
               {k: r for k, r in exit_results(L).items() if k != early_exit.LENS_KEY}),
           "lens_figure": lambda: early_exit.lens_figure(lens()),
           "only_deeper": lambda: only_deeper.figure(split_result(L)),
           "mapping": lambda: claims.mapping.figure(maps()[0]),
           "mapping_curves": lambda: claims.mapping.curves_figure(maps()),
           "mapping_null": lambda: claims.mapping.null_figure(maps()[0], untrained(), mapping_result(
               L // 2, L // 2, f"ladder-{L // 2}-seed2")),
           "mapping_null_without_control": lambda: claims.mapping.null_figure(maps()[0], untrained()),
           "sample_figure": lambda: claims.context.sample_figure(
               kind_sample(L), "erasing a context position still moves the answer"),
           "rule_figure": lambda: ig_rules.rule_figure(*ig_rules_inputs(L)),
           "plot_profile": lambda: ig_rules.plot_profile(profile()),
           "objectives_measures": lambda: objectives_figures.measures(grading()),
           "objectives_dynamics": lambda: objectives_figures.dynamics(grading()),
           "objectives_accuracy": lambda: objectives_figures.accuracy(grading())}
    return out if L == DEPTHS[0] else {k: f for k, f in out.items() if k in PER_LAYER}


CASES = [(L, name) for L in DEPTHS for name in figures(L)]


@pytest.mark.parametrize("L,name", CASES, ids=[f"{name}-L{L}" for L, name in CASES])
def test_the_figure_reads_at_the_columns_width(L, name):
    fig = figures(L)[name]()
    try:
        seen = legibility(fig)
        assert seen["width_in"] == pytest.approx(COLUMN_IN)
        spill = fig.get_tightbbox(fig.canvas.get_renderer()).width
        assert spill <= COLUMN_IN + 0.02, f"drawn {spill:.2f} in wide: the saved PNG would be wider than the column"
        assert seen["min_font_pt"] >= MIN_FONT_PT
        assert seen["overlaps"] == []
    finally:
        plt.close(fig)
