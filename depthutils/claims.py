"""Every claim the book tests, in one table, and the one rule that grades them.

A :class:`Claim` holds the paper's sentence and where it stands, the statistic (a key of a
result's ``facts()``), which way favours the claim, and its two thresholds, each with its source:
a number the paper gives, or our stated rationale. :func:`grade` is the one grading rule, applied
to a statistic and its bootstrap interval over prompts (:func:`judge` draws that interval).

Four outcomes:

* **shown**: the whole interval lies on the claim's side of the *shown* threshold;
* **not shown**: the whole interval lies past the *against* threshold;
* **mixed**: the interval straddles a threshold, so at this many prompts the run cannot tell;
* **not tested**: the run cannot speak to the claim (one model where two are needed, no group
  the model solves, too few layers to form halves, an undefined statistic). It is never counted
  for or against the claim.

Every :class:`Verdict` the book prints is built by a function of this module, one per claim.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .cross_model_mapping import MappingResult
from .depth_score import DepthScoreResult
from .depth_use import MEASURES, DepthUse
from .future_effects import FutureEffectsResult
from .integrated_gradients import IGResult
from .logit_lens import LogitLensResult
from .contributions import ContributionsResult
from .residual_stream import ResidualStreamResult
from .results import Result
from .study import METRICS, Study, reference_spread

#: the outcomes a verdict can have, from best to worst for the claim, then the one that says nothing
OUTCOMES = ("shown", "mixed", "not shown", "not tested")
#: the bootstrap's level
LEVEL = 0.95
#: the fewest layers a "half" may hold: a mean over one layer is that layer, not a half of the network
MIN_HALF = 2
#: chapter 6: a group counts only if the model solves at least this share of every level compared
ACCURACY_FLOOR = 0.25
#: chapter 7: permutations of the target layers that give the distance's chance distribution
N_PERMUTATIONS = 2000
#: chapter 7: "most source layers share one target" above this share
SHARED_TARGET = 0.5
#: the sentence that explains a bootstrap interval on a whole-layer statistic
WHOLE_LAYER = ("An effective depth, a crossing or a best target is a whole layer, so a relative depth or ratio built "
               "from it moves in steps of 1/L: its bootstrap interval can be a single value (every resample gives the "
               "same layer) or jump by a whole step.")


@dataclass(frozen=True)
class Threshold:
    """A threshold and where its number comes from (``value`` None: computed from the run, as ``source`` says)."""

    value: float | None
    source: str


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, the statistic that tests it and the thresholds that grade it."""

    key: str
    chapter: str
    paper: str
    where: str
    sentence: str   # the paper's words in quotes, or "in our words:" where the paper gives none to quote
    statistic: str  # what is computed, in words
    shown: Threshold
    against: Threshold
    fact: str = ""             # the statistic's key in the result's facts() ("{task}": one per task family)
    below: bool = True         # smaller favours the claim
    whole_layer: bool = False  # a statistic in whole-layer steps (see WHOLE_LAYER)
    paper_facts: tuple = ()    # (row, what the paper gives) for the chapter's "paper vs this run" table

    def criterion(self, shown: float | None = None, against: float | None = None, fmt: str = ".2f") -> str:
        """The grading rule in words, with this run's threshold values."""
        s = self.shown.value if shown is None else shown
        a = self.against.value if against is None else against
        side, past = ("at or below", "wholly above") if self.below else ("at or above", "wholly below")
        return (f"{self.statistic}, with its {100 * LEVEL:.0f}% bootstrap interval over prompts: shown if the interval "
                f"lies {side} {s:{fmt}} ({self.shown.source}); not shown if it lies {past} {a:{fmt}} "
                f"({self.against.source}); mixed otherwise.")


_MODELS_P1 = ("models", "Llama 3.1 8B/70B/405B and Qwen 3 8B/14B/32B; OLMo 2 7B/13B/32B in the rebuttal, "
                        "whose differences P1 calls “minimal”")
_QWEN3_32B = ("Qwen3-32B (P1's text)", "layers influence later ones independently up to layer 35, compose in "
                                       "35–50, and have low influence above 50 except the last one or two")

CLAIMS: dict[str, Claim] = {c.key: c for c in [
    Claim("residual_stream", "00", "P1", "§2, its notation (spec: “Check on every family”)",
          "in our words: every layer adds its attention output and its MLP output to the residual stream, "
          "h_{l+1} = h_l + a_l + m_l, so what a layer contributes can be read off its two sublayers",
          "the largest relative error ‖h_{l+1} − (h_l + a_l + m_l)‖ / ‖h_{l+1}‖ over layers, tokens and prompts, "
          "with a_l and m_l read as the family adapter reads what each sublayer adds",
          Threshold(1e-4, "ours: float32 rounding through a few layers is ~1e-6 per layer (tests/conftest.py), "
                          "so 1e-4 leaves a hundredfold margin; a bf16 model needs ~1e-2"),
          Threshold(1e-2, "ours: a sublayer read wrongly (a raw output where a post-norm is added) leaves an "
                          "error of order 1"),
          fact="max_error",
          paper_facts=(("models", "any pre-norm transformer (P1's Llama 3.1, Qwen 3, OLMo 2)"),)),
    Claim("contributions", "01", "P1", "abstract; Fig. 2",
          "“layers in the second half contribute much less than those in the first half, with a clear phase "
          "transition between the two halves”",
          "the mean whole-layer ‖Δ_l‖/‖h_l‖ of the second half of the layers over that of the first half (layer 0, "
          "which writes onto the bare embedding, apart)",
          Threshold(0.5, "ours: “much less” read as at most half"),
          Threshold(1.0, "ours: above 1 the second half contributes more than the first"),
          fact="ratio",
          paper_facts=(_MODELS_P1, ("prompts", "N = 20 GSM8K test problems"), _QWEN3_32B,
                       ("last layers", "P1 notes that the last layer or two sharpen the output"))),
    Claim("future_effects", "02", "P1", "abstract; Fig. 3",
          "“skipping layers in the second half has a much smaller effect on future computations and output "
          "predictions”",
          "the mean effect on later layers of skipping a second-half layer over that of a first-half layer "
          "(P1's max over positions and prompts)",
          Threshold(0.5, "ours: “much smaller” read as at most half"),
          Threshold(1.0, "ours: above 1 second-half layers matter more to later ones"),
          fact="later_ratio",
          paper_facts=(_MODELS_P1, ("prompts", "N = 10 GSM8K test problems, 4 positions t each"), _QWEN3_32B)),
    Claim("logit_lens", "03", "P1", "Fig. 4; abstract",
          "in our words: the logit lens stays far from the output in the first half and converges in the second, "
          "where layers make “more fine-grained adjustments to the residual”",
          "the relative depth (l+1)/L at which the lens KL first falls below half its maximum, and at which the "
          "top-5 overlap first exceeds 0.3 (P2's thresholds), each graded",
          Threshold(0.5, "P1: the phase transition lies at about the middle of the network"),
          Threshold(0.5, "the same middle: a crossing in the first half converges early"),
          fact="kl_rel, overlap_rel",
          below=False, whole_layer=True,
          paper_facts=(_MODELS_P1, ("prompts", "N = 20 GSM8K test problems"))),
    Claim("context", "04", "P1", "Fig. 6",
          "in our words: context positions (operands, entities) stop mattering by about the middle of the network; "
          "after that the answer is computed at the last positions",
          "per prompt, the relative depth of the deepest layer at which intervening at a context position still "
          "moves the answer by more than 10% of the largest effect (ours: “mattering”)",
          Threshold(0.6, "ours: the middle, 0.5, plus a tenth for “about”"),
          Threshold(0.8, "ours: context still matters in the last fifth of the layers"),
          fact="deepest_rel",
          paper_facts=(("models", "Llama 3.1 70B (Fig. 6)"),
                       ("prompts", "“5 + 7 + 5 + 3 + 1 + 7 = ” → 28; “The spouse of the performer of Imagine is” "
                                   "→ Yoko Ono"),
                       ("integrated gradients", "K = 256 points, batches of 16")))] + [
    Claim("depth_score", "06", "P1", "abstract; depth score against difficulty",
          "“for multihop tasks, we are unable to find evidence that models are using increased depth to compose "
          "subresults in examples involving many hops”",
          "per task family, the least-squares slope per level of the mean normalised depth score (prompts "
          "resampled within levels)",
          Threshold(None, "ours: a rise of less than one layer from the easiest to the hardest level, "
                          "1 / ((L−1)·(levels−1)), is below the resolution of a layer index"),
          Threshold(0.0, "a slope whose interval lies wholly above 0 is a rise outside the noise"),
          fact="{task}_mean_slope",
          paper_facts=(("models", "Llama 3.1 70B, Qwen 3"), ("prompts", "20 problems per level: MATH levels 1–5, "
                                                                        "2/3/4-hop questions"),
                       ("accuracy", "P1 reads depth scores next to accuracy, which falls with difficulty"))),
    Claim("mapping", "07", "P1", "abstract; linear maps from a shallow to a deep model",
          "“layers with the same relative depth map best to each other, suggesting that the larger model simply "
          "spreads the same computations out over its many layers”",
          "per mapping, the mean |relative depth of the best target − relative depth of the source| over source "
          "layers, against its chance distribution when the target layers are permuted",
          Threshold(None, f"the 5th percentile of the distance under {N_PERMUTATIONS} random permutations of the "
                          "target layers: closer to the diagonal than 95% of chance maps (5%: the conventional level)"),
          Threshold(None, "the same percentile: a distance chance reaches more than 5% of the time"),
          fact="distance",
          whole_layer=True,
          paper_facts=(("models", "Qwen2.5-1.5B → Qwen2.5-14B"),
                       ("result", "a diagonal in the source × target heatmap")))] + [
    Claim("shared_layers", "08", "P1", "outlook: MoEUT",
          "in our words: a shared-layer model (MoEUT) tends to use more of its depth than a standard transformer "
          "trained on the same task; P1 calls this preliminary",
          "the shared-layer model minus the stacked one on three numbers where larger means later layers matter "
          "more (late/early future-effect ratio, KL effective-depth ratio, mean normalised depth score)",
          Threshold(0.0, "a difference whose interval lies wholly above 0 is outside the noise"),
          Threshold(0.0, "the same 0 from below"),
          fact="diff_{measure}", below=False, whole_layer=True,
          paper_facts=(("models", "MoEUT against a standard transformer, same task and data"),
                       ("status", "P1: preliminary; no large shared-layer model exists"))),
    Claim("scale", "09", "P2", "abstract; Table 1",
          "“while the number of effective layers grows with model size, the effective depth ratio remains stable”",
          "the largest minus the smallest mean ratio (over tasks) across the ladder",
          Threshold(None, "P2's Table 1: the spread of the same statistic across Qwen2.5-Instruct 1.5B → 32B, which "
                          "P2 reads as stable"),
          Threshold(None, "the same spread"),
          fact="scale_spread",
          whole_layer=True,
          paper_facts=(("models", "Qwen2.5 1.5B–32B base, Instruct and Math; DeepSeek-R1-Distill-Qwen 1.5B–32B"),
                       ("prompts", "10 HellaSwag, 10 GSM8K, 5 AIME24 problems of at most 400 tokens"))),
    Claim("cot", "09", "P2", "abstract; Table 1",
          "“comparisons between base and corresponding long-CoT models show no increase in effective depth”",
          "the mean ratio of the chain-of-thought model minus that of its base",
          Threshold(None, "ours: one layer of the base model, 1/L, the step in which a ratio moves"),
          Threshold(None, "the same step"),
          fact="cot_gain", whole_layer=True),
    Claim("difficulty", "09", "P2", "abstract; Table 1",
          "“models do not dynamically use more layers for harder problems”",
          "the mean ratio over the ladder on AIME24 minus that on HellaSwag and GSM8K",
          Threshold(None, "ours: one layer, the mean of 1/L over the ladder"),
          Threshold(None, "the same step"),
          fact="hard_gain", whole_layer=True),
]}


@dataclass
class Verdict:
    """A computed verdict on a paper's claim: the claim, the criterion, the outcome, this run's numbers,
    and what the run could not count (``notes``). Chapters end with one."""

    claim: str
    criterion: str
    outcome: str
    numbers: str
    notes: list = field(default_factory=list)
    key: str = ""
    rows: dict = field(default_factory=dict)  # this run's side of paper rows that have a counterpart here

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    def markdown(self) -> str:
        lines = [f"**Verdict: {self.outcome}.**", "", f"- *Claim:* {self.claim}", f"- *Criterion:* {self.criterion}",
                 f"- *This run:* {self.numbers}"]
        lines += [f"- *Note:* {n}" for n in self.notes]
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ the rule

def grade(value, lo, hi, shown: float, against: float, below: bool = True) -> str:
    """The one grading rule, on a statistic and its interval ``[lo, hi]`` (None: the point decides).

    ``below=True`` (smaller favours the claim): *not shown* if the interval lies wholly above ``against``,
    *shown* if it lies at or below ``shown``, *mixed* otherwise; ``below=False`` mirrors it. An undefined
    statistic (None or not finite) is *not tested*: the run cannot speak to the claim.
    """
    if value is None or not np.isfinite(value):
        return "not tested"
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        lo = hi = value
    if below:
        return "not shown" if lo > against else "shown" if hi <= shown else "mixed"
    return "not shown" if hi < against else "shown" if lo >= shown else "mixed"


def band(result: Result, key: str, level: float = LEVEL) -> tuple[float | None, float | None]:
    """The percentile bootstrap interval over prompts of ``result.facts()[key]`` (None, None without one)."""
    if not result.n_prompts or result.facts()[key] is None:
        return None, None
    lo, hi = result.interval(lambda r: r.facts()[key], level=level)
    return (None, None) if np.isnan(lo) else (float(lo), float(hi))


def judge(claim: Claim, result: Result, key: str, *, shown: float | None = None,
          against: float | None = None) -> tuple[str, float | None, float | None, float | None]:
    """Bootstrap ``result.facts()[key]`` over prompts and grade it against the claim's thresholds (or the
    run's ``shown``/``against``). Returns ``(outcome, value, lo, hi)``."""
    value = result.facts()[key]
    lo, hi = band(result, key)
    s = claim.shown.value if shown is None else shown
    a = claim.against.value if against is None else against
    return grade(value, lo, hi, s, a, claim.below), value, lo, hi


def combine(outcomes) -> str:
    """Several graded parts of one claim: the parts that are *not tested* are left out; shown if all the
    rest are shown, not shown if all are not shown, mixed otherwise; *not tested* if nothing is left."""
    tested = [o for o in outcomes if o != "not tested"]
    if not tested:
        return "not tested"
    if all(o == "shown" for o in tested):
        return "shown"
    if all(o == "not shown" for o in tested):
        return "not shown"
    return "mixed"


def interval_text(value, lo=None, hi=None, fmt: str = ".2f") -> str:
    """``"0.66 [0.61, 0.77]"``, ``"0.66"`` without an interval, ``"undefined"`` for None."""
    if value is None:
        return "undefined"
    return f"{value:{fmt}}" + ("" if lo is None else f" [{lo:{fmt}}, {hi:{fmt}}]")


def _claim_text(c: Claim) -> str:
    return f"{c.paper} ({c.where}): {c.sentence}"


def _verdict(c: Claim, outcome: str, numbers: str, notes=(), criterion: str | None = None, rows=None) -> Verdict:
    notes = list(notes) + ([WHOLE_LAYER] if c.whole_layer else [])
    return Verdict(_claim_text(c), criterion or c.criterion(), outcome, numbers, notes, c.key, rows or {})


def not_tested(key: str, why: str) -> Verdict:
    """A verdict for a run that cannot test claim ``key``, saying why."""
    c = CLAIMS[key]
    return Verdict(_claim_text(c), c.criterion() if c.shown.value is not None else c.statistic, "not tested", why,
                   [], c.key)


def paper_vs_run(verdict: Verdict, metas) -> str:
    """The "paper vs this run" table of a verdict's claim: the paper's facts (models, prompts, what its text
    gives) beside this run's, from the results' ``meta`` (a list; "—" where the run has no counterpart), and
    the claim in the paper's words beside this run's outcome."""
    c = CLAIMS[verdict.key]
    models = ", ".join(dict.fromkeys(f"{m['model']} ({m['n_layers']} layers)" for m in metas if m.get("model")))
    prompts = ", ".join(dict.fromkeys(f"N = {m['n']} ({m['dataset']})" for m in metas if m.get("n")))
    run = {"models": models or "—", "prompts": prompts or "—", **verdict.rows}
    rows = {**dict(c.paper_facts), **{k: dict(c.paper_facts).get(k, "—") for k in run}}
    out = [f"| | {c.paper} ({c.where}) | this run |", "|---|---|---|"]
    out += [f"| {k} | {v} | {run.get(k, '—')} |" for k, v in rows.items()]
    out.append(f"| claim | {c.sentence} | **{verdict.outcome}**: {verdict.numbers.split('; ')[0].rstrip('.')} |")
    return "\n".join(out)


# ------------------------------------------------------------------------------------ P1's claims

def residual_stream(result: ResidualStreamResult) -> Verdict:
    """Chapter 0: the residual stream's decomposition into what each sublayer adds."""
    c, f = CLAIMS["residual_stream"], result.facts()
    outcome, value, lo, hi = judge(c, result, c.fact)
    return _verdict(c, outcome, f"largest relative error {interval_text(value, lo, hi, '.1e')}; with the raw module "
                                f"outputs instead: {f['max_raw_error']:.1e}.",
                    criterion=c.criterion(fmt=".0e"))



def contributions(result: ContributionsResult) -> Verdict:
    """Chapter 1: the second half's relative contribution against the first half's (layer 0 apart)."""
    c, f = CLAIMS["contributions"], result.facts()
    if f["half_size"] < MIN_HALF:
        return not_tested("contributions", f"{f['L']} layers: layers 1–{f['L'] - 1} cannot form two halves of at "
                                           f"least {MIN_HALF} layers each.")
    outcome, value, lo, hi = judge(c, result, c.fact)
    return _verdict(c, outcome,
                    f"second half {f['second']:.3f}, first half {f['first']:.3f}, ratio {interval_text(value, lo, hi)}; "
                    f"without the last layer, which P1 notes sharpens the output, the second half is "
                    f"{f['second_wo_last']:.3f} and the ratio {interval_text(f['ratio_wo_last'])}.",
                    rows={"last layers": f"ratio {f['ratio']:.2f} with the last layer, {f['ratio_wo_last']:.2f} without"})


def future_effects(result: FutureEffectsResult) -> Verdict:
    """Chapter 2: skipping a second-half layer against a first-half one, on later layers."""
    c, f = CLAIMS["future_effects"], result.facts()
    if f["half_size"] < MIN_HALF:  # the last layer has no later layers
        return not_tested("future_effects", f"{f['L']} layers: the {f['L'] - 1} layers with later layers cannot "
                                            f"form two halves of at least {MIN_HALF} layers each.")
    outcome, value, lo, hi = judge(c, result, c.fact)
    olo, ohi = band(result, "out_ratio")
    params = result.meta.get("params", {})
    notes = []
    if f["structural"]:
        notes.append(f"Left out of the output halves: layer(s) {f['structural']}, whose output effect is 0 by "
                     f"construction in this variant ({params.get('mode')} tokens{', direct only' if params.get('local') else ''}).")
    return _verdict(c, outcome,
                    f"second half {f['later_second']:.3f}, first half {f['later_first']:.3f}, ratio "
                    f"{interval_text(value, lo, hi)} ({params.get('part', 'layer')}, {params.get('mode', 'future')} "
                    f"tokens); on the output: ratio {interval_text(f['out_ratio'], olo, ohi)}.", notes)


def logit_lens(result: LogitLensResult) -> Verdict:
    """Chapter 3: where the lens KL halves and where the top-5 overlap passes 0.3, against the middle."""
    c, f = CLAIMS["logit_lens"], result.facts()
    outcomes, parts = [], []
    for key, what in (("kl_rel", "KL halves"), ("overlap_rel", "overlap passes 0.3")):
        if f[key] is None:  # never crosses: as late as it gets, which favours the claim only at the very end
            outcomes.append("not tested")
            parts.append(f"{what} at no layer (not counted)")
            continue
        outcome, value, lo, hi = judge(c, result, key)
        outcomes.append(outcome)
        parts.append(f"{what} at relative depth {interval_text(value, lo, hi)} ({outcome})")
    return _verdict(c, combine(outcomes), "; ".join(parts) + ".")


def context(results: dict[str, IGResult], what: str) -> Verdict:
    """Chapters 4 and 5: per prompt, the deepest layer at which a context position still matters."""
    c = CLAIMS["context"]
    grades, parts = [], []
    for name, r in results.items():
        rel = r.facts()["deepest_rel"]
        grades.append(grade(rel, None, None, c.shown.value, c.against.value))
        parts.append(f"{name}: {'no context position ever matters (not counted)' if rel is None else f'{rel:.2f}'}")
    worst = [g for g in grades if g != "not tested"]
    outcome = max(worst, key=OUTCOMES.index) if worst else "not tested"
    return _verdict(c, outcome, "; ".join(parts) + f" ({what}; one prompt each, so no interval).",
                    criterion=f"{c.statistic}: shown if it is at or below {c.shown.value} ({c.shown.source}) for "
                              f"every prompt, not shown if it is above {c.against.value} ({c.against.source}) for "
                              "one, mixed otherwise. Each prompt is one measurement, as in P1, so there is no "
                              "interval over prompts.")


def depth_score(result: DepthScoreResult, floor: float = ACCURACY_FLOOR) -> Verdict:
    """Chapter 6: per family, does the mean depth score rise with the level? Families the model does not
    solve (accuracy below ``floor`` at a level compared) carry no evidence and are not counted."""
    c, f = CLAIMS["depth_score"], result.facts()
    L = result.n_layers
    grades, parts, notes = [], [], []
    for t in dict.fromkeys(r["task"] for r in result.rows):
        rows = [r for r in result.rows if r["task"] == t]
        acc = [r["accuracy"] for r in rows]
        key = c.fact.format(task=t)
        slope, lo, hi = f[key], f[f"{key}_lo"], f[f"{key}_hi"]
        text = f"{t}: {interval_text(slope, lo, hi, '+.3f')}"
        if any(a is not None and a < floor for a in acc):
            notes.append(f"{t} is not informative: accuracy " + ", ".join(
                f"{100 * a:.0f}%" for a in acc if a is not None) + f" by level, below the floor of {100 * floor:.0f}% "
                "(ours: at a level the model rarely solves, the score measures failed attempts).")
            parts.append(text + " (not counted)")
            continue
        if len(rows) < 2:
            parts.append(text + " (one level: not counted)")
            continue
        delta = 1.0 / ((L - 1) * (len(rows) - 1))
        g = grade(slope, lo, hi, delta, c.against.value)
        grades.append(g)
        parts.append(text + f" against one layer over the levels, {delta:.3f} ({g})")
    outcome = combine(grades)
    if outcome == "not tested":
        notes.append("No task family is informative, so this run cannot test the claim.")
    return _verdict(c, outcome, "; ".join(parts) + ".", notes,
                    criterion=f"{c.statistic}, with its {100 * LEVEL:.0f}% bootstrap interval: a family counts for the "
                              f"claim if the interval lies at or below one layer over its levels ({c.shown.source}), "
                              f"against it if the interval lies wholly above 0 ({c.against.source}), and is mixed "
                              f"otherwise; families are combined, and a family below {100 * floor:.0f}% accuracy at "
                              "any level is not counted.")


def mapping(results: list[MappingResult], n_permutations: int = N_PERMUTATIONS, seed: int = 0) -> Verdict:
    """Chapter 7: the best matches' distance from the relative-depth diagonal against permuted targets,
    with the rank correlation beside it; a map where most source layers share one target is at best mixed."""
    c = CLAIMS["mapping"]
    results = [r for r in results if r.meta["params"]["source"] != r.meta["params"]["target"]]
    if not results:
        return not_tested("mapping", "one model only: a model mapped onto itself is the sanity check, not a test; "
                                     "give two models that share a tokenizer.")
    grades, parts, notes = [], [], []
    for r in results:
        p = r.meta["params"]
        null = r.null_distances(n_permutations, seed)
        q05 = float(np.percentile(null, 5))
        outcome, value, lo, hi = judge(c, r, c.fact, shown=q05, against=q05)
        f = r.facts()
        rho_lo, rho_hi = band(r, "rank_corr")
        if f["shared_frac"] > SHARED_TARGET:
            notes.append(f"{p['source']} → {p['target']}: {100 * f['shared_frac']:.0f}% of the source layers share one "
                         f"best target (layer {f['shared_layer']}), so the map cannot place them at distinct depths: "
                         "graded at best mixed.")
            outcome = "mixed" if outcome == "shown" else outcome
        grades.append(outcome)
        parts.append(f"{p['source']} → {p['target']}: distance {interval_text(value, lo, hi, '.3f')} against chance's "
                     f"5th percentile {q05:.3f} (median {np.median(null):.3f}; {100 * np.mean(null <= value):.0f}% of "
                     f"permutations are as close); rank correlation of source and best-target depth "
                     f"{interval_text(f['rank_corr'], rho_lo, rho_hi)} ({outcome})")
    worst = max(grades, key=OUTCOMES.index)
    return _verdict(c, worst, "; ".join(parts) + ".", notes,
                    criterion=f"{c.statistic}, with its {100 * LEVEL:.0f}% bootstrap interval over held-out prompts: "
                              f"shown if the interval lies at or below {c.shown.source}; not shown if it lies wholly "
                              "above it; mixed otherwise. Every mapping must show it.")


def shared_layers(result: DepthUse) -> Verdict:
    """Chapter 8: the shared-layer model (the last) minus the stacked one (the first), three numbers."""
    c = CLAIMS["shared_layers"]
    stacked, shared = result.models[0], result.models[-1]
    if stacked == shared:
        return not_tested("shared_layers", "one model only: the claim compares a stacked and a shared-layer model.")
    a, b, f = result.numbers(stacked), result.numbers(shared), result.facts()
    grades, parts = [], []
    for k in MEASURES:
        key = c.fact.format(measure=k)
        d, lo, hi = f[key], f[f"{key}_lo"], f[f"{key}_hi"]
        g = grade(d, lo, hi, c.shown.value, c.against.value, below=False)
        if g == "shown" and (lo if lo is not None else d) <= c.shown.value:  # touching 0 is not above it
            g = "mixed"
        grades.append(g)
        fmt = lambda v: "—" if v is None else f"{v:.3f}"
        parts.append(f"{k}: {fmt(b[k])} vs {fmt(a[k])}, difference {interval_text(d, lo, hi, '+.3f')} ({g})")
    return _verdict(c, combine(grades), "; ".join(parts) + ".",
                    criterion=f"{shared} minus {stacked}: " + c.criterion().replace("at or above", "wholly above")
                    + " Each of the three is graded; shown if all are, not shown if all are not, mixed otherwise.")


# ------------------------------------------------------------------------------------ P2's claims

def degenerate(study: Study, models, tasks, metric: str) -> str | None:
    """Why ``metric`` cannot inform a comparison of ``models`` × ``tasks`` (None: it can): an effective depth
    that is undefined (no layer meets the condition) or at layer 0 (met before any layer has worked) in a
    measured cell says nothing about how deep the model computes."""
    cells = [study.cell(m, t, metric)[0] for m in models for t in tasks if study.results.get((m, t)) is not None]
    undefined, floor = sum(ed is None for ed in cells), sum(ed == 0 for ed in cells)
    if not cells:
        return "no cell measured"
    if undefined or floor:
        return (f"{undefined} of {len(cells)} cells undefined, {floor} at layer 0" if undefined and floor else
                f"{undefined} of {len(cells)} cells undefined" if undefined else f"{floor} of {len(cells)} cells at layer 0")
    return None


def degenerate_note(study: Study, models, tasks) -> str:
    """Which metrics are degenerate on ``models`` × ``tasks`` and why, as a phrase ("none" if all inform)."""
    why = {m: degenerate(study, models, tasks, m) for m in METRICS}
    bad = [f"{m} ({w})" for m, w in why.items() if w]
    return "; ".join(bad) if bad else "none"


def effective_depth(study: Study, ladder, base: str | None = None, cot: str | None = None) -> dict[str, Verdict]:
    """Chapter 9: P2's three questions, each graded on every metric that is informative for the models compared."""
    step = lambda models: float(np.mean([1.0 / study.n_layers(m) for m in models]))
    easy = [t for t in ("hellaswag", "gsm8k") if t in study.tasks]
    questions = {
        "scale": (ladder if len(ladder) >= 2 else None, study.tasks, reference_spread),
        "cot": ([base, cot] if base and cot else None, study.tasks, lambda m: step([base])),
        "difficulty": (ladder if easy and "aime24" in study.tasks else None, easy + ["aime24"], lambda m: step(ladder)),
    }
    why_not = {"scale": "needs at least two ladder models", "cot": "needs a base and a chain-of-thought model",
               "difficulty": "needs AIME24 and HellaSwag or GSM8K"}
    out = {}
    for name, (models, tasks, tol) in questions.items():
        c = CLAIMS[name]
        key = c.fact
        if models is None:
            out[name] = not_tested(name, f"this run {why_not[name]}.")
            continue
        grades, parts, notes = [], [], []
        for metric in METRICS:
            why = degenerate(study, models, tasks, metric)
            if why:
                notes.append(f"{metric} is degenerate on these models ({why}): not counted.")
                continue
            f = study.facts(ladder, base, cot, metric)
            t = tol(metric)
            g = grade(f[key], f[f"{key}_lo"], f[f"{key}_hi"], t, t)
            grades.append(g)
            parts.append(f"{metric}: {interval_text(f[key], f[f'{key}_lo'], f[f'{key}_hi'])} against {t:.2f} ({g})")
        numbers = "; ".join(parts) or "no metric is informative"
        outcome = combine(grades)
        if outcome == "not tested":
            notes.append("No metric is informative for these models, so this run cannot test the claim.")
        out[name] = _verdict(c, outcome, numbers + ".", notes,
                             criterion=f"{c.statistic}, per metric (cos, KL, overlap) that is informative for the "
                                       f"models compared, with its {100 * LEVEL:.0f}% bootstrap interval over prompts: "
                                       f"shown if it lies at or below the tolerance ({c.shown.source}), not shown if "
                                       "wholly above it, mixed otherwise; metrics are combined.")
    return out
