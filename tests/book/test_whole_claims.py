"""Claims graded whole, against thresholds whose sources say what the book says they say.

P1's future-effects claim has two halves (later layers and output), P2's scale claim two parts (ED grows
with L, the ratio is stable); each part is graded. The chain-of-thought and scale tolerances are recomputed
here from P2's Table 1 with the csv module, not with :mod:`depthutils.analysis.study`.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from depthutils.analysis.study import Study
from depthutils.book import claims
from depthutils.book.claims import CLAIMS
from depthutils.measures.effective_depth import EffectiveDepthResult
from depthutils.measures.future_effects import FutureEffectsResult

ROOT = Path(__file__).resolve().parents[2]
TABLE1 = ROOT / "data" / "reference" / "p2_effective_depth_table1.csv"
QUOTES = ROOT.parent / "shared" / "reference" / "paper_quotes.md"
TASKS = ("hellaswag", "gsm8k", "aime24")
#: P2's Appendix B: each long-CoT model with the base it was distilled from
PAIRS = {"1.5B": ("DS-R1-Qwen-1.5B", "Qwen2.5-Math-1.5B"), "7B": ("DS-R1-Qwen-7B", "Qwen2.5-Math-7B"),
         "14B": ("DS-R1-Qwen-14B", "Qwen2.5-14B"), "32B": ("DS-R1-Qwen-32B", "Qwen2.5-32B")}
RNG = np.random.default_rng(1)


def _table() -> dict:
    with TABLE1.open(newline="") as f:
        return {r["model"]: r for r in csv.DictReader(f)}


def _mean_ratio(row: dict, metric: str) -> float:
    return sum(float(row[f"{metric}_{t}_ratio"]) for t in TASKS) / len(TASKS)


# ------------------------------------------------------------------------------ chapter 2: both halves

def _future(later: tuple[float, float], out: tuple[float, float], L: int = 8, n: int = 6,
            local: bool = False) -> FutureEffectsResult:
    """Every first-half layer moves later layers by ``later[0]`` and the output by ``out[0]``, every
    second-half layer by ``later[1]`` and ``out[1]`` (a little noise across prompts)."""
    layer = np.full((n, L, L), np.nan)
    for s in range(L):
        layer[:, s, s + 1:] = later[0] if s < L // 2 else later[1]
    effect = np.array([out[0] if s < L // 2 else out[1] for s in range(L)])
    effect[-1] = 0.0  # the future-tokens variant: the last layer cannot reach the output
    output = np.tile(effect, (n, 1)) * (1 + 0.01 * RNG.random((n, 1)))
    return FutureEffectsResult(meta={"params": {"part": "layer", "mode": "future", "local": local}},
                               layer_effect_by_prompt=layer, output_effect_by_prompt=output).with_aggregates()


@pytest.mark.parametrize("later, out, outcome", [
    ((1.0, 0.3), (1.0, 0.3), "shown"),       # both halves much smaller
    ((1.0, 0.3), (1.0, 1.5), "mixed"),       # later layers shown, the output not shown
    ((1.0, 1.5), (1.0, 0.3), "mixed"),       # the output shown, later layers not shown
    ((1.0, 1.5), (1.0, 1.5), "not shown"),   # neither
])
def test_future_effects_is_shown_only_when_both_halves_are(later, out, outcome):
    r = _future(later, out)
    f = r.facts()
    assert f["later_ratio"] == pytest.approx(later[1] / later[0], abs=0.01)
    assert f["out_ratio"] == pytest.approx(out[1] / out[0], abs=0.03)
    v = claims.future_effects.verdict(r)
    assert v.outcome == outcome, v.numbers
    assert v.value.startswith(f"later layers {f['later_ratio']:.2f} ") and f"; output {f['out_ratio']:.2f} " in v.value
    assert "Output: shown if" in v.criterion and "Later layers: shown if" in v.criterion


def test_an_output_half_left_empty_by_structural_zeros_is_not_tested_and_says_why():
    r = _future((1.0, 0.3), (1.0, 1.5), local=True)  # direct only: every output effect is 0 by construction
    assert r.facts()["out_ratio"] is None
    v = claims.future_effects.verdict(r)
    assert v.outcome == "shown"  # the later half alone, the output half not counted
    assert "output half is not tested" in " ".join(v.notes) and "no layer left" in " ".join(v.notes)
    assert v.value.endswith("output undefined (not tested)")


# ------------------------------------------------------------------------------ chapter 9: ED grows with L

def _ed(L: int, cross, n: int = 8) -> EffectiveDepthResult:
    """KL and overlap curves that cross at ``cross`` (one layer per prompt, or one for all, at least 1); cos
    undefined."""
    cross = np.broadcast_to(np.asarray(cross), (n,))
    layers = np.arange(L)[None, :]
    kl = np.where(layers < cross[:, None], 4.0, 0.5) + 0.01 * RNG.random((n, L))
    kl[:, 0], kl[:, -1] = 3.0, 4.5  # the maximum after h_0 (else ED_KL is degenerate), on the last lens (never an ED)
    overlap = np.where(layers < cross[:, None], 0.1, 0.9)
    return EffectiveDepthResult(mean_cos_by_prompt=np.full((n, L), -0.1), kl_by_prompt=kl, overlap_by_prompt=overlap,
                                prompt_tokens=np.full(n, 10)).with_aggregates()


def test_a_ratio_that_stays_in_the_band_while_ed_does_not_grow_is_not_shown():
    """ED 12 at 16 and at 17 layers: the ratio moves by 13/16 − 13/17 ≈ 0.05, inside P2's own KL and overlap
    spreads, but the number of effective layers does not grow, so the claim is not shown whole."""
    L = {"m16": 16, "m17": 17}
    s = Study(list(L), list(TASKS), {(m, t): _ed(L[m], 12) for m in L for t in TASKS}, n_boot=100)
    f = s.facts(list(L), metric="kl")
    assert f["scale_ed"] == [12.0, 12.0] and f["scale_ed_slope"] == 0.0
    assert f["scale_spread"] == pytest.approx(13 / 16 - 13 / 17, abs=0.01)
    v = claims.effective_depth.verdicts(s, list(L))["scale"]
    assert "ratio stable: shown" in v.numbers and "ED grows: not shown" in v.numbers
    assert v.outcome != "shown" and v.outcome == "mixed"


def test_the_ed_slope_is_the_least_squares_slope_of_ed_against_l():
    L = {"m4": 4, "m8": 8, "m12": 12}
    cross = {"m4": {"hellaswag": 1, "gsm8k": 2, "aime24": 2}, "m8": {"hellaswag": 3, "gsm8k": 5, "aime24": 6},
             "m12": {"hellaswag": 8, "gsm8k": 9, "aime24": 7}}
    per_prompt = {(m, t): np.clip(cross[m][t] + RNG.integers(-1, 2, 8), 1, L[m] - 2) for m in L for t in TASKS}
    s = Study(list(L), list(TASKS), {k: _ed(L[k[0]], c) for k, c in per_prompt.items()}, n_boot=200)
    for metric in ("kl", "overlap"):
        eds = [np.mean([s.results[(m, t)].ed(metric) for t in TASKS]) for m in L]
        want = np.polyfit(list(L.values()), eds, 1)[0]
        f = s.facts(list(L), metric=metric)
        assert f["scale_ed"] == pytest.approx(eds, abs=0.006)
        assert f["scale_ed_slope"] == pytest.approx(want, abs=0.006)
        assert f["scale_ed_slope_lo"] <= f["scale_ed_slope"] <= f["scale_ed_slope_hi"]
    v = claims.effective_depth.verdicts(s, list(L))["scale"]
    assert v.value.startswith("ED slope: kl ") and "; ratio spread: kl " in v.value


def test_p2s_ed_slope_is_read_from_its_table():
    t = _table()
    inst = [t[f"Qwen2.5-{n}-Instruct"] for n in ("1.5B", "7B", "14B", "32B")]
    for metric in ("cos", "kl", "overlap"):
        eds = [sum(int(r[f"{metric}_{x}_ed"]) for x in TASKS) / 3 for r in inst]
        want = np.polyfit([int(r["layers"]) for r in inst], eds, 1)[0]
        assert f"{metric} {want:+.2f}" in CLAIMS["scale"].paper_says().split("; ratio spread")[0]


# ------------------------------------------------------------------------------ thresholds from P2's table

def test_the_cot_tolerance_is_one_that_p2s_own_pairs_pass():
    """Every base-vs-long-CoT pair of P2 rises by at most the tolerance on every metric (P2 finds “no
    significant difference”), and the tolerance is the largest such rise; one base layer, 1/L, is failed by
    P2's own 7B pair on the cosine."""
    t = _table()
    rises = {(m, size): _mean_ratio(t[c], m) - _mean_ratio(t[b], m) for size, (c, b) in PAIRS.items()
             for m in ("cos", "kl", "overlap")}
    tol = CLAIMS["cot"].shown.value
    assert tol == pytest.approx(max(rises.values()), abs=5e-4)
    assert all(round(r, 3) <= tol for r in rises.values())
    assert rises[("cos", "7B")] > 1 / int(t["Qwen2.5-Math-7B"]["layers"])  # the old tolerance fails P2's own pair
    source = CLAIMS["cot"].shown.source
    assert "cos at 7B" in source and "no significant difference" in source


def test_each_metrics_scale_tolerance_is_p2s_spread_of_that_metric_beside_p2s_words_for_it():
    t = _table()
    inst = [t[f"Qwen2.5-{n}-Instruct"] for n in ("1.5B", "7B", "14B", "32B")]
    s = Study(["m4", "m8"], list(TASKS), {(m, x): _ed(L, 2) for m, L in (("m4", 4), ("m8", 8)) for x in TASKS},
              n_boot=50)
    v = claims.effective_depth.verdicts(s, ["m4", "m8"])["scale"]
    for metric in ("cos", "kl", "overlap"):
        means = [_mean_ratio(r, metric) for r in inst]
        spread = max(means) - min(means)
        assert f"{metric} {spread:.3f}" in v.criterion, metric
        said = v.criterion.split(f"{metric} {spread:.3f}")[1].split("§4.1")[0]  # the words beside it
        words, not_these = ("remarkably stable", "slightly less") if metric == "cos" else ("slightly less consistent "
                                                                                         "across scales", "remarkably")
        assert words in said and not_these not in said, (metric, said)


def test_the_quotations_beside_the_thresholds_are_p2s_words():
    if not QUOTES.exists():
        pytest.skip("no ../shared/reference beside the repository")
    quotes = QUOTES.read_text()
    s = Study(["m4", "m8"], list(TASKS), {(m, x): _ed(L, 2) for m, L in (("m4", 4), ("m8", 8)) for x in TASKS},
              n_boot=50)
    texts = [v.criterion for v in claims.effective_depth.verdicts(s, ["m4", "m8"]).values()]
    texts.append(claims.future_effects.verdict(_future((1.0, 0.3), (1.0, 0.3))).criterion)
    found = [q for text in texts for q in re.findall(r"“([^”]+)”", text)]
    assert found and all(q in quotes for q in found), [q for q in found if q not in quotes]
