"""The tuned readout (chapter 3's early-exit section): its closed-form fit against an independent least-squares fit
in plain PyTorch (forward hooks on a plain ``transformers`` model, :mod:`oracle`, and ``torch.linalg.lstsq``), its
KL and overlap against full softmaxes and Python sets, and what holds of any run."""
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
from depthutils.measures.tuned_lens import evaluated, fit_readouts, tuned_lens

FAMILIES = ["llama", "gemma3_text"]


def _texts(start: int, n: int, words: int = 14) -> list[Prompt]:
    w = TEXT.split()
    return [Prompt(" ".join(w[i:i + words]), len(" ".join(w[i:i + words])), "test") for i in range(start, start + n)]


FIT, EVAL = _texts(0, 16), _texts(40, 4)  # different text: the fit's windows end before the evaluation's begin


def _oracle_maps(hf, family, encs) -> torch.Tensor:
    """``[L, H+1, H]``: per layer, ``torch.linalg.lstsq`` of ``[h_l, 1]`` onto ``h_L`` over every token but the
    first, from one hooked forward per text (float64)."""
    xs, ys = [], []
    for e in encs:
        with torch.no_grad():
            h = oracle.record(hf, family, e.input_ids)[0].double()  # [L+1, T, H]: layer inputs, then the last output
        xs.append(h[:-1, 1:])
        ys.append(h[-1, 1:])
    x, y = torch.cat(xs, 1), torch.cat(ys, 0)
    xb = torch.cat([x, torch.ones(*x.shape[:-1], 1, dtype=x.dtype)], -1)
    return torch.stack([torch.linalg.lstsq(xb[l], y).solution for l in range(x.shape[0])]), xb, y


@pytest.mark.parametrize("family", FAMILIES)
def test_the_tuned_readout_is_an_independent_least_squares_fit(tiny, family):
    handle, hf = tiny(family)
    got = fit_readouts(handle, FIT, ridge=0.0, progress_bar=False)
    _, encs, _ = encode_all(handle, FIT)
    want, xb, y = _oracle_maps(hf, family, encs)
    assert got.tokens == xb.shape[1] and got.maps.shape == want.shape
    # the two solvers (normal equations, QR) agree on the fitted values, which the minimum fixes
    scale = y.abs().max().item()
    torch.testing.assert_close(xb @ got.maps, xb @ want, atol=ATOL * scale, rtol=1e-5)
    # and the least-squares property: at every layer no worse than the raw lens's identity on the fit text
    err = ((xb @ got.maps - y) ** 2).sum((-1, -2))
    assert (err <= ((xb[..., :-1] - y) ** 2).sum((-1, -2)) + zero_tol(handle.n_layers)).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_tuned_lens_matches_full_softmaxes_and_sets(tiny, family):
    handle, hf = tiny(family)
    readouts = fit_readouts(handle, FIT, ridge=0.0, progress_bar=False)
    r = tuned_lens(handle, EVAL, readouts=readouts, progress_bar=False)
    P, k = oracle.parts(hf, family), r.k
    _, encs, _ = encode_all(handle, EVAL)
    for i, e in enumerate(encs):
        with torch.no_grad():
            h, _, _, logits = oracle.record(hf, family, e.input_ids)
            log_p = logits[1:].double().log_softmax(-1)
            for who, hs in (("", [(torch.cat([h[l], torch.ones(len(h[l]), 1)], -1).double() @ readouts.maps[l]).float()
                                  for l in range(handle.n_layers)]),
                            ("raw_", [h[l] for l in range(handle.n_layers)])):
                kl, ov = [], []
                for x in hs:
                    log_q = P["finish"](P["head"](P["norm"](x)))[1:].double().log_softmax(-1)
                    kl.append((log_p.exp() * (log_p - log_q)).sum(-1).mean().item())
                    ov.append(np.mean([len(set(a.tolist()) & set(b.tolist())) / k
                                       for a, b in zip(log_q.topk(k).indices, log_p.topk(k).indices)]))
                np.testing.assert_allclose(getattr(r, f"{who}kl_by_prompt")[i], kl, rtol=1e-4, atol=ATOL, err_msg=who)
                np.testing.assert_allclose(getattr(r, f"{who}overlap_by_prompt")[i], ov, atol=ATOL, err_msg=who)
    assert r.meta["params"]["fit_tokens"] == readouts.tokens and r.meta["params"]["fit_seconds"] >= 0


def test_what_holds_of_any_run(tiny):
    handle, _ = tiny("llama")
    r = tuned_lens(handle, EVAL, fit_texts=FIT, progress_bar=False)
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
    few = tuned_lens(handle, EVAL, readouts=fit_readouts(handle, FIT, progress_bar=False), positions=2,
                     progress_bar=False)
    assert (few.prompt_tokens == 2).all() and evaluated(10, 2) == [1, 9] and evaluated(3, 5) == [1, 2]


def test_the_tuned_lens_is_registered_for_chapter_3():
    from depthutils.measures import MEASUREMENTS

    assert MEASUREMENTS["tuned_lens"].chapter == "03" and du.tuned_lens is tuned_lens
