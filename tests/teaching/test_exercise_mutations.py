"""The mutation table of the exercises: for every implement-it exercise, the wrong
answers students write, each as a function, and the sentence the checker must answer it with.

Each mutation is the reference solution (:mod:`depthutils.teaching.solutions`) with one thing changed, written the way a
student would write it (not by calling the checker's own mistake functions), so a test fails when the checker
passes that wrong answer or stops naming it. ``PYTHONPATH=tests python tests/teaching/test_exercise_mutations.py``
prints the table (exercise, mutation, the checker's message) as Markdown (the checks every table shares are in
``tests/conftest.py``).
"""
from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_named, message

from depthutils.teaching import exercises, solutions


# --------------------------------------------------------------------------- 0.2 layer_output
def _read(lm, input_ids, module, what="output", index=None):
    with torch.no_grad(), lm.nn.trace(input_ids):
        x = getattr(module(lm), what)
        x = (x if index is None else x[index]).save()
    return x


def out_row0(lm, input_ids, layer):
    return _read(lm, input_ids, lambda m: m.layer(layer), index=0)


def out_row0_kept(lm, input_ids, layer):
    return out_row0(lm, input_ids, layer).unsqueeze(0)


def out_input(lm, input_ids, layer):
    return _read(lm, input_ids, lambda m: m.layer(layer), "input")


def out_next(lm, input_ids, layer):
    return solutions.layer_output(lm, input_ids, layer + 1)


def out_unsaved(lm, input_ids, layer):
    with torch.no_grad(), lm.nn.trace(input_ids):
        out = lm.layer(layer).output
    return out


def out_update(lm, input_ids, layer):
    h_in, h_out = solutions._residual_around(lm, input_ids, layer)
    return h_out - h_in


def out_attention(lm, input_ids, layer):
    return _read(lm, input_ids, lambda m: m.layer(layer).self_attn, index=0)


def out_mlp(lm, input_ids, layer):
    return _read(lm, input_ids, lambda m: m.layer(layer).mlp)


def out_last(lm, input_ids, layer):
    return _read(lm, input_ids, lambda m: m.layer(m.n_layers - 1))


# ------------------------------------------------------------------ 1.2 relative_contribution
def _relative(norm_of="input", divide=True, dim=-1, square=False, row0=False, shift=0):
    def wrong(lm, input_ids, layer):
        h_in, h_out = solutions._residual_around(lm, input_ids, layer + shift)
        delta = (h_out[0] if row0 else h_out) - h_in
        top = (h_out if norm_of == "ratio" else delta).norm(dim=dim)
        value = top / (h_out if norm_of == "output" else h_in).norm(dim=dim) if divide else top
        return value ** 2 if square else value
    return wrong


# ---------------------------------------------------------------------------- 2.2 skip_effect
def _skip(skipped=lambda t: slice(1, t), measured=lambda t: slice(t, None), reduce="max", logits=False, shift=0):
    def wrong(lm, input_ids, layer, position):
        def outputs(edit=None):
            hook = lm.hf_layer(layer + shift).register_forward_hook(edit) if edit else None
            try:
                with torch.no_grad():
                    z = lm.hf(input_ids).logits.float()
            finally:
                if hook:
                    hook.remove()
            return z if logits else z.softmax(-1)

        def skip(module, args, output):
            h = output.clone()
            h[:, skipped(position)] = args[0][:, skipped(position)]
            return h
        diff = (outputs() - outputs(skip))[0, measured(position)].norm(dim=-1)
        return float(getattr(diff, reduce)())
    return wrong


# -------------------------------------------------------------------------------- 3.2 lens_kl
def _lens(direction="lens first", norm=True, read="input", row0=False, dim=-1, mean=False, save=True, bits=False):
    def wrong(lm, input_ids, layer):
        with torch.no_grad(), lm.nn.trace(input_ids):
            h = getattr(lm.layer(layer), read)
            h = h[0] if row0 else h
            lens = lm.unembed(lm.final_norm(h) if norm else h)
            lens = lens.save() if save else lens
            final = lm.unembed.output.save()
        first, second = (lens, final) if direction == "lens first" else (final, lens)
        q = first.float().softmax(dim)
        log = (lambda x: x.float().log_softmax(dim) / np.log(2.0)) if bits else (lambda x: x.float().log_softmax(dim))
        kl = (q * (log(first) - log(second))).sum(-1)  # bits: torch.log2 of the probabilities
        return kl.mean(-1) if mean else kl
    return wrong


# ------------------------------------------------------------------------- 4.2 erasure_effect
def _erase(at="input", value="mean", read="predict", where=lambda t: t, shift=0):
    def wrong(lm, input_ids, layer, position, means, predict_positions):
        vector = torch.as_tensor(means[layer + shift], dtype=torch.float32)
        vector = torch.zeros_like(vector) if value == "zeros" else vector

        def erase(h):
            h = h.clone()
            h[:, where(position)] = vector
            return h
        block = lm.hf_layer(layer)
        hook = (block.register_forward_pre_hook(lambda m, a: (erase(a[0]), *a[1:])) if at == "input"
                else block.register_forward_hook(lambda m, a, o: erase(o)))
        try:
            with torch.no_grad():
                erased = lm.hf(input_ids).logits.float().softmax(-1)
        finally:
            hook.remove()
        clean = solutions._output_probs(lm, input_ids)
        rows = {"predict": list(predict_positions), "answer": [p + 1 for p in predict_positions],
                "all": slice(None)}[read]
        return float((clean - erased)[0, rows].norm(dim=-1).max())
    return wrong


# ----------------------------------------------------------------------------- 5.2 ig_riemann
def _ig(baseline="positions", ks=range, divide=True, sum_hidden=True, shift=0):
    def wrong(lm, input_ids, layer, predict_positions, answer_ids, steps):
        layer = layer + shift
        _, x = solutions._residual_around(lm, input_ids, layer)
        b = {"positions": x.mean(dim=1, keepdim=True), "hidden": x.mean(dim=-1, keepdim=True),
             "zero": torch.zeros_like(x)}[baseline]
        total = 0
        for k in ks(steps):
            point = (b + (k / steps) * (x - b)).detach().requires_grad_(True)
            hook = lm.hf_layer(layer).register_forward_hook(lambda m, a, o: point)
            try:
                probs = lm.hf(input_ids).logits.float().softmax(-1)
            finally:
                hook.remove()
            (grad,) = torch.autograd.grad(probs[0, predict_positions, answer_ids].sum(), point)
            total = total + (grad * (x - b))[0].detach() / (steps if divide else 1)
        return total.sum(-1) if sum_hidden else total
    return wrong


# ---------------------------------------------------------------------------- 6.2 depth_score
def _depth(average=lambda L, s: L - 1 - s, weight=lambda s: s, normalise=False, row=lambda D, s: np.nansum(D[s, s + 1:]),
           rows=lambda L: L - 1):
    def wrong(D):
        D = np.asarray(D, float)
        L = D.shape[0]
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.array([row(D, s) / average(L, s) for s in range(rows(L))])
        with np.errstate(invalid="ignore", divide="ignore"):
            score = float((weight(np.arange(len(r))) * r).sum() / r.sum())
        return score / (L - 1) if normalise else score
    return wrong


# ------------------------------------------------------------------------------ 7.2 map_error
def _map(bias=True, fit_on="fit", score_on="test", per_token=True, relative=True, square=False, axis=1):
    def wrong(X_fit, Y_fit, X_test, Y_test):
        data = {"fit": (X_fit, Y_fit), "test": (X_test, Y_test)}
        ones = (lambda X: np.hstack([X, np.ones((len(X), 1))])) if bias else (lambda X: np.asarray(X, float))
        W, *_ = np.linalg.lstsq(ones(data[fit_on][0]), data[fit_on][1], rcond=None)
        X, Y = data[score_on]
        err, size = np.linalg.norm(ones(X) @ W - Y, axis=axis), np.linalg.norm(Y, axis=axis)
        if square:
            err, size = err ** 2, size ** 2
        if not relative:
            return float(err.mean())
        return float(np.mean(err / size)) if per_token else float(err.mean() / size.mean())
    return wrong


# --------------------------------------------------------------------------- 8.2 later_effect
def _later(skipped=lambda t: slice(1, t), measured=lambda t: slice(t, None), by="clean", what="update",
           reduce="max", later_shift=0, position_shift=0):
    def wrong(lm, input_ids, layer, later, position):
        position = position + position_shift
        seen = []
        watch = lm.hf_layer(later + later_shift).register_forward_hook(
            lambda m, a, o: seen.append(o - a[0] if what == "update" else o))

        def skip(module, args, output):
            h = output.clone()
            h[:, skipped(position)] = args[0][:, skipped(position)]
            return h
        try:
            with torch.no_grad():
                lm.hf(input_ids)
                hook = lm.hf_layer(layer).register_forward_hook(skip)
                try:
                    lm.hf(input_ids)
                finally:
                    hook.remove()
        finally:
            watch.remove()
        clean, skipped_run = seen
        change = (clean - skipped_run).norm(dim=-1)
        ratio = change / {"clean": clean, "skipped": skipped_run}[by].norm(dim=-1) if by else change
        return float(getattr(ratio[0, measured(position)], reduce)())
    return wrong


# ------------------------------------------------------------------------ 9.2 effective_depth_kl
def _ed(test=lambda v, top: v < top, reference=max, fallback=None, pick=0, plus=0, ratio=False, last=False):
    def wrong(kl):
        kl = np.asarray(kl, float)
        hits = [l for l, v in enumerate(kl if last else kl[:-1]) if test(v, 0.5 * reference(kl))]
        if not hits:
            return fallback
        l = hits[pick] + plus
        return (l + 1) / len(kl) if ratio else l
    return wrong


def first(kl):
    return kl[0]


#: (exercise, the mistake, the wrong answer, a phrase the checker's message must contain)
# --------------------------------------------------------------------------- 10.2 answer_only_targets
def _targets(mask=lambda a: a[:, 1:], fill=-100, shift=True):
    """:func:`solutions.answer_only_targets` with one step written wrong."""
    def answer_only_targets(input_ids, answer_mask):
        targets = (input_ids[:, 1:] if shift else input_ids[:, :-1]).clone()
        targets[~mask(answer_mask)] = fill
        return targets
    return answer_only_targets


def _qa_targets(input_ids, answer_mask):
    targets = input_ids[:, 1:].clone()
    targets[targets == 2] = -100  # the pad token
    return targets


MUTATIONS = [
    ("answer_only_targets", "mask answer_mask[:, :-1]", _targets(mask=lambda a: a[:, :-1]), "answer_mask[:, 1:]"),
    ("answer_only_targets", "ignored targets filled with 0", _targets(fill=0), "ignore_index"),
    ("answer_only_targets", "the mask inverted", _targets(mask=lambda a: ~a[:, 1:]), "inverted the mask"),
    ("answer_only_targets", "every token kept (Q+A)", _qa_targets, "Q+A targets"),
    ("answer_only_targets", "no shift: each position's own token", _targets(mask=lambda a: a[:, :-1], shift=False),
     "did not shift"),
    ("layer_output", "`output[0]` (batch row 0)", out_row0, "dropped the batch axis"),
    ("layer_output", "`output[0].unsqueeze(0)` (one row kept)", out_row0_kept, "kept batch row 0 only"),
    ("layer_output", "`.input` instead of `.output`", out_input, "read the layer's input"),
    ("layer_output", "the next layer", out_next, "you used the next layer"),
    ("layer_output", "no `.save()`", out_unsaved, ".save()"),
    ("layer_output", "the update Δ_l instead of h_{l+1}", out_update, "the layer's update Δ_l"),
    ("layer_output", "the attention sublayer's output", out_attention, "attention sublayer adds"),
    ("layer_output", "the MLP sublayer's output", out_mlp, "MLP sublayer adds"),
    ("layer_output", "always the last layer", out_last, "the last layer's output h_L"),
    ("relative_contribution", "divided by ‖h_{l+1}‖", _relative(norm_of="output"), "‖Δ_l‖ / ‖h_{l+1}‖"),
    ("relative_contribution", "‖h_{l+1}‖ / ‖h_l‖", _relative(norm_of="ratio"), "not of its update"),
    ("relative_contribution", "‖Δ_l‖ not divided", _relative(divide=False), "‖Δ_l‖ alone"),
    ("relative_contribution", "squared norms", _relative(square=True), "squared norms"),
    ("relative_contribution", "norm over positions (dim=1)", _relative(dim=1), "run over the positions"),
    ("relative_contribution", "`output[0]` minus the input", _relative(row0=True), "batch row 0"),
    ("relative_contribution", "the previous layer", _relative(shift=-1), "previous layer"),
    ("relative_contribution", "the next layer", _relative(shift=1), "next layer"),
    ("skip_effect", "skips position 0 too", _skip(skipped=lambda t: slice(0, t)), "BOS attention sink"),
    ("skip_effect", "skips p ≥ t instead of 1 … t−1", _skip(skipped=lambda t: slice(t, None)), "skipped the positions p ≥ t"),
    ("skip_effect", "max over every position", _skip(measured=lambda t: slice(None)), "over every position"),
    ("skip_effect", "mean instead of max", _skip(reduce="mean"), "mean over the positions"),
    ("skip_effect", "logits instead of probabilities", _skip(logits=True), "difference of logits"),
    ("skip_effect", "positions off by one (1 … t)", _skip(skipped=lambda t: slice(1, t + 1),
                                                           measured=lambda t: slice(t + 1, None)), "off by one"),
    ("skip_effect", "the next layer", _skip(shift=1), "skipped the next layer"),
    ("lens_kl", "KL(q_L ‖ q_l)", _lens(direction="output first"), "the other direction"),
    ("lens_kl", "no final norm", _lens(norm=False), "without the final norm"),
    ("lens_kl", "`.output` (h_{l+1}) instead of `.input`", _lens(read="output"), "read the layer's output"),
    ("lens_kl", "`output[0]` (row 0's lens)", _lens(row0=True), "lens of batch row 0"),
    ("lens_kl", "KL in bits", _lens(bits=True), "in bits"),
    ("lens_kl", "softmax over positions", _lens(dim=1), "run over the positions"),
    ("lens_kl", "mean over positions", _lens(mean=True), "mean KL over the positions"),
    ("lens_kl", "no `.save()`", _lens(save=False), ".save()"),
    ("erasure_effect", "erases the layer's output with means[layer]", _erase(at="output"),
     "replaced the output of decoder layer"),
    ("erasure_effect", "the output h_{l+1} with means[layer+1]", _erase(at="output", shift=1), "output h_{l+1}"),
    ("erasure_effect", "zeros instead of the mean", _erase(value="zeros"), "by zeros"),
    ("erasure_effect", "reads the answer at its own positions", _erase(read="answer"), "at its own positions"),
    ("erasure_effect", "max over every position", _erase(read="all"), "over every position"),
    ("erasure_effect", "erases every position from t on", _erase(where=lambda t: slice(t, None)),
     "every position from `position` on"),
    ("erasure_effect", "the position before", _erase(where=lambda t: t - 1), "position before"),
    ("ig_riemann", "baseline averaged over the hidden axis", _ig(baseline="hidden"), "over the hidden axis: b is"),
    ("ig_riemann", "right Riemann sum", _ig(ks=lambda K: range(1, K + 1)), "right Riemann sum"),
    ("ig_riemann", "zero baseline", _ig(baseline="zero"), "baseline is zero"),
    ("ig_riemann", "not divided by K", _ig(divide=False), "did not divide by K"),
    ("ig_riemann", "not summed over the hidden axis", _ig(sum_hidden=False), "did not sum over the hidden axis"),
    ("ig_riemann", "the layer's input", _ig(shift=-1), "read the layer's input"),
    ("depth_score", "row sums not averaged", _depth(average=lambda L, s: 1), "did not average"),
    ("depth_score", "normalised by L−1", _depth(normalise=True), "normalised score"),
    ("depth_score", "weights s+1", _depth(weight=lambda s: s + 1), "not s+1"),
    ("depth_score", "averaged over L−s layers", _depth(average=lambda L, s: L - s), "not L−s"),
    ("depth_score", "`np.sum(D[s])`: the whole row, NaNs too", _depth(row=lambda D, s: np.sum(D[s])), "np.nansum"),
    ("depth_score", "s over 0 … L−1 (the last row too)", _depth(rows=lambda L: L), "0 … L−2"),
    ("map_error", "no bias", _map(bias=False), "no bias"),
    ("map_error", "fitted on the held-out tokens", _map(fit_on="test"), "fitted the map on the held-out"),
    ("map_error", "scored on the fitting tokens", _map(score_on="fit"), "tokens it was fitted on"),
    ("map_error", "absolute error", _map(relative=False), "absolute error"),
    ("map_error", "ratio of means", _map(per_token=False), "ratio of means"),
    ("map_error", "squared relative error", _map(square=True), "squared relative error"),
    ("map_error", "norms over tokens (axis=0)", _map(axis=0), "run over the tokens"),
    ("later_effect", "skips position 0 too", _later(skipped=lambda t: slice(0, t)), "BOS attention sink"),
    ("later_effect", "‖Δ_j − Δ′_j‖ not divided", _later(by=None), "alone"),
    ("later_effect", "divided by the skipped run's ‖Δ′_j‖", _later(by="skipped"), "skipped run's update"),
    ("later_effect", "residuals h_{j+1} instead of updates", _later(what="residual"), "compared the residuals"),
    ("later_effect", "max over every position", _later(measured=lambda t: slice(None)), "over every position"),
    ("later_effect", "mean instead of max", _later(reduce="mean"), "mean over the positions"),
    ("later_effect", "the layer after `later`", _later(later_shift=1), "after `later`"),
    ("later_effect", "positions off by one", _later(position_shift=-1), "off by one"),
    ("effective_depth_kl", "the last crossing", _ed(pick=-1), "last qualifying layer"),
    ("effective_depth_kl", "l + 1", _ed(plus=1), "off by one"),
    ("effective_depth_kl", "the ratio (ED + 1) / L", _ed(ratio=True), "P2's ratio"),
    ("effective_depth_kl", "0 when undefined", _ed(fallback=0), "return None"),
    ("effective_depth_kl", "≤ instead of <", _ed(test=lambda v, top: v <= top), "strict"),
    ("effective_depth_kl", "half of KL_0, not of max KL", _ed(reference=first), "half of the first layer's KL"),
    ("effective_depth_kl", "searches the last entry too", _ed(last=True), "l = 0 … L−2"),
]


def every_mutation() -> list:
    """This table and those of the other mutation files beside it (``test_stretch_mutations_*.py``: the stretch
    exercises'), so that every registered exercise is in one of them."""
    rows = list(MUTATIONS)
    for path in sorted(Path(__file__).parent.glob("test_*mutations*.py")):
        if path.stem != Path(__file__).stem:
            rows += importlib.import_module(path.stem).MUTATIONS
    return rows


def test_every_exercise_has_mutations():
    """Every exercise has a mutation table: the core ones here (at least 5 each), the stretch ones in the
    stretch files (at least 4 each)."""
    rows = every_mutation()
    assert {m[0] for m in rows} == set(exercises.EXERCISES)
    assert all(sum(m[0] == id for m in MUTATIONS) >= 5 for id in {m[0] for m in MUTATIONS})  # the core exercises
    assert all(sum(m[0] == id for m in rows) >= 4 for id in exercises.EXERCISES)


@pytest.mark.parametrize("id, mistake, fn, phrase", MUTATIONS, ids=[f"{m[0]}: {m[1]}" for m in MUTATIONS])
def test_the_checker_fails_the_mistake_and_names_it(id, mistake, fn, phrase):
    assert_named(id, mistake, fn, phrase)


if __name__ == "__main__":
    print("| exercise | mutation | the checker's message |\n|---|---|---|")
    for id, mistake, fn, _ in MUTATIONS:
        msg = message(id, fn) or "**passes**"
        print(f"| {exercises.EXERCISES[id].number} `{id}` | {mistake} | {msg.replace('|', '/')} |")
