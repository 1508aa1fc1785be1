"""P1 §7's cross-model mapping: closed-form fit against torch.linalg.lstsq, the self-mapping invariant,
and the shared-tokenizer rule."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import ATOL, TEXT, build_tiny

import depthutils
from depthutils.book.claims.mapping import verdict
from depthutils.core.prompts import Prompt
from depthutils.measures.cross_model_mapping import fit_maps, with_bias


def test_fit_matches_lstsq_on_a_small_case():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 50, 6, generator=g, dtype=torch.float64)  # 2 source layers, 50 tokens, width 6
    y = torch.randn(50, 8, generator=g, dtype=torch.float64)     # targets (2 layers × width 4, flattened)
    xb = with_bias(x)
    W = fit_maps(xb.transpose(1, 2) @ xb, xb.transpose(1, 2) @ y, ridge=0.0)
    for s in range(2):
        want = torch.linalg.lstsq(xb[s], y).solution
        torch.testing.assert_close(W[s], want, atol=1e-9, rtol=1e-9)
    ridged = fit_maps(xb.transpose(1, 2) @ xb, xb.transpose(1, 2) @ y, ridge=1.0)
    assert not torch.allclose(ridged, W)  # the penalty does something ...
    torch.testing.assert_close(ridged[:, -1].abs().sum() > 0, torch.tensor(True))  # ... and keeps a bias


def texts(n=24):
    words = TEXT.split()
    return [Prompt(" ".join(words[i:i + 18]), len(" ".join(words[i:i + 18])), "test") for i in range(n)]


def test_a_model_mapped_onto_itself_is_the_diagonal(tiny):
    handle, _ = tiny("llama")
    r = depthutils.cross_model_mapping(handle, handle, texts())
    L = handle.n_layers
    assert r.error.shape == (L, L)
    assert np.diag(r.error).max() <= 1e-3
    for s in range(L):
        others = np.delete(r.error[s], s)
        assert (others > r.error[s, s]).all()
    assert list(r.best) == list(range(L)) and r.diagonal_distance() == 0
    assert verdict([r]).outcome == "not tested"  # a self-mapping tests nothing about P1's claim


def test_shallow_to_deep_gives_a_full_matrix(tiny, tiny_root):
    shallow, _ = tiny("llama")
    deep = depthutils.load_model(str(build_tiny("llama", tiny_root, layers=5)), device="cpu", dtype="float32")
    r = depthutils.cross_model_mapping(shallow, deep, texts())
    assert r.error.shape == (3, 5) and np.isfinite(r.error).all() and (r.error > 0).all()
    assert r.meta["params"]["fit_tokens"] > 0 and r.meta["params"]["scored_tokens"] > 0
    assert verdict([r]).outcome in ("shown", "mixed", "not shown")
    bands = r.best_band(n_boot=100)
    assert all(r.best[s] in b for s, b in enumerate(bands))  # a row's minimum is always within its own noise


def test_models_must_share_a_tokenizer(tiny):
    tiny_llama, _ = tiny("llama")
    ladder = depthutils.load_model("ladder-4", device="cpu")  # another vocabulary
    with pytest.raises(depthutils.DepthError, match="do not share a tokenizer"):
        depthutils.cross_model_mapping(ladder, tiny_llama, texts())


def test_a_tokenizer_without_bos_still_maps_onto_its_bos_twin(tiny, tiny_root):
    """depthutils prepends the BOS the other tokenizer adds itself: both models read the same ids."""
    with_bos, _ = tiny("llama")
    without = depthutils.load_model(str(build_tiny("llama", tiny_root, context=128, add_bos=False)), device="cpu", dtype="float32")
    r = depthutils.cross_model_mapping(with_bos, without, texts())
    assert r.error.shape == (3, 3)


def test_fit_maps_solves_a_wide_right_hand_side():
    """SmolLM2 mapped onto itself gives systems of 577 unknowns against 30·576 targets each, on which torch's
    batched solve failed (an MKL pivot error on the real normal equations; random ones do not reproduce it).
    fit_maps solves layer by layer: three such systems, whose maps must satisfy their equations."""
    from depthutils.measures.cross_model_mapping import fit_maps

    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 577, 100, dtype=torch.float64, generator=g)
    xtx = a @ a.transpose(1, 2)
    xty = torch.randn(3, 577, 30 * 576, dtype=torch.float64, generator=g)
    W = fit_maps(xtx, xty, 1e-4)
    eye = torch.eye(577, dtype=torch.float64)
    eye[-1, -1] = 0.0
    scale = xtx[:, :-1, :-1].diagonal(dim1=1, dim2=2).mean(-1)
    resid = (xtx + 1e-4 * scale[:, None, None] * eye) @ W - xty
    assert resid.abs().max() < 1e-6 * xty.abs().max()


def test_the_null_is_mapped_by_the_same_call_as_the_trained_pair(tiny, tiny_root, monkeypatch):
    """map_against_null sends the trained target, the untrained one and the second seed through one and the same
    cross_model_mapping call: the same source, texts and arguments, only the target differs; its null is the
    mapping a direct call gives."""
    from depthutils.analysis import mapping_null

    shallow, _ = tiny("llama")
    load = lambda layers, seed=0: depthutils.load_model(  # noqa: E731
        str(build_tiny("llama", tiny_root / f"seed{seed}", layers=layers, seed=seed)), device="cpu", dtype="float32")
    deep, untrained, second = load(5), [load(5, seed=1), load(5, seed=3)], load(3, seed=2)
    second_untrained = [load(3, seed=4)]
    calls = []

    def recorded(source, target, texts_, **kw):
        calls.append((source, target, texts_, kw))
        return depthutils.cross_model_mapping(source, target, texts_, **kw)

    monkeypatch.setattr(mapping_null, "cross_model_mapping", recorded)
    kw = dict(held_out=0.5, ridge=1e-3, seed=7, max_tokens=64, progress_bar=False)
    prompts = texts()
    m = mapping_null.map_against_null([shallow], deep, untrained, prompts, control=second,
                                      control_untrained=second_untrained, **kw)
    assert [(c[0], c[1]) for c in calls] == [(shallow, deep), (shallow, untrained[0]), (shallow, untrained[1]),
                                             (shallow, second), (shallow, second_untrained[0])]
    cache = calls[0][3]["cache"]  # one residual cache for every call: each model traced once
    assert all(c[2] is prompts and c[3].pop("cache") is cache and c[3] == kw for c in calls)
    assert list(cache) == [id(shallow)]  # the source kept, each target dropped once mapped
    params = [{k: v for k, v in r.meta["params"].items() if k not in ("target", "target_revision")}
              for r in m.results()]
    assert all(p == params[0] for p in params) and len(params) == 5
    direct = depthutils.cross_model_mapping(shallow, untrained[1], prompts, **kw)
    np.testing.assert_allclose(m.untrained[0][1].error_by_prompt, direct.error_by_prompt, rtol=0, atol=ATOL)
    assert m.pairs() == [(m.trained[0], m.untrained[0])] and m.nulls() == m.untrained[0]
    assert m.control_untrained[0].shape == m.control.shape  # the control's null has the control's shape
    assert mapping_null.map_against_null([shallow], deep, None, prompts, **kw).untrained == []


def test_the_untrained_target_is_the_trainers_initial_draw():
    """untrained() builds an embedded model's initial weights with the trainer's own build_model (its spec's
    seed), names it "<name>-untrained" and loads it in its trained twin's float32; another seed draws other weights
    of the same architecture. load_nulls finds N_INITS initialisations of the target, the shipped second seed and
    N_INITS initialisations of that second seed (the source's shape), and none of them for a model mapped onto
    itself."""
    from depthutils.analysis.mapping_null import N_INITS, cards, init_seeds, load_nulls
    from depthutils.ladder.registry import SEED, SPECS, TOKENIZER_DIR
    from depthutils.ladder.tokenizer import load_tokenizer
    from depthutils.ladder.train import build_model
    from depthutils.models.random_init import untrained

    null = untrained("ladder-4", device="cpu")
    assert null.name == "ladder-4-untrained" and null.n_layers == 4 and null.dtype == torch.float32
    want = build_model(SPECS["ladder-4"], load_tokenizer(TOKENIZER_DIR)).state_dict()
    got = null.hf.state_dict()
    assert set(want) == set(got) and all(torch.equal(want[k], got[k]) for k in want)
    trained = depthutils.load_model("ladder-4", device="cpu").hf.state_dict()
    key = "model.layers.0.mlp.up_proj.weight"
    assert not torch.equal(trained[key], got[key])
    other = untrained("ladder-4", seed=SEED + 1, device="cpu")
    assert other.name == f"ladder-4-untrained-seed{SEED + 1}" and other.n_layers == 4
    assert not torch.equal(other.hf.state_dict()[key], got[key])
    assert untrained("ladder-4", seed=SEED, device="cpu").name == "ladder-4-untrained"  # its own seed, its own name
    with pytest.raises(depthutils.DepthError, match="not an embedded model trained from its own initial weights"):
        untrained("ladder-8-cot")
    assert N_INITS >= 3 and init_seeds("ladder-4-seed2") == [SPECS["ladder-4-seed2"]["seed"] + k for k in range(N_INITS)]
    nulls, second, second_nulls = load_nulls("ladder-4", "ladder-8", device="cpu")
    assert [n.name for n in nulls] == ["ladder-8-untrained"] + [f"ladder-8-untrained-seed{SEED + k}"
                                                                for k in range(1, N_INITS)]
    weights = [n.hf.state_dict()[key] for n in nulls]
    assert not any(torch.equal(a, b) for i, a in enumerate(weights) for b in weights[i + 1:])  # distinct draws
    assert second.name == "ladder-4-seed2" and len(second_nulls) == N_INITS
    assert second_nulls[0].name == "ladder-4-seed2-untrained"
    assert all(n.n_layers == 4 for n in second_nulls)  # the positive control's null has the source's shape
    assert load_nulls("ladder-8", "ladder-8", device="cpu") == ([], None, [])
    side = cards("ladder-4", "ladder-4-seed2")
    assert (side["steps_a"], side["steps_b"]) == (SPECS["ladder-4"]["steps"], SPECS["ladder-4-seed2"]["steps"])
    assert all(0 <= side[f"{k}_{t}"] <= 100 for k in ("addition", "word_problems") for t in "ab")
