"""The mutation table of the stretch exercises of chapters 0–4 (0.3, 1.3, 2.3, 3.3, 4.3):
the wrong answers students write, each as a function, and the phrase the checker must answer it with.

As in ``tests/teaching/test_exercise_mutations.py``, each mutation is the reference solution (:mod:`depthutils.teaching.solutions`)
with one thing changed, written the way a student would write it (not by calling the checker's own mistake
functions), so a test fails when the checker passes that wrong answer or stops naming it. Run
``PYTHONPATH=tests python tests/teaching/test_stretch_mutations_0to4.py`` to print the table (exercise, mutation, the checker's message).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import GENERIC as CORE_GENERIC  # the checker's runner and fallbacks
from conftest import message

from depthutils.teaching import exercises, solutions


# --------------------------------------------------------------------------- 0.3 residual_terms
def _terms(start="input", order="am", attn="self_attn", mlp="mlp", per_layer=None):  # noqa: C901
    """Plain hooks: h_0 (or h_1), then each layer's attention and MLP terms; ``per_layer`` replaces the two terms
    of a layer by what a student returned instead (``"update"``: Δ_l; ``"residual"``: h_{l+1})."""
    def wrong(lm, input_ids):
        L, seen = lm.n_layers, {}
        put = lambda key: lambda m, a, out: seen.__setitem__(key, out[0] if isinstance(out, tuple) else out)  # noqa: E731
        hooks = [lm.hf_layer(0).register_forward_pre_hook(lambda m, a: seen.__setitem__("h0", a[0]))]
        for l in range(L):
            block = lm.hf_layer(l)
            hooks.append(block.register_forward_pre_hook(lambda m, a, l=l: seen.__setitem__(("h", l), a[0])))
            hooks.append(block.register_forward_hook(put(("out", l))))
            hooks.append(getattr(block, mlp).register_forward_hook(put(("m", l))))
            if attn == "self_attn":
                hooks.append(block.self_attn.register_forward_hook(put(("a", l))))
            else:  # the residual between the sublayers, h_l + a_l: the input of post_attention_layernorm
                hooks.append(block.post_attention_layernorm.register_forward_pre_hook(
                    lambda m, a, l=l: seen.__setitem__(("a", l), a[0])))
        solutions._run_hooked(lm, input_ids, hooks)
        first = seen["h0"] if start == "input" else seen[("out", 0)]
        terms = [first] if start else []
        for l in range(L):
            if per_layer == "update":
                terms.append(seen[("out", l)] - seen[("h", l)])
            elif per_layer == "residual":
                terms.append(seen[("out", l)])
            else:
                pair = {"a": seen[("a", l)], "m": seen[("m", l)]}
                terms += [pair[k] for k in order]
        return torch.stack(terms)
    return wrong


def terms_out_of_order(lm, input_ids):
    """Every attention first, then every MLP, in one nnsight trace: out of the model's order."""
    a, m = [], []
    with torch.no_grad(), lm.nn.trace(input_ids):
        h_0 = lm.layer(0).input.save()
        for l in range(lm.n_layers):
            a.append(lm.layer(l).self_attn.output[0].save())
        for l in range(lm.n_layers):
            m.append(lm.layer(l).mlp.output.save())
    return torch.stack([h_0, *[x for pair in zip(a, m) for x in pair]])


# ---------------------------------------------------------------------------- 1.3 layer_cosines
def _cosines(attn_vs="h", mlp_vs="h+a", layer_vs="h", how="cos", dim=-1, shift=0, order=(0, 1, 2)):
    def wrong(lm, input_ids, layer):
        seen = {}
        block = lm.hf_layer(layer + shift)
        hooks = [block.register_forward_pre_hook(lambda m, a: seen.update(h=a[0])),
                 block.input_layernorm.register_forward_hook(lambda m, a, out: seen.update(normed=out)),
                 block.self_attn.register_forward_hook(lambda m, a, out: seen.update(a=out[0])),
                 block.mlp.register_forward_hook(lambda m, a, out: seen.update(m=out)),
                 block.register_forward_hook(lambda m, a, out: seen.update(out=out))]
        solutions._run_hooked(lm, input_ids, hooks)
        h, a, m, out = seen["h"], seen["a"], seen["m"], seen["out"]
        against = {"h": h, "h+a": h + a, "out": out, "normed": seen["normed"]}
        stat = {"cos": lambda x, y: F.cosine_similarity(x, y, dim=dim),
                "dot": lambda x, y: (x * y).sum(dim),
                "ratio": lambda x, y: x.norm(dim=dim) / y.norm(dim=dim)}[how]
        rows = [stat(a, against[attn_vs]), stat(m, against[mlp_vs]), stat(out - h, against[layer_vs])]
        return torch.stack([rows[k] for k in order], dim=1)
    return wrong


# ------------------------------------------------------------------------------ 2.3 skip_matrix
def _matrix(skipped=lambda t: slice(1, t), measured=lambda t: slice(t, None), by="clean", what="update",
            reduce="max", below=float("nan"), transpose=False, position_shift=0):
    """One batched pass, as the solution does it, with one thing changed."""
    def wrong(lm, input_ids, position):
        L, t = lm.n_layers, position + position_shift
        seen = {}

        def hook(s):
            def fn(module, args, output):
                h = output.clone()
                h[s + 1, skipped(t)] = args[0][s + 1, skipped(t)]
                seen[s] = h if what == "residual" else h - args[0]
                return h
            return fn
        solutions._run_hooked(lm, input_ids.expand(L + 1, -1),
                              [lm.hf_layer(s).register_forward_hook(hook(s)) for s in range(L)])
        D = torch.full((L, L), below)
        for j in range(L):
            for s in range(j):
                clean, other = seen[j][0, measured(t)], seen[j][s + 1, measured(t)]
                diff = (clean - other).norm(dim=-1)
                if by is not None:
                    diff = diff / (clean if by == "clean" else other).norm(dim=-1)
                D[s, j] = getattr(diff, reduce)()
        return D.T if transpose else D
    return wrong


# ----------------------------------------------------------------------------- 3.3 lens_overlap
def _overlap(read="input", norm=True, divide=True, compare="set", final_row0=False, k=5):
    def wrong(lm, input_ids):
        lens = []
        with torch.no_grad(), lm.nn.trace(input_ids):
            for l in range(lm.n_layers):
                h = getattr(lm.layer(l), read)
                lens.append(lm.unembed(lm.final_norm(h) if norm else h).save())
            final = lm.unembed.output.save()
        top_final = final.topk(k, dim=-1).indices
        top_final = top_final[0] if final_row0 else top_final  # output[0]: batch row 0
        rows = []
        for z in lens:
            top = z.topk(k, dim=-1).indices
            hit = (top == top_final) if compare == "rank" else (top[..., :, None] == top_final[..., None, :]).any(-1)
            rows.append(hit.float().sum(-1) / (k if divide else 1))
        return torch.stack(rows, dim=1)
    return wrong


# --------------------------------------------------------------------------- 4.3 erasure_matrix
def _erasure(value="mean", at="input", read="predict", first=1, rows=None, transpose=False):
    """One forward per layer, a batch row per erased position (as the hints say), one thing changed."""
    def wrong(lm, input_ids, means, predict_positions):
        L, T = lm.n_layers, input_ids.shape[1]
        reads = {"predict": list(predict_positions), "answer": [p + 1 for p in predict_positions],
                 "all": slice(None)}[read]
        clean = solutions._output_probs(lm, input_ids)[0, reads]
        E = torch.zeros(L + 1 if rows is None else rows, T)
        ts = list(range(first, T))
        for l in range(E.shape[0]):
            vector = torch.as_tensor(means[l], dtype=torch.float32)
            vector = torch.zeros_like(vector) if value == "zeros" else vector

            def erase(h):
                h = h.clone()
                h[range(len(ts)), ts] = vector
                return h
            block = lm.hf_layer(min(l, L - 1))
            hook = (block.register_forward_hook(lambda m, a, out: erase(out)) if at == "output" or l == L
                    else block.register_forward_pre_hook(lambda m, a: (erase(a[0]), *a[1:])))
            probs = solutions._run_hooked(lm, input_ids.expand(len(ts), -1), [hook]).logits.float().softmax(-1)[:, reads]
            E[l, ts] = (probs - clean).norm(dim=-1).amax(dim=-1)
        return E.T if transpose else E
    return wrong


#: (exercise, the mistake, the wrong answer, a phrase the checker's message must contain)
MUTATIONS = [
    ("residual_terms", "no h_0", _terms(start=None), "no h_0"),
    ("residual_terms", "h_1 (layer 0's output) first", _terms(start="output"), "the first term is h_1"),
    ("residual_terms", "MLP before attention", _terms(order="ma"), "MLP's term before the attention's"),
    ("residual_terms", "each layer's update Δ_l", _terms(per_layer="update"), "each layer's update Δ_l"),
    ("residual_terms", "the residuals h_0 … h_L", _terms(per_layer="residual"), "the residual stream h_0 … h_L"),
    ("residual_terms", "h_l + a_l (post_attention_layernorm's input) as the attention's term", _terms(attn="mid"),
     "h_l + a_l"),
    ("residual_terms", "every attention, then every MLP, in one trace", terms_out_of_order, "in the order the model"),
    ("layer_cosines", "MLP against h_l", _cosines(mlp_vs="h"), "compares m_l with h_l"),
    ("layer_cosines", "MLP against h_{l+1}", _cosines(mlp_vs="out"), "compares m_l with h_{l+1}"),
    ("layer_cosines", "Δ_l against h_{l+1}", _cosines(layer_vs="out"), "compares Δ_l with h_{l+1}"),
    ("layer_cosines", "dot products", _cosines(how="dot"), "dot products, not cosines"),
    ("layer_cosines", "norm ratios (1.2's statistic)", _cosines(how="ratio"), "norm ratios"),
    ("layer_cosines", "cosine over positions (dim=1)", _cosines(dim=1), "run over the positions"),
    ("layer_cosines", "attention against norm(h_l)", _cosines(attn_vs="normed"), "attention's own input"),
    ("layer_cosines", "rows in another order", _cosines(order=(2, 1, 0)), "another order"),
    ("layer_cosines", "the next layer", _cosines(shift=1), "next layer"),
    ("skip_matrix", "skips position 0 too", _matrix(skipped=lambda t: slice(0, t)), "BOS attention sink"),
    ("skip_matrix", "‖Δ_j − Δ′_j‖ not divided", _matrix(by=None), "alone"),
    ("skip_matrix", "divided by the skipped run's ‖Δ′_j‖", _matrix(by="skipped"), "skipped run's update"),
    ("skip_matrix", "residuals h_{j+1} instead of updates", _matrix(what="residual"), "compared the residuals"),
    ("skip_matrix", "max over every position", _matrix(measured=lambda t: slice(None)), "over every position"),
    ("skip_matrix", "mean instead of max", _matrix(reduce="mean"), "mean over the positions"),
    ("skip_matrix", "0 where j ≤ s", _matrix(below=0.0), "NaN"),
    ("skip_matrix", "transposed", _matrix(transpose=True), "transposed"),
    ("skip_matrix", "positions off by one (1 … t)", _matrix(position_shift=1), "off by one"),
    ("lens_overlap", "count, not /5", _overlap(divide=False), "divided by 5"),
    ("lens_overlap", "rank by rank", _overlap(compare="rank"), "rank by rank"),
    ("lens_overlap", "no final norm", _overlap(norm=False), "without the final norm"),
    ("lens_overlap", "each layer's output", _overlap(read="output"), "each layer's output"),
    ("lens_overlap", "`output[0]` of the logits", _overlap(final_row0=True), "batch row 0"),
    ("lens_overlap", "top-1 agreement", _overlap(k=1), "top-1 agreement"),
    ("erasure_matrix", "erases position 0 too", _erasure(first=0), "position 0 is BOS"),
    ("erasure_matrix", "zeros instead of the mean", _erasure(value="zeros"), "by zeros"),
    ("erasure_matrix", "erases the layer's output", _erasure(at="output"), "each layer's output"),
    ("erasure_matrix", "reads the answer at its own positions", _erasure(read="answer"), "at its own positions"),
    ("erasure_matrix", "max over every position", _erasure(read="all"), "over every position"),
    ("erasure_matrix", "no row for h_L", _erasure(rows=8), "no row for h_L"),
    ("erasure_matrix", "transposed", _erasure(transpose=True), "transposed"),
]

#: the checker's fallbacks, which say where and by how much an answer differs (or its shape) but name no mistake
GENERIC = (*CORE_GENERIC, "expected (")

STRETCH = ("residual_terms", "layer_cosines", "skip_matrix", "lens_overlap", "erasure_matrix")

def test_every_stretch_exercise_is_registered_and_has_four_mutations():
    numbers = {id: exercises.EXERCISES[id].number for id in STRETCH}
    assert numbers == {"residual_terms": "0.3", "layer_cosines": "1.3", "skip_matrix": "2.3", "lens_overlap": "3.3",
                       "erasure_matrix": "4.3"}
    assert all(sum(m[0] == id for m in MUTATIONS) >= 4 for id in STRETCH)
    assert all(3 <= exercises.EXERCISES[id].difficulty <= 5 for id in STRETCH)


@pytest.mark.parametrize("id, mistake, fn, phrase", MUTATIONS, ids=[f"{m[0]}: {m[1]}" for m in MUTATIONS])
def test_the_checker_fails_the_mistake_and_names_it(id, mistake, fn, phrase):
    msg = message(id, fn)
    assert msg is not None, f"{id} passes the wrong answer '{mistake}'"
    assert phrase in msg, msg
    assert not any(generic in msg for generic in GENERIC), msg


@pytest.mark.parametrize("id", STRETCH)
def test_a_crashed_attempt_does_not_poison_the_solution(id, capsys):
    """A student's function that leaves a hook on the model and crashes; the solution's check still passes."""
    def crash(lm, **kw):
        lm.hf_layer(0).register_forward_hook(lambda m, a, out: out * 0)
        raise RuntimeError("a bug in the student's code")
    with pytest.raises(RuntimeError):
        exercises.check(id, lambda lm, **kw: crash(lm, **kw))
    exercises.check(id, exercises.solution(id))
    assert "✔" in capsys.readouterr().out


if __name__ == "__main__":
    print("| exercise | mutation | the checker's message |\n|---|---|---|")
    for id, mistake, fn, _ in MUTATIONS:
        msg = message(id, fn) or "**passes**"
        print(f"| {exercises.EXERCISES[id].number} `{id}` | {mistake} | {msg.replace('|', '/')} |")
