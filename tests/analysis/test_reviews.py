"""The reviewers' questions: early exit and norm growth against plain PyTorch (forward hooks on a plain
``transformers`` model, :mod:`oracle`), on families whose layers add what their modules output (Llama), add a
normed output (Gemma 3) and scale it (Granite); and their verdicts, which can come out every way."""
from __future__ import annotations

import numpy as np
import oracle
import pytest
import torch
from conftest import ATOL, TEXT

from depthutils.book.reviews import early_exit as exit_review
from depthutils.book.reviews import norm_growth as norm_review
from depthutils.book.reviews import readout_check as check
from depthutils.core.depth import LENS_POSITIONS
from depthutils.core.encoding import encode_all
from depthutils.core.prompts import Prompt
from depthutils.measures.early_exit import EarlyExitResult, early_exit
from depthutils.measures.norm_growth import NormGrowthResult, norm_growth
from depthutils.measures.tuned_lens import fit_readouts

FAMILIES = ["llama", "gemma3_text", "granite"]


def _skipped_logits(hf, family, ids, first):
    """The model's logits with layers ``first … L−1`` skipped: each returns its input (plain hooks)."""
    P = oracle.parts(hf, family)
    seen = {}

    def pre(i):
        def f(mod, args, kwargs):
            seen[i] = args[0] if args else kwargs["hidden_states"]
        return f

    def post(i):
        def f(mod, args, out):
            return (seen[i],) + tuple(out[1:]) if isinstance(out, tuple) else seen[i]
        return f

    layers = P["layers"][first:]
    handles = [m.register_forward_pre_hook(pre(id(m)), with_kwargs=True) for m in layers]
    handles += [m.register_forward_hook(post(id(m))) for m in layers]
    with oracle.hooks(*handles), torch.no_grad():
        return hf(ids).logits[0]


@pytest.mark.parametrize("family", FAMILIES)
def test_early_exit_matches_a_plain_pytorch_oracle(tiny, prompts, family):
    handle, hf = tiny(family)
    words = TEXT.split()
    fit = [Prompt.from_parts(" ".join(words[i:i + 13]), " " + words[i + 13], "test") for i in range(20)]
    readouts = fit_readouts(handle, fit, progress_bar=False)
    got = early_exit(handle, prompts, readouts=readouts, progress_bar=False)
    _, encs, _ = encode_all(handle, prompts, need_answer=True)
    P, L = oracle.parts(hf, family), handle.n_layers
    for i, e in enumerate(encs):
        with torch.no_grad():
            h, _, _, logits = oracle.record(hf, family, e.input_ids)
            pp, gold = e.predict_positions, torch.tensor(e.answer_ids)
            tops = [P["finish"](P["head"](P["norm"](h[l])))[pp].argmax(-1) for l in range(L)] + [logits[pp].argmax(-1)]
            skipped = _skipped_logits(hf, family, e.input_ids, L // 2)[pp].argmax(-1)
            normed = [P["norm"](h[l]).double() for l in range(L)]
            mapped = [(torch.cat([n, torch.ones(len(n), 1, dtype=n.dtype)], -1) @ readouts.maps[l]).float()
                      for l, n in enumerate(normed)]
            tuned_z = [P["finish"](P["head"](x))[pp] for x in mapped]
            raw_z = [P["finish"](P["head"](P["norm"](h[l])))[pp] for l in range(L)]
            tuned = [z.argmax(-1) for z in tuned_z]
            log_p = logits[pp].double().log_softmax(-1)
            kl = lambda z: (log_p.exp() * (log_p - z.double().log_softmax(-1))).sum(-1).mean().item()  # noqa: E731
        np.testing.assert_allclose(got.gold_by_prompt[i], [(t == gold).double().mean().item() for t in tops])
        np.testing.assert_allclose(got.agree_by_prompt[i], [(t == tops[L]).double().mean().item() for t in tops])
        # the skipped model, run for real, is what the result reports for it
        assert got.skip_gold_by_prompt[i] == pytest.approx((skipped == gold).double().mean().item())
        assert got.skip_agree_by_prompt[i] == pytest.approx((skipped == tops[L]).double().mean().item())
        assert got.correct_by_prompt[i] == (tops[L] == gold).sum().item()
        assert got.kept_by_prompt[i] == ((tops[L] == gold) & (skipped == gold)).sum().item()
        # the tuned readout: the same maps applied to the oracle's residuals, through the plain final norm and head
        np.testing.assert_allclose(got.tuned_gold_by_prompt[i], [(t == gold).double().mean().item() for t in tuned])
        assert got.tuned_kept_by_prompt[i] == ((tops[L] == gold) & (tuned[L // 2] == gold)).sum().item()
        # the readout check's numbers: KL(q_L ‖ ·), the output first, over full softmaxes, and the answers kept per layer
        np.testing.assert_allclose(got.kl_by_prompt[i], [kl(z) for z in raw_z], rtol=1e-4, atol=ATOL)
        np.testing.assert_allclose(got.tuned_kl_by_prompt[i], [kl(z) for z in tuned_z], rtol=1e-4, atol=ATOL)
        assert got.kept_at_by_prompt[i].tolist() == [((tops[L] == gold) & (t == gold)).sum().item() for t in tops[:L]]
        assert got.tuned_kept_at_by_prompt[i].tolist() == [((tops[L] == gold) & (t == gold)).sum().item() for t in tuned]
    assert got.agree_by_prompt[:, L].min() == 1.0  # the exit after the last layer is the model's output
    f = got.facts()
    correct, kept = got.correct_by_prompt.sum(), got.kept_by_prompt.sum()
    assert f["lost"] == (None if correct == 0 else pytest.approx(1 - kept / correct, abs=5e-4))


@pytest.mark.parametrize("family", FAMILIES)
def test_norm_growth_matches_a_plain_pytorch_oracle(tiny, prompts, family):
    handle, hf = tiny(family)
    got = norm_growth(handle, prompts, progress_bar=False)
    _, encs, _ = encode_all(handle, prompts)
    P, L = oracle.parts(hf, family), handle.n_layers
    rows = {k: [] for k in ("h_norm", "delta_norm", "ratio", "h_first", "peak_first", "peak_rest", "median_abs",
                            "lens_kl", "lens_overlap")}
    weights = []
    for e in encs:
        with torch.no_grad():
            h, _, _, logits = oracle.record(hf, family, e.input_ids)
            lens = torch.stack([P["finish"](P["head"](P["norm"](h[l]))) for l in range(L)]).double().log_softmax(-1)
        h = h.double()  # [L+1, T, H]
        final = logits.double().log_softmax(-1)  # [T, V]
        n, a = h.norm(dim=-1), h.abs()
        d = (h[1:] - h[:-1]).norm(dim=-1)
        rows["h_norm"].append(n[:, 1:].mean(-1))
        rows["delta_norm"].append(d[:, 1:].mean(-1))
        rows["ratio"].append((d / n[:-1])[:, 1:].mean(-1))
        rows["h_first"].append(n[:, 0])
        rows["peak_first"].append(a[:, 0].amax(-1))
        rows["peak_rest"].append(a[:, 1:].amax((-1, -2)))
        rows["median_abs"].append(a[:, 1:].median(-1).values.mean(-1))
        last = range(max(1, e.n_tokens - LENS_POSITIONS), e.n_tokens)  # the lens reads the last positions only
        rows["lens_kl"].append((lens.exp() * (lens - final)).sum(-1)[:, list(last)].mean(-1))
        top, top_final = lens.topk(5, dim=-1).indices, final.topk(5, dim=-1).indices
        rows["lens_overlap"].append(torch.tensor([[len(set(top[l, t].tolist()) & set(top_final[t].tolist())) / 5
                                                   for t in last] for l in range(L)]).mean(-1))
        weights.append(e.n_tokens - 1)
    w = torch.tensor(weights, dtype=torch.float64)
    for key, per in rows.items():
        per = torch.stack(per)
        want = (per.mean(0) if key in ("h_first", "lens_kl", "lens_overlap") else per.amax(0) if key.startswith("peak")
                else (w[:, None] * per).sum(0) / w.sum())
        np.testing.assert_allclose(getattr(got, key), want.numpy(), rtol=1e-4, atol=ATOL, err_msg=key)
    # the statistic: chapter 1's halves of layers 1 … L−1, on ‖Δ‖
    d = got.delta_norm[1:]
    first, second = d[:len(d) // 2].mean(), d[len(d) // 2:].mean()
    assert got.facts()["abs_ratio"] == pytest.approx(second / first, abs=5e-3)


def _exit_result(correct, kept, n=20, L=8, tuned_kept=None, tuned_kl=None, tuned_kept_at=None) -> EarlyExitResult:
    """A result of ``n`` prompts with these counts of answer tokens right (full model; model cut after its first
    half with the raw lens too; with the tuned readout too, by default as many as with the raw lens), and the readout
    check's numbers: the raw lens at KL 2 nats and keeping ``kept`` at every layer, the tuned readout at ``tuned_kl``
    (default 1 nat) keeping ``tuned_kept_at`` (default its ``tuned_kept``) at every layer."""
    per = np.zeros((n, L + 1))
    tuned = np.asarray(kept if tuned_kept is None else tuned_kept, float)
    at = lambda v: np.repeat(np.asarray(v, float)[:, None], L, 1)  # noqa: E731
    return EarlyExitResult(gold_by_prompt=per, agree_by_prompt=per, skip_gold_by_prompt=np.zeros(n),
                           skip_agree_by_prompt=np.zeros(n), correct_by_prompt=np.asarray(correct, float),
                           kept_by_prompt=np.asarray(kept, float), tuned_gold_by_prompt=per[:, :L],
                           tuned_skip_gold_by_prompt=np.zeros(n), tuned_skip_agree_by_prompt=np.zeros(n),
                           tuned_kept_by_prompt=tuned, kl_by_prompt=np.full((n, L), 2.0),
                           tuned_kl_by_prompt=np.full((n, L), 1.0) if tuned_kl is None else np.asarray(tuned_kl, float),
                           kept_at_by_prompt=at(kept),
                           tuned_kept_at_by_prompt=at(tuned) if tuned_kept_at is None else np.asarray(tuned_kept_at, float)
                           ).with_aggregates()


def test_the_early_exit_verdict_can_come_out_every_way():
    n = 20
    all_lost = _exit_result([1] * n, [0] * n)
    none_lost = _exit_result([1] * n, [1] * n)
    half = _exit_result([1] * n, [0, 1] * (n // 2))
    assert exit_review.verdict({"a": all_lost}).outcome == "shown"
    assert exit_review.verdict({"a": none_lost}).outcome == "not shown"
    assert exit_review.verdict({"a": half}).outcome == "mixed"
    assert exit_review.verdict({"a": all_lost, "b": none_lost}).outcome == "mixed"
    few = _exit_result([1, 1] + [0] * (n - 2), [0] * n)  # 2 correct answer tokens: below MIN_CORRECT
    v = exit_review.verdict({"a": few})
    assert v.outcome == "not tested" and str(exit_review.MIN_CORRECT) in v.notes[0]
    # the tuned readout keeping the answers is enough; the last note says which reading the outcome supports
    cheap = _exit_result([1] * n, [0] * n, tuned_kept=[1] * n)
    v = exit_review.verdict({"a": cheap})
    assert v.outcome == "not shown" and v.notes[-1] == f"This outcome supports {exit_review.READINGS['not shown']}."
    assert exit_review.verdict({"a": all_lost}).notes[-1].endswith(exit_review.READINGS["shown"] + ".")
    untuned = EarlyExitResult(gold_by_prompt=np.zeros((n, 9)), agree_by_prompt=np.zeros((n, 9)),
                              skip_gold_by_prompt=np.zeros(n), skip_agree_by_prompt=np.zeros(n),
                              correct_by_prompt=np.ones(n), kept_by_prompt=np.zeros(n)).with_aggregates()
    assert exit_review.verdict({"a": untuned}).outcome == "not tested"  # measured without a tuned readout
    assert check.readout_checks({"a": untuned}) == {}
    # either cheap readout keeping most answers is enough against the claim: the raw lens keeps them all here
    # (where the tuned readout keeps them too at every layer but the middle, whose answers it loses)
    kept_at = np.ones((n, 8))
    kept_at[:, 4] = 0
    raw_keeps = _exit_result([1] * n, [1] * n, tuned_kept=[0] * n, tuned_kept_at=kept_at)
    assert check.readout_checks({"a": raw_keeps})["a"].failing() == [4]  # ... which fails the readout check there
    assert exit_review.verdict({"a": raw_keeps}).outcome == "not tested"
    assert "both readouts" in exit_review.verdict({"a": none_lost}).criterion


def test_the_grade_counts_only_where_the_readout_beats_the_raw_lens_at_every_layer():
    n, L = 20, 8
    good = _exit_result([1] * n, [0] * n)  # the tuned readout: KL 1 against the raw lens's 2, as many answers kept
    checks = check.readout_checks({"a": good})
    assert check.passes(checks) and checks["a"].failing() == [] and checks["a"].prompts == n == checks["a"].correct
    assert len(checks["a"].table().splitlines()) == L + 1 and "FAIL" not in check.summary(checks)
    v = exit_review.verdict({"a": good})
    assert v.outcome == "shown" and v.value and any("beats the raw lens at every layer" in x for x in v.notes)
    # a higher KL at one layer fails the check, and the grade is not tested whatever the shares
    kl = np.ones((n, L))
    kl[:, 3] = 2.5
    worse_kl = _exit_result([1] * n, [0] * n, tuned_kl=kl)
    # a tie in KL is no win either
    kl_tie = np.ones((n, L))
    kl_tie[:, 0] = 2.0
    tie = _exit_result([1] * n, [0] * n, tuned_kl=kl_tie)
    # fewer answers kept at one layer fails it too (here the raw lens keeps one per prompt at every layer)
    kept_at = np.ones((n, L))
    kept_at[:5, 6] = 0
    fewer = _exit_result([1] * n, [1] * n, tuned_kept_at=kept_at)
    for bad, layer in ((worse_kl, 3), (tie, 0), (fewer, 6)):
        checks = check.readout_checks({"a": bad, "b": good})  # every set must pass: "b" passing does not make up
        assert not check.passes(checks) and checks["a"].failing() == [layer] and checks["b"].passed
        assert checks["a"].table().splitlines()[layer + 1].endswith("FAIL")
        v = exit_review.verdict({"a": bad, "b": good})
        assert v.outcome == "not tested" and v.value == ""
        assert any(f"on a not at h_{layer}" in x and "not tested on this model" in x for x in v.notes)
        assert f"on a not at h_{layer}" in exit_review.check_sentence({"a": bad})
    assert not check.passes({}) and exit_review.check_lines({"a": good})[0].startswith("readout check: The tuned")


def _norm_result(delta, h=None, n=10, noise=0.01) -> NormGrowthResult:
    """A result of ``n`` prompts whose layers write ``‖Δ_l‖ = delta`` onto residuals of norm ``h`` (``[L]``,
    default 10 everywhere), each prompt's values off by a relative ``noise``."""
    delta = np.asarray(delta, float)
    L = len(delta)
    h = np.full(L, 10.0) if h is None else np.asarray(h, float)
    rng = np.random.default_rng(0)
    d = delta[None] * (1 + noise * rng.standard_normal((n, L)))
    hn = np.repeat(np.r_[h, h[-1]][None], n, 0)
    flat = np.ones((n, L + 1))
    return NormGrowthResult(h_norm_by_prompt=hn, delta_norm_by_prompt=d, ratio_by_prompt=d / hn[:, :L],
                            h_first_by_prompt=hn, peak_first_by_prompt=flat, peak_rest_by_prompt=flat,
                            median_abs_by_prompt=flat, lens_kl_by_prompt=np.zeros((n, L)),
                            lens_overlap_by_prompt=np.ones((n, L)), prompt_tokens=np.full(n, 5)).with_aggregates()


def test_the_norm_growth_verdict_can_come_out_every_way():
    grows = np.r_[10.0, 10, 10, 10, 10, 40, 40, 40]  # the residual's norm grows 4x in the second half
    ones = np.ones(8)
    # the relative contribution falls (by the growth) while what a layer writes does not: only norm growth
    assert norm_review.verdict(_norm_result(np.r_[1.0, 1, 1, 1, 1, 1.2, 1.2, 1.2], grows)).outcome == "shown"
    # it falls and what a layer writes falls too
    assert norm_review.verdict(_norm_result(np.r_[1.0, 1, 1, 1, 1, 0.5, 0.5, 0.5], grows)).outcome == "not shown"
    # what a layer writes: the second half's interval straddles 1
    straddle = _norm_result(np.r_[1.0, 1, 1, 1, 1, 1, 1, 1], grows, noise=0.2)
    assert norm_review.verdict(straddle).outcome == "mixed"
    # without norm growth a fall of what a layer writes is the whole fall: not only the norm
    assert norm_review.verdict(_norm_result(np.r_[1.0, 1, 1, 1, 1, 0.5, 0.5, 0.5])).outcome == "not shown"
    # no fall of the relative contribution: nothing to explain (ladder-8's case: a relative ratio above 1)
    rises = norm_review.verdict(_norm_result(np.r_[1.0, 1, 1, 1, 1, 2, 2, 2]))
    assert rises.outcome == "not tested" and "does not fall" in rises.numbers
    assert norm_review.verdict(_norm_result(ones)).outcome == "not tested"
    assert norm_review.verdict(_norm_result(ones[:3])).outcome == "not tested"  # halves of one layer


def test_massive_activations_and_the_lens_agreement_are_located():
    r = _norm_result(np.ones(8))
    assert r.facts()["massive_layer"] is None and r.facts()["agree_layer"] == 0
    r.peak_first[3:] = 5000.0  # a component 5000x the median from h_3 on, at position 0
    r.lens_overlap[:] = [0, 0, 0.1, 0.2, 0.31, 0.5, 0.8, 1]
    f = r.facts()
    assert (f["massive_layer"], f["peak_at"], f["agree_layer"], f["agree_rel"]) == (3, "position 0", 4, 0.5)
    words = norm_review.depth_words(f)
    assert "from h_3" in words and "at h_4" in words


def test_the_ladder_table_has_a_set_column_only_for_sets_of_prompts():
    from depthutils.book.report import ladder_table

    one = ladder_table({"m": _norm_result(np.ones(8))}, {"abs_ratio": "ratio"}, norm_review.verdict)
    assert one.splitlines()[0] == "| model | ratio | verdict |" and "| m (8 layers) | 1.00 [" in one
    n = 20
    sets = ladder_table({"m": {"a": _exit_result([1] * n, [0] * n)}}, {"lost": "lost"}, exit_review.verdict)
    assert sets.splitlines()[0] == "| model | set | lost | verdict |" and sets.endswith("| shown |")


def test_a_sample_grades_the_first_facts_of_each_kind():
    from depthutils.analysis.known_facts import FactPrompts

    facts = FactPrompts(prompts={"arithmetic": "a1", "arithmetic_2": "a2", "multihop": "m1", "multihop_2": "m2",
                                 "multihop_3": "m3"}, candidates=["c"])
    assert list(exit_review.first_of_each_kind(facts, 1).prompts) == ["arithmetic", "multihop"]
    assert list(exit_review.first_of_each_kind(facts, 2).prompts) == ["arithmetic", "arithmetic_2", "multihop",
                                                                      "multihop_2"]
    assert exit_review.first_of_each_kind(facts, 5).prompts == facts.prompts
    assert exit_review.first_of_each_kind(facts, 1).candidates == ["c"]
