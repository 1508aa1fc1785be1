"""The measures at the answer-predicting position (``depthutils.analysis.at_answer``) against a plain-PyTorch
oracle, and that they read that position, the same one whatever the model or its objective."""
from __future__ import annotations

import numpy as np
import oracle
import pytest
import torch
from conftest import ATOL, REAL_EFFECT, zero_tol

from depthutils.analysis.at_answer import ARRAYS, at_answer, measure_of
from depthutils.core.prompts import Prompt
from depthutils.ladder import registry

#: a plain pre-norm stack, and the families where what a layer adds is not the raw module output
FAMILIES = ["llama", "olmo2", "gemma2", "granite"]


def _predict_position(tokenizer, prompt: Prompt, ids: torch.Tensor) -> int:
    """The token before the one that holds the answer's first character, from the tokenizer's offsets."""
    enc = tokenizer(prompt.text, return_offsets_mapping=True)
    offsets = enc["offset_mapping"][len(enc["input_ids"]) - ids.shape[1]:] if len(enc["input_ids"]) > ids.shape[1] \
        else enc["offset_mapping"]
    shift = ids.shape[1] - len(enc["input_ids"])  # a BOS the handle adds in front
    first = next(i for i, (a, b) in enumerate(offsets) if b > prompt.answer_start and b > a)
    return first + max(shift, 0) - 1


def _oracle(hf, family: str, ids: torch.Tensor, t: int) -> dict:
    """Every array at position ``t`` of the question ``ids[:, :t + 1]``, with forward hooks (tests/oracle.py)."""
    q = ids[:, :t + 1]
    P = oracle.parts(hf, family)
    with torch.no_grad():
        h, a, m, logits = oracle.record(hf, family, q)
        L = a.shape[0]
        cos = lambda x, y: float((x * y).sum() / (x.norm() * y.norm()))  # noqa: E731
        out = {k: [] for k in ARRAYS}
        final = torch.softmax(logits[t].double(), -1)
        for l in range(L):
            d = h[l + 1, t] - h[l, t]
            out["layer_ratio"].append(float(d.norm() / h[l, t].norm()))
            out["mean_cos"].append((cos(a[l, t], h[l, t]) + cos(m[l, t], h[l, t] + a[l, t]) + cos(d, h[l, t])) / 3)
            ql = torch.softmax(P["finish"](P["head"](P["norm"](h[l, t]))).double(), -1)
            out["kl"].append(float((ql * (ql.log() - final.log())).sum()))
            out["overlap"].append(len(set(ql.topk(5).indices.tolist()) & set(final.topk(5).indices.tolist())) / 5)
    D, O = oracle.future_effects(hf, family, q, [t])
    out["on_later"] = [float(np.nanmean(D[s, s + 1:])) if s < L - 1 else np.nan for s in range(L)]
    out["output"] = list(O)
    r = [np.nansum(D[s, s + 1:]) / (L - 1 - s) for s in range(L - 1)]
    out = {k: np.array(v, float) for k, v in out.items()}
    out["depth"] = sum(s * x for s, x in enumerate(r)) / sum(r) / (L - 1)
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_at_answer_matches_a_plain_pytorch_oracle(tiny, prompts, family):
    handle, hf = tiny(family)
    res = at_answer(handle, prompts, progress_bar=False)
    for n, p in enumerate(prompts):
        ids = handle.tokenizer(p.text, return_tensors="pt").input_ids
        if getattr(handle, "prepend_bos", True) and ids[0, 0] != handle.tokenizer.bos_token_id:
            ids = torch.cat([torch.tensor([[handle.tokenizer.bos_token_id]]), ids], 1)
        t = _predict_position(handle.tokenizer, p, ids)
        assert res.positions[n] == t
        want = _oracle(hf, family, ids, t)
        for a in ARRAYS:
            np.testing.assert_allclose(getattr(res, a)[n], want[a], rtol=1e-4, atol=ATOL, err_msg=f"{family} {a}")
        assert res.depth[n] == pytest.approx(want["depth"], rel=1e-4, abs=ATOL)


def test_it_reads_the_answer_position_and_no_other(tiny):
    """A constructed case where the answer position and the others differ: two prompts with the same question and
    different answers measure alike (the answer is never read), and the oracle at the position before (t − 1) or
    at the answer's own token (t + 1) differs visibly from what is reported, while at t it agrees."""
    handle, hf = tiny("llama")
    question = "The spouse of the performer of Imagine is"
    a, b = (Prompt.from_parts(question, ans, "test") for ans in (" Yoko Ono and more", " someone else"))
    ra, rb = at_answer(handle, [a], progress_bar=False), at_answer(handle, [b], progress_bar=False)
    for arr in ARRAYS:
        np.testing.assert_allclose(getattr(ra, arr), getattr(rb, arr), atol=zero_tol(handle.n_layers))
    ids = handle.tokenizer(a.text, return_tensors="pt").input_ids
    t = int(ra.positions[0])
    assert t == handle.tokenizer(question, return_tensors="pt").input_ids.shape[1] - 1
    at = _oracle(hf, "llama", ids, t)
    np.testing.assert_allclose(ra.layer_ratio[0], at["layer_ratio"], rtol=1e-4, atol=ATOL)
    for other in (t - 1, t + 1):
        elsewhere = _oracle(hf, "llama", ids, other)
        assert np.abs(ra.layer_ratio[0] - elsewhere["layer_ratio"]).max() > REAL_EFFECT
        assert np.abs(ra.kl[0] - elsewhere["kl"]).max() > REAL_EFFECT


def test_the_position_is_the_same_under_every_objective():
    """The experiment's prompts are read at one position per prompt, fixed by the tokenizer alone: models trained
    under different objectives (A and LM, the same task) report the same positions, the question's last token."""
    import depthutils
    from depthutils.analysis.objectives_tables import prompts
    from depthutils.ladder.tokenizer import load_tokenizer

    runs = [n for n in registry.SHIPPED_OBJECTIVE_RUNS if registry.SPECS[n]["task"] == "s5"
            and registry.SPECS[n]["objective"] in ("a", "lm") and (registry.MODELS_DIR / n / "config.json").is_file()]
    if len(runs) < 2:
        pytest.skip("the S5 runs of objectives A and LM are not shipped")
    ps = prompts("s5", n_per_level=2)
    tok = load_tokenizer(registry.TOKENIZER_DIR)
    want = [len(tok(p.context)["input_ids"]) - 1 for p in ps]
    for n in runs:
        res = at_answer(depthutils.load_model(n, dtype="float32"), ps, progress_bar=False)
        assert res.positions.tolist() == want


def test_the_aggregate_measures_read_the_mean_curves():
    """Each aggregate, by an independent formula on made-up per-prompt arrays."""
    rng = np.random.default_rng(0)
    arrays = {a: rng.uniform(0.1, 1, (6, 8)) for a in ARRAYS} | {"depth": rng.uniform(0, 1, 6)}
    arrays["on_later"][:, -1] = np.nan
    arrays["kl"] = np.sort(arrays["kl"], 1)[:, ::-1]
    idx = np.array([0, 0, 3, 5])
    mean = lambda a: arrays[a][idx].mean(0)  # noqa: E731
    assert measure_of(arrays, "contributions", idx) == pytest.approx(mean("layer_ratio")[5:].mean()
                                                                     / mean("layer_ratio")[1:5].mean())
    assert measure_of(arrays, "later", idx) == pytest.approx(np.nanmean(mean("on_later")[4:]) / mean("on_later")[:4].mean())
    assert measure_of(arrays, "output", idx) == pytest.approx(mean("output")[4:].mean() / mean("output")[:4].mean())
    kl = mean("kl")
    assert measure_of(arrays, "ed_kl", idx) == (next(l for l in range(7) if kl[l] < 0.5 * kl.max()) + 1) / 8
    assert measure_of(arrays, "depth", idx) == pytest.approx(arrays["depth"][idx].mean())
