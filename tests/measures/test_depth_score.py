"""P1 §6's depth score (hand-made D), its positions, and the whole measurement on a tiny model."""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import torch
from conftest import ATOL

import depthutils
from depthutils.book import claims
from depthutils.book.claims import OUTCOMES
from depthutils.core.answers import ANSWER_MARGIN
from depthutils.core.encoding import encode_all
from depthutils.core.prompts import Encoded, Prompt, encode
from depthutils.measures.depth_score import (
    TASKS,
    _decoding,
    _decoding_batches,
    _solved,
    positions,
)
from depthutils.measures.depth_score_result import DepthScoreResult, score
from depthutils.measures.future_effects import fold, run, work


def upper(L, values):
    D = np.full((L, L), np.nan)
    for s in range(L - 1):
        D[s, s + 1:] = values[s]
    return D


def test_score_is_the_centre_of_mass_of_r():
    L = 5
    assert score(upper(L, [0, 0, 1.0, 0])) == pytest.approx(2.0)       # all effect from layer 2
    assert score(upper(L, [1.0, 1.0, 1.0, 1.0])) == pytest.approx(1.5)  # uniform: mean of 0..L-2
    assert score(upper(L, [0, 0, 0, 0])) is None                       # no effect: undefined, not 0
    # r_s averages over the L-1-s layers above s: one big entry above layer 0 counts 1/(L-1)
    D = upper(L, [0, 0, 0, 0])
    D[0, 4], D[3, 4] = 4.0, 1.0
    r0, r3 = 4.0 / 4, 1.0 / 1
    assert score(D) == pytest.approx((0 * r0 + 3 * r3) / (r0 + r3))


# ------------------------------------------------------------------ P1's statistic: one score per level

def _plain_level_slope(Ds, levels, order, L):
    """Plain numpy: per level (in ``order``, rank 0, 1, …) the max of its prompts' ``D``, its depth score
    over L − 1, and the least-squares slope of those scores against the rank."""
    ys = []
    for lv in order:
        with warnings.catch_warnings():  # j ≤ s is NaN in every prompt
            warnings.simplefilter("ignore", RuntimeWarning)
            M = np.nanmax(Ds[levels == lv], axis=0)
        r = np.array([np.nansum(M[s, s + 1:]) / (L - 1 - s) for s in range(L - 1)])
        ys.append((np.arange(L - 1) * r).sum() / r.sum() / (L - 1))
    return np.polyfit(np.arange(len(order)), ys, 1)[0]


def _random_result(L=6, sizes={1: 5, 2: 7, 4: 6}, seed=0):
    """A depth-score result of random per-prompt ``D`` (levels interleaved), with a second family beside it."""
    rng = np.random.default_rng(seed)
    levels = np.array([lv for lv, n in sizes.items() for _ in range(n)] + [1, 1, 2, 2])
    tasks = np.array(["t"] * sum(sizes.values()) + ["u"] * 4)
    perm = rng.permutation(len(levels))
    levels, tasks = levels[perm], tasks[perm]
    Ds = rng.uniform(0, 1, (len(levels), L, L)) ** 3
    Ds[:, np.tril_indices(L)[0], np.tril_indices(L)[1]] = np.nan
    rows = []
    for t, lvs in (("t", list(sizes)), ("u", [1, 2])):
        for lv in lvs:
            s = score(np.fmax.reduce(Ds[(tasks == t) & (levels == lv)]))
            rows.append(dict(task=t, level=lv, n=int(((tasks == t) & (levels == lv)).sum()), score=s,
                             norm_score=s / (L - 1), accuracy=1.0))
    return DepthScoreResult(meta={"n_layers": L}, prompt_scores=np.array([score(D) for D in Ds]),
                            prompt_levels=levels, prompt_tasks=tasks, prompt_correct=np.ones(len(levels)),
                            prompt_effects=Ds, rows=rows), Ds, levels, tasks


def test_p1s_slope_and_interval_equal_a_plain_implementation():
    """Spec §6: the slope over the levels of the score of ``D`` maxed over each level's prompts, and its
    interval from resampling the prompts within each level and recomputing each level's max and score."""
    r, Ds, levels, tasks = _random_result()
    L, order = 6, [1, 2, 4]
    mine = tasks == "t"
    want = _plain_level_slope(Ds[mine], levels[mine], order, L)
    assert r.slope("t") == pytest.approx(want, abs=1e-12)
    rng = np.random.default_rng(3)
    draws = []
    for _ in range(300):
        idx = np.concatenate([rng.choice(np.flatnonzero(mine & (levels == lv)), (mine & (levels == lv)).sum())
                              for lv in order])
        draws.append(_plain_level_slope(Ds[idx], levels[idx], order, L))
    lo, hi = np.percentile(draws, [2.5, 97.5])
    assert r.slope_interval("t", n_boot=300, seed=3) == pytest.approx((lo, hi), abs=1e-12)
    assert lo <= want <= hi
    # not the slope of the mean of the prompts' scores, which the result keeps beside it (ours)
    means = [np.mean([score(D) for D in Ds[mine & (levels == lv)]]) / (L - 1) for lv in order]
    assert r.mean_slope("t") == pytest.approx(np.polyfit(np.arange(3), means, 1)[0], abs=1e-12)
    assert abs(r.mean_slope("t") - want) > 1e-3
    f = r.facts()
    assert f["t_slope"] == round(want, 3)
    assert (f["t_slope_lo"], f["t_slope_hi"]) == tuple(round(v, 3) for v in r.slope_interval("t"))
    assert f["u_slope"] == pytest.approx(_plain_level_slope(Ds[~mine], levels[~mine], [1, 2], L), abs=1e-3)


def test_a_result_saved_without_the_prompts_matrices_still_loads(tmp_path):
    """A result saved before it kept each prompt's ``D`` loads: P1's slope from its rows, no interval."""
    r, *_ = _random_result()
    old = dataclasses.replace(r, prompt_effects=None)
    old.save(tmp_path / "old")
    back = DepthScoreResult.load(tmp_path / "old")
    assert back.prompt_effects is None and back.slope("t") == pytest.approx(r.slope("t"), abs=1e-12)
    f = back.facts()
    assert f["t_slope"] == r.facts()["t_slope"] and f["t_slope_lo"] is None and f["t_mean_slope_lo"] is not None
    r.save(tmp_path / "new")
    np.testing.assert_array_equal(DepthScoreResult.load(tmp_path / "new").prompt_effects, r.prompt_effects)


def test_positions_follow_p1():
    enc = Encoded(input_ids=None, tokens=[], answer_positions=list(range(10, 40)), predict_positions=[], answer_ids=[])
    assert positions(enc, "first") == [10]
    assert positions(enc, "stride") == [10, 14, 18, 22]  # up to 4 answer positions at stride 4
    assert positions(Encoded(None, [], [], [], []), "first") == []


def test_depth_score_on_a_tiny_model(tiny):
    handle, _ = tiny("llama")
    groups = {"sums": {2: [Prompt.from_parts("5 + 7 = ", "12"), Prompt.from_parts("1 + 2 = ", "3")],
                       3: [Prompt.from_parts("5 + 7 + 5 = ", "17"), Prompt.from_parts("1 + 2 + 3 = ", "6")]}}
    r = depthutils.depth_score(handle, groups=groups)
    assert [row["level"] for row in r.rows] == [2, 3] and all(row["n"] == 2 for row in r.rows)
    L = handle.n_layers
    for row in r.rows:
        assert 0 <= row["score"] <= L - 2 and row["norm_score"] == pytest.approx(row["score"] / (L - 1))
        assert row["accuracy"] in (0.0, 0.5, 1.0)
    # the level's score is that of D maxed over its prompts, recomputed here from the prompts' own D
    p = groups["sums"][3]
    Ds = [depthutils.future_effects(handle, [q], positions=[depthutils.core.prompts.encode(
        handle.tokenizer, q).answer_positions[0]]).layer_effect for q in p]
    assert r.rows[1]["score"] == pytest.approx(score(np.fmax(*Ds)))
    assert r.prompt_scores.shape == (4,) and list(r.prompt_levels) == [2, 2, 3, 3]
    assert r.prompt_effects.shape == (4, L, L)  # each prompt's D, so a resample recomputes the level's max
    np.testing.assert_allclose(r.prompt_effects[2:], np.stack(Ds), rtol=0, atol=ATOL)
    assert r.slope("sums") == pytest.approx(r.rows[1]["norm_score"] - r.rows[0]["norm_score"], abs=1e-12)
    assert claims.depth_score.verdict(r).outcome in OUTCOMES


def test_depth_score_round_trips(tiny, tmp_path):
    handle, _ = tiny("llama")
    r = depthutils.depth_score(handle, groups={"x": {1: [Prompt.from_parts("5 + 7 = ", "12")]}}, accuracy=False)
    r.save(tmp_path / "ds")
    back = DepthScoreResult.load(tmp_path / "ds")
    assert back.rows == r.rows and list(back.prompt_tasks) == ["x"]


def test_unknown_task_is_one_clear_error(tiny):
    handle, _ = tiny("llama")
    with pytest.raises(depthutils.DepthError, match=r"Unknown task\(s\) \['sudoku'\]; choose from addition"):
        depthutils.depth_score(handle, ["sudoku"])


def test_greedy_decoding_equals_transformers_generate(tiny):
    """Accuracy decodes through nnsight (so it runs on NDIF too): the same ids as plain generate."""
    handle, oracle = tiny("llama")
    ids = handle.tokenizer("5 + 7 + 5 + 3 = ", return_tensors="pt").input_ids
    got = handle.greedy(ids, 6)
    want = oracle.generate(ids, max_new_tokens=6, do_sample=False, attention_mask=torch.ones_like(ids),
                           pad_token_id=handle.tokenizer.eos_token_id)
    assert got.shape == (1, ids.shape[1] + 6) and torch.equal(got, want)
    with pytest.raises(depthutils.DepthError, match=r"\[1, tokens\]"):
        handle.greedy(ids[0], 6)


def test_batched_greedy_decoding_equals_one_by_one():
    """The depth score decodes its prompts in left-padded batches: the same ids as one prompt at a time,
    on the book's default model, for contexts of different lengths and budgets (MATH's 48 tokens too)."""
    handle = depthutils.load_model("default")
    decodings = []
    for task, level in (("addition", 2), ("addition", 5), ("multihop", 3), ("mquake", 4), ("math", 1)):
        kept, encs, _ = encode_all(handle, TASKS[task][1](level, 3, 0), need_answer=True)
        decodings += [_decoding(p, e, 48) for p, e in zip(kept, encs)]
    batches, groups = _decoding_batches(decodings, size=8)
    assert sorted(i for g in groups for i in g) == list(range(len(decodings)))
    assert any(len(set(c.shape[1] for c in contexts)) > 1 for contexts, _ in batches)  # padding is exercised
    for (contexts, budgets), g in zip(batches, groups):
        for i, got in zip(g, handle.greedy_batch(contexts, budgets)):
            assert torch.equal(got, handle.greedy(*decodings[i])), f"decoding {i} differs"


def test_layer_effect_without_the_output_effect(tiny):
    """The depth score asks future effects for the layer effect only (no unembedding): same ``D``."""
    handle, _ = tiny("llama")
    enc = encode(handle.tokenizer, Prompt.from_parts("5 + 7 + 5 + 3 + 1 = ", "21"))
    ts = enc.answer_positions[:1]
    for fast in (True, False):
        full, bare = (work(handle, enc, ts, fast=fast, output=o) for o in (True, False))
        D, O = fold(handle.n_layers, full, run(handle, full))
        D2, O2 = fold(handle.n_layers, bare, run(handle, bare))
        np.testing.assert_allclose(D2, D, rtol=0, atol=1e-6)
        assert np.isfinite(O).all() and np.isnan(O2).all()


# ------------------------------------------------------------------ judging a real, digit-by-digit tokenizer

def _smollm2_tokenizer():
    """SmolLM2's tokenizer (numbers in single digits) from the shared cache; skipped when not fetched."""
    from transformers import PreTrainedTokenizerFast

    from depthutils.models.real.catalog import cache_root
    folder = cache_root() / "smollm2-135m"
    if not (folder / "tokenizer.json").exists():
        pytest.skip("smollm2-135m is not in the cache (python -m depthutils fetch smollm2-135m)")
    return PreTrainedTokenizerFast.from_pretrained(str(folder))


class _Handle:
    """Just what encoding and judging read from a model handle."""
    def __init__(self, tokenizer):
        self.tokenizer, self.prepend_bos, self.max_length = tokenizer, True, None


@pytest.mark.parametrize("context, answer", [("3 + 4 = 7\n8 + 5 =", " 13"), ("3 + 4 = 7\n8 + 5 = ", "13"),
                                             ("Question: Who wrote Hamlet?\nAnswer:", " William Shakespeare"),
                                             ("Question: 2 + 2?\nAnswer:", "4")])
def test_multi_token_answers_are_judged_on_what_follows_them(context, answer):
    """SmolLM2 writes " 13" as three tokens. The decoding budget leaves room past the answer, and a
    continuation that extends it is wrong: "1" is not solved by "15" (the old judge said it was, because
    it read only the answer's own number of tokens and compared prefixes)."""
    tok = _smollm2_tokenizer()
    handle = _Handle(tok)
    p = Prompt.from_parts(context, answer)
    enc = encode(tok, p, need_answer=True)
    assert tok.decode(enc.answer_ids) == answer  # the answer tokens are the answer's, and nothing of the context
    ctx, n_new = _decoding(p, enc, 48)
    assert n_new == len(enc.answer_ids) + ANSWER_MARGIN and torch.equal(ctx, enc.input_ids[:, :enc.answer_positions[0]])

    def solved(continuation):
        ids = tok(continuation, add_special_tokens=False, return_tensors="pt").input_ids
        return _solved(handle, p, ctx, torch.cat([ctx, ids], 1))

    assert solved(answer + "\n") and solved(" " + answer.strip() + "\n\n") and solved(answer.strip())
    wrong = answer.strip()[:-1] if len(answer.strip()) > 1 else answer.strip() + "0"
    assert not solved(" " + wrong + "\n")                     # a shorter number / an extended one
    assert not solved(" " + answer.strip() + "5\n")            # the answer continued: "13" is not "135"


@pytest.mark.parametrize("family", ["llama", "gemma3_text", "gpt2"])
@pytest.mark.parametrize("mode", ["future", "all"])
def test_one_pass_up_the_stack_equals_one_skipped_layer_at_a_time(tiny, family, mode):
    """The layer effect alone runs every skipped layer in one pass up the stack (rows join above the layer
    they skip): the same ``D`` as the fast path's one run per skipped layer and as the nnsight forwards,
    with several positions ``t`` (MATH's stride rule)."""
    handle, _ = tiny(family)
    enc = encode(handle.tokenizer, Prompt.from_parts("5 + 7 + 5 + 3 + 1 = ", "21 and 22 and 23"))
    ts = enc.answer_positions[::2][:3]
    assert len(ts) == 3
    wave = work(handle, enc, ts, fast=True, output=False, mode=mode)
    per_layer = work(handle, enc, ts, fast=True, output=True, mode=mode)  # one stack run per skipped layer
    slow = work(handle, enc, ts, fast=False, output=False, mode=mode)
    D = fold(handle.n_layers, wave, run(handle, wave))[0]
    for other in (per_layer, slow):
        np.testing.assert_allclose(D, fold(handle.n_layers, other, run(handle, other))[0], rtol=0, atol=ATOL)
