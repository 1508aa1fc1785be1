"""Chapter 1's clamp test (depthutils.measures.massive_clamp) against plain PyTorch: forward hooks on a plain
``transformers`` model (:mod:`oracle`) clamp position 0 one forward at a time, and the lens's KL, the relative
contribution, position 0's largest component and the outputs' KL and agreement are computed from them with full
softmaxes; on a random model with a massive component planted in its start token's embedding, of the two families of
the real models (Llama: SmolLM2; Gemma 3). Then: the clean run a chapter already has is reused, and the verdict can
come out every way."""
from __future__ import annotations

import numpy as np
import oracle
import pytest
import torch
from conftest import ATOL, REAL_EFFECT, build_tiny

import depthutils as du
from depthutils.book.reviews import massive_clamp as review
from depthutils.core.depth import LENS_POSITIONS
from depthutils.core.encoding import encode_all
from depthutils.measures import massive_clamp as module
from depthutils.measures.massive_clamp import MassiveClampResult, control_mask, massive_clamp
from depthutils.measures.norm_growth import MASSIVE, norm_growth

#: the components of the start token's embedding made massive, and their values (one positive, one negative)
PLANTED = {5: 400.0, 17: -250.0}
SEED = 3


def _planted(family: str, root):
    """A random ``family`` model whose start token's embedding holds :data:`PLANTED`: (handle, plain model)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src, dst = build_tiny(family, root), root / f"massive-{family}"
    if not (dst / "config.json").exists():
        hf = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
        with torch.no_grad():
            for d, v in PLANTED.items():
                hf.get_input_embeddings().weight[0, d] = v  # token 0: the tokenizer's BOS
        hf.save_pretrained(dst)
        AutoTokenizer.from_pretrained(src).save_pretrained(dst)
    handle = du.load_model(str(dst), device="cpu", dtype="float32")
    return handle, AutoModelForCausalLM.from_pretrained(dst, dtype=torch.float32).eval()


def _oracle(hf, family, ids, seed):
    """The three forwards of one prompt, each its own, clamped by hooks as the spec of the clamp reads; returns
    ``{row: (h [L+1, T, H] as each layer received it, logits [T, V])}``, the per-layer clamped sets and ``m``."""
    h, _, _, logits = oracle.record(hf, family, ids)
    L, H = h.shape[0] - 1, h.shape[-1]
    m = [h[l, 1:].abs().median(-1).values.mean() for l in range(L)]
    seen, sets = torch.zeros(H, dtype=torch.bool), []

    def clamp(kind, i, x):
        nonlocal seen
        if kind != "in":
            return x
        seen = seen | (h[i, 0].abs() >= MASSIVE * m[i]) | (x[0, 0].abs() >= MASSIVE * m[i])
        sets.append(seen.clone())
        x = x.clone()
        x[0, 0, seen] = x[0, 0, seen].sign() * m[i]
        return x

    perm = torch.randperm(H, generator=torch.Generator().manual_seed(seed)).tolist()

    def control(kind, i, x):
        if kind != "in":
            return x
        others = [d for d in perm if not sets[i][d]][:int(sets[i].sum())]
        x = x.clone()
        x[0, 0, others] = x[0, 0, others].sign() * m[i]
        return x

    rows = {"clean": (h, logits)}
    for name, edit in (("clamp", clamp), ("control", control)):
        hr, _, _, lr = oracle.record(hf, family, ids, edit)
        rows[name] = (hr, lr)
    return rows, sets, m


@pytest.mark.parametrize("family", ["llama", "gemma3_text"])
def test_the_clamp_matches_a_plain_pytorch_oracle(tiny_root, prompts, family):
    handle, hf = _planted(family, tiny_root)
    got = massive_clamp(handle, prompts, seed=SEED, progress_bar=False)
    _, encs, _ = encode_all(handle, prompts)
    P = oracle.parts(hf, family)
    L = handle.n_layers
    for i, e in enumerate(encs):
        with torch.no_grad():
            rows, sets, m = _oracle(hf, family, e.input_ids, SEED)
        last = list(range(e.n_tokens - min(LENS_POSITIONS, e.n_tokens - 1), e.n_tokens))
        finals = {}
        for name, (h, logits) in rows.items():
            h = h.double()
            final = logits.double().log_softmax(-1)
            finals[name] = final[last]
            with torch.no_grad():
                lens = torch.stack([P["finish"](P["head"](P["norm"](h[l].float()))) for l in range(L)]).double()
            lens = lens.log_softmax(-1)[:, last]
            kl = (lens.exp() * (lens - final[last])).sum(-1).mean(-1)
            ratio = ((h[1:] - h[:-1]).norm(dim=-1) / h[:-1].norm(dim=-1))[:, 1:].mean(-1)
            peak = torch.stack([h[l, 0].abs().max() / m[l] for l in range(L)])
            for key, want in (("lens_kl", kl), ("ratio", ratio), ("peak", peak)):
                np.testing.assert_allclose(getattr(got, f"{key}_{name}_by_prompt")[i], want.numpy(), rtol=1e-4,
                                           atol=ATOL, err_msg=f"{key} {name}")
        for name in ("clamp", "control"):
            p, q = finals["clean"], finals[name]
            assert getattr(got, f"output_kl_{name}_by_prompt")[i] == pytest.approx(
                float((p.exp() * (p - q)).sum(-1).mean()), rel=1e-4, abs=ATOL)
            assert getattr(got, f"output_agree_{name}_by_prompt")[i] == pytest.approx(
                float((p.argmax(-1) == q.argmax(-1)).double().mean()))
        np.testing.assert_array_equal(got.clamped_by_prompt[i], [float(s.sum()) for s in sets])
        np.testing.assert_array_equal(got.dims_by_prompt[i], sets[-1].double().numpy())
    f = got.facts()
    # the planted components are found, from the embedding on, and the clamp removes them and changes the model
    assert f["onset"] == 0 and set(PLANTED) <= set(f["dims"])
    assert f["peak_before"] >= MASSIVE > f["peak_after"]
    assert f["output_kl"] > REAL_EFFECT and abs(f["sharp_clamp"] - f["sharp_clean"]) > REAL_EFFECT
    assert f["start"] == handle.tokenizer.convert_ids_to_tokens(0)


def test_the_clean_run_the_chapter_has_is_reused(tiny, tiny_root, prompts, monkeypatch):
    """A prompt whose clean run shows no massive component at position 0 is not run again: its three rows are its
    clean values; one that shows one is run as without the clean run."""
    handle, _ = tiny("llama")  # no massive component anywhere
    clean = norm_growth(handle, prompts, progress_bar=False)
    reused = massive_clamp(handle, prompts, clean=clean, progress_bar=False)
    monkeypatch.setattr(module, "prompt_clamp", lambda *a: pytest.fail("a prompt with nothing to clamp was run"))
    assert massive_clamp(handle, prompts, clean=clean, progress_bar=False).facts() == reused.facts()
    monkeypatch.undo()
    ran = massive_clamp(handle, prompts, progress_bar=False)
    assert reused.facts()["onset"] is None and ran.facts()["onset"] is None
    for r in module.ROWS:
        np.testing.assert_allclose(getattr(reused, f"lens_kl_{r}"), clean.lens_kl, rtol=1e-5)
        np.testing.assert_allclose(getattr(reused, f"lens_kl_{r}"), getattr(ran, f"lens_kl_{r}"), rtol=1e-4, atol=ATOL)
        np.testing.assert_allclose(getattr(reused, f"ratio_{r}"), getattr(ran, f"ratio_{r}"), rtol=1e-4, atol=ATOL)
        np.testing.assert_allclose(getattr(reused, f"peak_{r}"), getattr(ran, f"peak_{r}"), rtol=1e-4, atol=ATOL)
    planted, _ = _planted("llama", tiny_root)
    with_clean = massive_clamp(planted, prompts, clean=norm_growth(planted, prompts, progress_bar=False),
                               progress_bar=False)
    assert with_clean.facts() == massive_clamp(planted, prompts, progress_bar=False).facts()
    with pytest.raises(du.DepthError, match="same prompts"):
        massive_clamp(handle, prompts[:2], clean=clean, progress_bar=False)


def test_the_control_takes_as_many_other_components_in_the_permutations_order():
    seen = torch.tensor([False, True, False, False, True, False])
    perm = torch.tensor([4, 0, 1, 5, 3, 2])
    assert control_mask(seen, perm).tolist() == [True, False, False, False, False, True]
    assert not control_mask(torch.zeros(6, dtype=torch.bool), perm).any()


def _result(clamp: float, control: float = 1.0, n: int = 10, L: int = 8, noise: float = 0.05,
            massive: bool = True) -> MassiveClampResult:
    """``n`` prompts whose lens KL is 10 at every layer clean, ``clamp`` and ``control`` times that in the other two
    rows (each prompt's off by a relative ``noise``), with a massive component at position 0 from layer 2 or none."""
    g = np.random.default_rng(0)
    kl = {r: np.full((n, L), 10.0 * s) * (1 + noise * g.standard_normal((n, 1)))
          for r, s in (("clean", 1.0), ("clamp", clamp), ("control", control))}
    clamped = np.r_[0.0, 0, np.ones(L - 2)] if massive else np.zeros(L)
    peak = np.where(clamped > 0, 5000.0, 30.0)
    per = {**{f"lens_kl_{r}_by_prompt": v for r, v in kl.items()},
           **{f"ratio_{r}_by_prompt": np.full((n, L), 0.3) for r in kl},
           "peak_clean_by_prompt": np.repeat(peak[None], n, 0), "peak_control_by_prompt": np.repeat(peak[None], n, 0),
           "peak_clamp_by_prompt": np.full((n, L), 30.0), "clamped_by_prompt": np.repeat(clamped[None], n, 0),
           "dims_by_prompt": np.repeat(np.eye(16)[3][None], n, 0) * massive,
           "output_kl_clamp_by_prompt": np.full(n, 2.0), "output_kl_control_by_prompt": np.zeros(n),
           "output_agree_clamp_by_prompt": np.full(n, 0.5), "output_agree_control_by_prompt": np.ones(n)}
    return MassiveClampResult(prompt_tokens=np.full(n, 30), meta={"params": {"start_token": "<s>"}},
                              **per).with_aggregates()


def test_the_clamp_verdict_can_come_out_every_way():
    # the clamp removes most of the KL the second half closes, the control none of it: the massive components carry it
    assert review.verdict(_result(0.2)).outcome == "shown"
    # most of it survives the clamp
    assert review.verdict(_result(0.9)).outcome == "not shown"
    assert review.verdict(_result(3.0)).outcome == "not shown"  # the clamped model has more to sharpen
    # an interval across 0.5
    assert review.verdict(_result(0.5, noise=0.3)).outcome == "mixed"
    # the control removes it too: not the massive components' doing, at most mixed
    failed = review.verdict(_result(0.2, control=0.2))
    assert failed.outcome == "mixed" and "control" in failed.notes[0]
    assert review.verdict(_result(0.9, control=0.4)).outcome == "mixed"
    # nothing to clamp, one prompt, halves of one layer
    none = review.verdict(_result(1.0, massive=False))
    assert none.outcome == "not tested" and "nothing to clamp" in none.numbers
    assert review.verdict(_result(0.2, n=1)).outcome == "not tested"
    assert review.verdict(_result(0.2, L=3)).outcome == "not tested"
    # the statistic is the KL on h_mid, the second half's input (1 + L//2), clamped over clean
    r = _result(0.2, noise=0.0)
    r.lens_kl_clamp_by_prompt[:, 1 + 8 // 2] = 10.0
    r.with_aggregates()
    assert r.facts()["survive"] == 1.0 and review.verdict(r).outcome == "not shown"
