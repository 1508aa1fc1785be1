"""Chapter 10's measurements of the objectives experiment, against a plain-PyTorch oracle, and its verdict."""
from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
import torch

from depthutils.analysis.objectives import (MEASURES, ObjectivesResult, chain_prompts, measure_run, read_dynamics,
                                            write_dynamics)
from depthutils.book import claims
from depthutils.core.results import halves
from depthutils.ladder import registry
from depthutils.ladder.objectives import TRAIN_STEPS

RUNS = [n for n in registry.OBJECTIVE_RUNS if (registry.MODELS_DIR / n / "card.json").is_file()]
pytestmark = pytest.mark.skipif(not RUNS, reason="no run of the objectives experiment is shipped")


@pytest.fixture(scope="module")
def measured():
    return measure_run(RUNS[0], n=4, n_per_level=2, dtype="float32")


def _oracle(name: str, prompts) -> tuple[float, float, float]:
    """Contribution ratio, ED_KL ratio and ED_overlap ratio with plain transformers and forward hooks: token
    means over every token of every prompt, the lens on each layer's input ``h_l`` (spec §1, §3, §8)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = registry.MODELS_DIR / name
    hf = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(str(folder))
    L = hf.config.num_hidden_layers
    ratio, kl, overlap, tokens = np.zeros(L), np.zeros(L), np.zeros(L), 0
    for p in prompts:
        ids = tok(p.text, return_tensors="pt").input_ids
        seen = []
        hooks = [layer.register_forward_hook(lambda m, a, k, o: seen.append((k.get("hidden_states", a[0] if a else None), o)),
                                             with_kwargs=True) for layer in hf.model.layers]
        try:
            with torch.no_grad():
                final = hf(ids).logits[0].log_softmax(-1)
        finally:
            for h in hooks:
                h.remove()
        assert len(seen) == L and seen[0][0].shape == (1, ids.shape[1], hf.config.hidden_size)
        for l, (h, out) in enumerate(seen):
            ratio[l] += ((out - h).norm(dim=-1) / h.norm(dim=-1))[0].sum().item()
            with torch.no_grad():
                q = hf.lm_head(hf.model.norm(h))[0].log_softmax(-1)
            kl[l] += (q.exp() * (q - final)).sum(-1).sum().item()
            top, top_final = q.topk(5, -1).indices, final.topk(5, -1).indices
            overlap[l] += sum(len(set(a.tolist()) & set(b.tolist())) / 5 for a, b in zip(top, top_final))
        tokens += ids.shape[1]
    ratio, kl, overlap = ratio / tokens, kl / tokens, overlap / tokens
    first, second = halves(ratio[1:])
    ed_kl = next((l for l in range(L - 1) if kl[l] < 0.5 * kl.max()), None)
    ed_ov = next((l for l in range(L - 1) if overlap[l] > 0.3), None)
    as_ratio = lambda ed: None if ed is None else (ed + 1) / L  # noqa: E731
    return second / first, as_ratio(ed_kl), as_ratio(ed_ov)


def test_measures_match_a_plain_pytorch_oracle(measured):
    contributions, ed_kl, ed_overlap = _oracle(RUNS[0], chain_prompts(4, TRAIN_STEPS[-1], 0))
    assert measured.value("contributions") == pytest.approx(contributions, rel=1e-4)
    assert measured.value("ed_kl") == ed_kl and measured.value("ed_overlap") == ed_overlap
    assert measured.value("later") is not None and 0 < measured.value("depth") < 1
    assert set(measured.accuracy) >= set(TRAIN_STEPS)


def _relabelled(m, objective: str, seed: int):
    return dataclasses.replace(m, name=f"objective-{objective}-{seed}", objective=objective, seed=seed)


def test_equal_objectives_differ_by_exactly_zero_and_are_not_graded_above_it(measured):
    """One model under every label: each objective's mean is the model's value, every paired difference is
    0 in every draw, and a difference touching 0 is mixed, not shown."""
    runs = [_relabelled(measured, o, s) for o in ("a", "qa", "lm") for s in (1, 2)]
    result = ObjectivesResult(runs, n_boot=50)
    for m in MEASURES:
        per = result.per_objective(m)
        assert per["a"][0] == pytest.approx(measured.value(m))
        assert per["a"][1] <= per["a"][0] <= per["a"][2]
        assert result.difference(m, "a", "qa") == (0.0, 0.0, 0.0)
    v = claims.objectives(result)
    assert v.outcome == "mixed"


class _Stub:
    """What the verdict reads of a result: its facts, objectives and seeds."""

    def __init__(self, sign: float, acc: float = 0.9, objectives=("a", "qa", "lm")):
        self.seeds, self._objs, self._f = [1, 2, 3], list(objectives), {}
        for o in objectives:
            self._f[f"{o}_acc_trained"] = acc
        for m in MEASURES:
            for pair in ("a_qa", "qa_lm"):
                k = f"d_{pair}_{m}"
                self._f.update({k: sign * 0.1, f"{k}_lo": sign * 0.05 if sign else -0.05,
                                f"{k}_hi": sign * 0.15 if sign else 0.05})
                if sign < 0:
                    self._f[f"{k}_lo"], self._f[f"{k}_hi"] = -0.15, -0.05

    def facts(self):
        return self._f

    def objectives(self):
        return self._objs


@pytest.mark.parametrize("sign,acc,objectives,outcome", [
    (1, 0.9, ("a", "qa", "lm"), "shown"), (-1, 0.9, ("a", "qa", "lm"), "not shown"),
    (0, 0.9, ("a", "qa", "lm"), "mixed"), (1, 0.1, ("a", "qa", "lm"), "not tested"),
    (1, 0.9, ("a", "qa"), "not tested")])
def test_the_verdict_can_come_out_every_way(sign, acc, objectives, outcome):
    assert claims.objectives(_Stub(sign, acc, objectives)).outcome == outcome


def test_the_dynamics_table_round_trips(tmp_path):
    """The training command's table: one row per kept snapshot, read back as numbers."""
    snap = tmp_path / RUNS[0] / "snapshots" / "step-000010"
    shutil.copytree(registry.MODELS_DIR / RUNS[0], snap)
    rows = write_dynamics(tmp_path, tmp_path / "dyn.csv", n=3, progress_bar=False)
    back = read_dynamics(tmp_path / "dyn.csv")
    assert len(rows) == len(back) == 1 and back[0]["step"] == 10 and back[0]["run"] == RUNS[0]
    assert back[0]["contributions"] == pytest.approx(rows[0]["contributions"])
    (tmp_path / RUNS[0] / "snapshots" / "step-000020").symlink_to(snap)
    again = write_dynamics(tmp_path, tmp_path / "dyn.csv", n=3, progress_bar=False)  # the row kept, one measured
    assert len(again) == 2 and again[0] == back[0] and read_dynamics(tmp_path / "dyn.csv")[1]["step"] == 20
