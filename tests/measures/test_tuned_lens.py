"""The tuned readout (chapter 3's early-exit section): its closed-form fit against an independent least-squares fit
in plain PyTorch (forward hooks on a plain ``transformers`` model, :mod:`oracle`, and ``torch.linalg.lstsq``, the
ridge towards the identity written as extra rows), its KL and overlap against full softmaxes and Python sets, and
what holds of any run."""
from __future__ import annotations

import numpy as np
import oracle
import pytest
import torch
from conftest import ATOL, TEXT, zero_tol

import depthutils as du
from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError
from depthutils.core.prompts import Prompt
from depthutils.measures.tuned_lens import evaluated, fit_readouts, kl_sample, tuned_lens

FAMILIES = ["llama", "gemma3_text"]


def _texts(start: int, n: int, words: int = 14) -> list[Prompt]:
    w = TEXT.split()
    return [Prompt(" ".join(w[i:i + words]), len(" ".join(w[i:i + words])), "test") for i in range(start, start + n)]


def _questions(start: int, n: int, words: int = 14) -> list[Prompt]:
    """Windows of the text whose last word is the answer."""
    w = TEXT.split()
    return [Prompt.from_parts(" ".join(w[i:i + words - 1]), " " + w[i + words - 1], "test") for i in range(start, start + n)]


# other windows: none of the evaluation's is one of the fit's (TEXT repeats every 37 words)
FIT, EVAL = _texts(0, 16), _texts(20, 4)
FIT_QA = _questions(0, 24)


def _oracle_maps(hf, family, encs, at: str = "all", ridge: float = 0.0):
    """``[L, H+1, H]``: per layer, ``torch.linalg.lstsq`` of ``[n_l, 1]`` onto ``n_L`` (``n = norm(h)``, the plain
    model's final norm) at the fitted positions (every one but 0, or those that predict the answer), from one hooked
    forward per text (float64);
    a ridge towards the identity map as ``H + 1`` extra rows, ``√(λs)·[e_i, 0] → √(λs)·e_i`` and ``√(λs)·[0, 1] → 0``
    (``s`` the mean over the inputs' columns of their sums of squares); also the fit's inputs with their bias column
    and its targets."""
    xs, ys = [], []
    for e in encs:
        with torch.no_grad():  # [L+1, T, H]: layer inputs, then the last output, normed
            h = oracle.parts(hf, family)["norm"](oracle.record(hf, family, e.input_ids)[0]).double()
        rows = list(e.predict_positions) if at == "answers" else list(range(1, e.n_tokens))
        xs.append(h[:-1, rows])
        ys.append(h[-1, rows])
    x, y = torch.cat(xs, 1), torch.cat(ys, 0)
    xb = torch.cat([x, torch.ones(*x.shape[:-1], 1, dtype=x.dtype)], -1)
    H, maps = y.shape[-1], []
    for l in range(x.shape[0]):
        s = (x[l] ** 2).sum(0).mean()
        prior = (ridge * s).sqrt() * torch.eye(H + 1, dtype=x.dtype)  # its last row: the bias towards 0
        a = torch.cat([xb[l], prior]) if ridge else xb[l]
        target = torch.cat([y, prior[:, :H]]) if ridge else y
        maps.append(torch.linalg.lstsq(a, target).solution)
    return torch.stack(maps), xb, y


@pytest.mark.parametrize("family", FAMILIES)
def test_the_tuned_readout_is_an_independent_least_squares_fit(tiny, family):
    handle, hf = tiny(family)
    got = fit_readouts(handle, FIT, at="all", ridge=0.0, kl_rows=0, progress_bar=False)
    _, encs, _ = encode_all(handle, FIT)
    want, xb, y = _oracle_maps(hf, family, encs)
    assert got.tokens == xb.shape[1] and got.maps.shape == want.shape and got.at == "all"
    # the two solvers (normal equations, QR) agree on the fitted values, which the minimum fixes
    scale = y.abs().max().item()
    torch.testing.assert_close(xb @ got.maps, xb @ want, atol=ATOL * scale, rtol=1e-5)
    # and the least-squares property: at every layer no worse than the raw lens's identity on the fit text
    err = ((xb @ got.maps - y) ** 2).sum((-1, -2))
    assert (err <= ((xb[..., :-1] - y) ** 2).sum((-1, -2)) + zero_tol(handle.n_layers)).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_fit_at_the_answers_with_its_ridge_towards_the_identity_is_the_oracles(tiny, family):
    handle, hf = tiny(family)
    got = fit_readouts(handle, FIT_QA, ridge=0.05, kl_rows=0, progress_bar=False)  # at the answers, by default
    _, encs, _ = encode_all(handle, FIT_QA, need_answer=True)
    want, xb, _ = _oracle_maps(hf, family, encs, at="answers", ridge=0.05)
    assert got.at == "answers" and got.tokens == xb.shape[1] == sum(len(e.predict_positions) for e in encs)
    torch.testing.assert_close(got.maps, want, atol=1e-6, rtol=1e-5)  # a ridge: one minimum, the maps themselves
    # a ridge far larger than the data gives back the raw lens: A = I, b = 0, the readout of h is norm(h)
    ident = fit_readouts(handle, FIT_QA, ridge=1e9, kl_rows=0, progress_bar=False)
    H = ident.maps.shape[-1]
    eye = torch.cat([torch.eye(H, dtype=torch.float64), torch.zeros(1, H, dtype=torch.float64)])
    torch.testing.assert_close(ident.maps, eye.expand_as(ident.maps), atol=1e-6, rtol=0)
    hs = torch.randn(handle.n_layers, 3, H)
    with torch.no_grad():
        torch.testing.assert_close(ident.apply(handle, hs), oracle.parts(hf, family)["norm"](hs), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_kl_step_minimises_the_kl_along_its_two_numbers(tiny, family):
    """After the least squares, each layer's map becomes ``α(A n + b) + β n``, ``(α, β)`` minimising the mean
    KL(q_L ‖ q̃) over a sample of the fit's rows: checked against the plain model's final norm, unembedding and full
    softmaxes, at the found point and around it."""
    handle, hf = tiny(family)
    ls = fit_readouts(handle, FIT_QA, kl_rows=0, progress_bar=False)
    got = fit_readouts(handle, FIT_QA, kl_rows=8, progress_bar=False)
    _, encs, _ = encode_all(handle, FIT_QA, need_answer=True)
    rows = [(i, t) for i, e in enumerate(encs) for t in e.predict_positions]
    picked = [rows[j] for j in kl_sample(len(rows), 8)]
    assert len(picked) == 8 and got.scales.shape == (handle.n_layers, 2)
    P, H = oracle.parts(hf, family), ls.maps.shape[-1]
    eye = torch.cat([torch.eye(H, dtype=torch.float64), torch.zeros(1, H, dtype=torch.float64)])
    with torch.no_grad():
        hs = [oracle.record(hf, family, e.input_ids)[0] for e in encs]  # [L+1, T, H] each
        n = torch.stack([P["norm"](hs[i][:, t]) for i, t in picked], 1).double()  # [L+1, 8, H]
        log_q = P["finish"](P["head"](n[-1].float())).double().log_softmax(-1)
    for l, (a, b) in enumerate(got.scales.tolist()):
        torch.testing.assert_close(got.maps[l], a * ls.maps[l] + b * eye)  # the map the two numbers make

        def kl(a, b, l=l):
            x = torch.cat([n[l], torch.ones(8, 1, dtype=torch.float64)], -1) @ (a * ls.maps[l] + b * eye)
            with torch.no_grad():
                z = P["finish"](P["head"](x.float())).double().log_softmax(-1)
            return (log_q.exp() * (log_q - z)).sum(-1).mean().item()

        best = kl(a, b)
        assert best <= kl(0.0, 1.0) + 1e-6  # no worse than the raw lens, where it starts
        for da, db in ((0.05, 0), (-0.05, 0), (0, 0.05), (0, -0.05)):
            assert best <= kl(a + da, b + db) + 1e-6, (l, a, b, da, db)


def test_a_fit_never_reads_a_prompt_it_is_evaluated_on(tiny):
    handle, _ = tiny("llama")
    with pytest.raises(DepthError, match="held-out"):
        fit_readouts(handle, FIT_QA, not_on=FIT_QA[3:4], progress_bar=False)
    with pytest.raises(DepthError, match="fit_texts|held-out"):
        tuned_lens(handle, EVAL, fit_texts=FIT[:2] + EVAL[:1], fit_at="all", progress_bar=False)
    with pytest.raises(DepthError, match="at must be"):
        fit_readouts(handle, FIT, at="some", progress_bar=False)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_tuned_lens_matches_full_softmaxes_and_sets(tiny, family):
    handle, hf = tiny(family)
    readouts = fit_readouts(handle, FIT, at="all", ridge=0.0, progress_bar=False)
    assert readouts.scales is not None  # the maps after the KL step
    r = tuned_lens(handle, EVAL, readouts=readouts, progress_bar=False)
    P, k = oracle.parts(hf, family), r.k
    _, encs, _ = encode_all(handle, EVAL)
    for i, e in enumerate(encs):
        with torch.no_grad():
            h, _, _, logits = oracle.record(hf, family, e.input_ids)
            log_p = logits[1:].double().log_softmax(-1)
            normed = [P["norm"](h[l]).double() for l in range(handle.n_layers)]
            for who, xs in (("", [(torch.cat([n, torch.ones(len(n), 1, dtype=n.dtype)], -1) @ readouts.maps[l]).float()
                                  for l, n in enumerate(normed)]),
                            ("raw_", [n.float() for n in normed])):
                kl, ov = [], []
                for x in xs:
                    log_q = P["finish"](P["head"](x))[1:].double().log_softmax(-1)
                    kl.append((log_p.exp() * (log_p - log_q)).sum(-1).mean().item())
                    ov.append(np.mean([len(set(a.tolist()) & set(b.tolist())) / k
                                       for a, b in zip(log_q.topk(k).indices, log_p.topk(k).indices)]))
                np.testing.assert_allclose(getattr(r, f"{who}kl_by_prompt")[i], kl, rtol=1e-4, atol=ATOL, err_msg=who)
                np.testing.assert_allclose(getattr(r, f"{who}overlap_by_prompt")[i], ov, atol=ATOL, err_msg=who)
    assert r.meta["params"]["fit_tokens"] == readouts.tokens and r.meta["params"]["fit_seconds"] >= 0


def test_what_holds_of_any_run(tiny):
    handle, _ = tiny("llama")
    r = tuned_lens(handle, EVAL, fit_texts=FIT, fit_at="all", progress_bar=False)
    L = handle.n_layers
    for key in ("kl", "raw_kl"):
        assert getattr(r, key).shape == (L,) and (getattr(r, key) >= -zero_tol(L)).all(), key  # KL ≥ 0
    for key in ("overlap", "raw_overlap"):
        assert ((getattr(r, key) >= 0) & (getattr(r, key) <= 1)).all(), key
    f = r.facts()
    assert f["mid_layer"] == L // 2 and f["fit_tokens"] > 0 and "fit on" in r.findings()
    with pytest.raises(DepthError, match="fit_texts"):
        tuned_lens(handle, EVAL, progress_bar=False)
    # a sample of positions: the same statistics on fewer tokens, the last position always among them
    few = tuned_lens(handle, EVAL, readouts=fit_readouts(handle, FIT_QA, progress_bar=False), positions=2,
                     progress_bar=False)
    assert (few.prompt_tokens == 2).all() and evaluated(10, 2) == [1, 9] and evaluated(3, 5) == [1, 2]


def test_the_tuned_lens_is_registered_for_chapter_3():
    from depthutils.measures import MEASUREMENTS

    assert MEASUREMENTS["tuned_lens"].chapter == "03" and du.tuned_lens is tuned_lens
