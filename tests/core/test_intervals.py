"""Per-prompt values and bootstrap intervals over prompts.

Checked on the project's default model (a trained 8-layer Llama) and on tiny random models:
per-prompt values agree with single-prompt runs and aggregate back to the reported value; an
interval contains its point estimate, narrows as prompts are added, and is fixed by its seed.
"""
from __future__ import annotations

import tomllib

import numpy as np
import pytest
from conftest import ATOL, ROOT

import depthutils as du
from depthutils import data
from depthutils.core.results import aggregate, bootstrap, paired_interval
from depthutils.measures.effective_depth import effective_depth


@pytest.fixture(scope="module")
def default():
    return du.load_model("default")


@pytest.fixture(scope="module")
def gsm16():
    return data.load("gsm8k", 16)


@pytest.fixture(scope="module")
def contrib16(default, gsm16):
    return du.contributions(default, gsm16, progress_bar=False)


def inside(band, value, tol=1e-12):
    lo, hi = (np.asarray(b, float) for b in band)
    value = np.asarray(value, float)
    ok = np.isnan(value) | ((lo - tol <= value) & (value <= hi + tol))
    return bool(ok.all())


def test_per_prompt_values_are_single_prompt_runs_and_aggregate_back(default, gsm16, contrib16):
    r = contrib16
    assert r.layer_ratio_by_prompt.shape == (16, default.n_layers) and r.prompt_tokens.shape == (16,)
    for i in (0, 7):
        one = du.contributions(default, [gsm16[i]], progress_bar=False)
        for name in r.PER_PROMPT:
            np.testing.assert_allclose(getattr(r, f"{name}_by_prompt")[i], getattr(one, name), atol=ATOL)
    # the reported aggregate is the token-weighted mean of the per-prompt means
    for name in r.PER_PROMPT:
        per = getattr(r, f"{name}_by_prompt")
        manual = (per * r.prompt_tokens[:, None]).sum(0) / r.prompt_tokens.sum()
        np.testing.assert_allclose(getattr(r, name), manual, rtol=1e-12)
    assert r.meta["params"]["tokens"] == int(r.prompt_tokens.sum())


def test_lens_and_future_effects_aggregate_back(default, gsm16):
    lens = du.logit_lens(default, gsm16[:5], progress_bar=False)
    w = lens.prompt_tokens[:, None]
    np.testing.assert_allclose(lens.kl, (lens.kl_by_prompt * w).sum(0) / w.sum(), rtol=1e-12)
    fut = du.future_effects(default, gsm16[:3], progress_bar=False)
    assert fut.layer_effect_by_prompt.shape == (3, default.n_layers, default.n_layers)
    np.testing.assert_array_equal(fut.output_effect, fut.output_effect_by_prompt.max(0))  # P1: max over prompts
    one = du.future_effects(default, [gsm16[1]], progress_bar=False)
    np.testing.assert_allclose(fut.layer_effect_by_prompt[1], one.layer_effect, atol=ATOL)


def test_interval_contains_the_estimate_and_is_fixed_by_its_seed(contrib16):
    for name in ("layer_ratio", "attn_cos", "mlp_cos"):
        band = contrib16.interval(name)
        assert inside(band, getattr(contrib16, name))
        again = contrib16.interval(name)
        np.testing.assert_array_equal(band[0], again[0])
        np.testing.assert_array_equal(band[1], again[1])
    other = contrib16.interval("layer_ratio", seed=1)
    assert not np.array_equal(other[0], contrib16.interval("layer_ratio")[0])
    ratio = contrib16.facts()["ratio"]
    lo, hi = contrib16.interval(lambda r: r.facts()["ratio"])
    assert lo <= ratio <= hi


def test_interval_narrows_as_prompts_are_added(default, gsm16, contrib16):
    small = du.contributions(default, gsm16[:4], progress_bar=False)
    width = lambda r: float(np.mean(np.subtract(*r.interval("layer_ratio")[::-1])[1:]))
    assert width(contrib16) < width(small)


def test_max_over_prompts_interval_tops_out_at_the_max_and_the_mean_has_its_own(default, gsm16):
    fut = du.future_effects(default, gsm16[:6], progress_bar=False)
    lo, hi = fut.interval("output_effect")
    np.testing.assert_allclose(hi, fut.output_effect)  # a resample never exceeds the observed max
    assert (lo <= fut.output_effect + 1e-12).all()
    mean, mlo, mhi = fut.mean_interval("output_effect")
    np.testing.assert_allclose(mean, fut.output_effect_by_prompt.mean(0))
    assert inside((mlo, mhi), mean)


def test_effective_depth_interval_resamples_the_curve(default, gsm16):
    r = effective_depth(default, gsm16[:8], progress_bar=False)
    assert r.kl_by_prompt.shape == (8, default.n_layers)
    for metric in ("kl", "overlap"):
        lo, hi = r.ratio_interval(metric)
        if r.ratio(metric) is not None:
            assert lo <= r.ratio(metric) <= hi
    # one prompt repeated is that prompt's own curve and effective depth
    solo = r.resample([3] * 8)
    np.testing.assert_allclose(solo.kl, r.kl_by_prompt[3])
    assert solo.ed_kl == du.measures.curves.ed_kl(r.kl_by_prompt[3])


def test_save_and_load_keep_the_per_prompt_values(tmp_path, contrib16):
    back = du.Result.load(contrib16.save(tmp_path / "c"))
    np.testing.assert_array_equal(back.layer_cos_by_prompt, contrib16.layer_cos_by_prompt)
    np.testing.assert_array_equal(back.interval("layer_cos")[0], contrib16.interval("layer_cos")[0])


def test_bootstrap_and_aggregate_basics():
    v = np.array([[1.0, 2.0], [3.0, np.nan], [5.0, 4.0]])
    np.testing.assert_allclose(aggregate(v, "max"), [5.0, 4.0])
    np.testing.assert_allclose(aggregate(v[:, :1], "tokens", [1, 1, 2]), [3.5])
    x = np.arange(10.0)
    a = bootstrap(10, lambda idx: x[idx].mean(), seed=3)
    assert a == bootstrap(10, lambda idx: x[idx].mean(), seed=3)
    assert a[0] < 4.5 < a[1]
    assert np.isnan(bootstrap(4, lambda idx: None)[0])  # undefined in every resample: NaN, not a crash
    with pytest.raises(du.DepthError, match="level"):
        bootstrap(4, lambda idx: 0.0, level=95)


def test_paired_interval_of_a_result_with_itself_is_zero(contrib16):
    lo, hi = paired_interval(contrib16, contrib16, lambda r: r.facts()["ratio"], n_boot=50)
    assert lo == hi == 0


def test_seaborn_and_pandas_are_pinned():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = dict(d.split("==") for d in deps)
    assert pins.get("seaborn") == "0.13.2" and "pandas" in pins
    assert all("==" in d for d in deps)
