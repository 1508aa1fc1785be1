"""Chapter 2, future effects: the effect on the output of skipping one layer.

The chapter's prediction exercise is 2.1 (prose only, on the page); 2.2 (core) is the effect on the output of
skipping one layer and 2.3 (stretch) the whole matrix of effects on the later layers in one batched pass, both
checked by :func:`depthutils.teaching.exercises.check`.
"""
from __future__ import annotations

import functools

import torch

from depthutils.core.prompts import Prompt
from depthutils.measures.future_effects import future_effects
from depthutils.teaching import solutions
from depthutils.teaching.exercises.core import Exercise, register
from depthutils.teaching.exercises.inputs import _model, _one


@functools.lru_cache(maxsize=None)
def _future(name: str, text: str, answer_start: int, position: int, tokens: int):
    lm = _model(name)
    r = future_effects(lm, [Prompt(text, answer_start)], positions=[position], max_tokens=tokens, progress_bar=False)
    return r.output_effect_by_prompt[0], r.layer_effect_by_prompt[0]


def _future_of(lm, case):
    p = case["_prompt"]
    return _future(lm.name, p.text, p.answer_start, case["position"], case["input_ids"].shape[1])


def _skipping(positions):
    """An edit for :func:`depthutils.teaching.solutions._output_probs` that skips the layer at ``positions`` (a slice)."""
    def edit(h_in, h_out):
        h_new = h_out.clone()
        h_new[:, positions] = h_in[:, positions]
        return h_new
    return edit


def _skip_mistakes(lm, case):
    ids, s, t = case["input_ids"], case["layer"], case["position"]
    clean = solutions._output_probs(lm, ids)
    diff = lambda skipped: (clean - skipped)[0].norm(dim=-1)  # noqa: E731  [T]
    right = diff(solutions._output_probs(lm, ids, s, _skipping(slice(1, t))))
    return {"you skipped position 0 too: position 0 is the BOS attention sink; skip positions 1 … t−1 only":
            float(diff(solutions._output_probs(lm, ids, s, _skipping(slice(0, t))))[t:].max()),
            "you skipped the positions p ≥ t: skip the earlier positions 1 … t−1 and measure the later ones p ≥ t":
            float(diff(solutions._output_probs(lm, ids, s, _skipping(slice(t, None))))[t:].max()),
            "you took the maximum over every position: measure only the positions p ≥ t, after the skipped ones":
            float(right.max()),
            "this is the mean over the positions p ≥ t: the effect is their maximum": float(right[t:].mean()),
            "this is a norm of the difference of logits: compare the probabilities, softmax(z)": float(
                (_logits(lm, ids) - _logits(lm, ids, s, _skipping(slice(1, t))))[0, t:].norm(dim=-1).max())}


def _logits(lm, ids, layer=None, edit=None):
    """The model's logits ``[B, T, V]`` (log-probabilities would hide the mistake: a shift per position)."""
    hook = lm.hf_layer(layer).register_forward_hook(lambda m, a, o: edit(a[0], o)) if edit else None
    try:
        with torch.no_grad():
            return lm.hf(ids).logits.float()
    finally:
        if hook is not None:
            hook.remove()


EXERCISE = Exercise(
    "skip_effect", "02_future_effects", "The effect on the output of skipping one layer",
    "skip_effect(lm, input_ids, layer, position) -> float",
    "max over p ≥ position of ‖softmax(z[p]) − softmax(z′[p])‖₂ when layer `layer` is skipped on "
    "positions 1 … position−1 (one prompt, input_ids [1, T])",
    difficulty=3, importance=4,
    hints=("Skipping layer s sets h_{s+1}[p] := h_s[p]: a forward hook on `lm.hf_layer(layer)` can return "
           "the layer's output with its input copied in at those positions.",
           "Compare with a clean run of the same input; measure only the positions p ≥ t.",
           "Position 0 is BOS, the attention sink: the skip starts at position 1."),
    cases=lambda lm: [dict(zip(("input_ids", "_prompt"), _one(lm)), layer=l, position=t) for l, t in ((2, 12), (5, 16))],
    reference=lambda lm, case: float(_future_of(lm, case)[0][case["layer"]]),
    mistakes=_skip_mistakes,
    shifts={"layer": {-1: "you skipped the previous layer", 1: "you skipped the next layer"},
            "position": {-1: "off by one in the positions: skip 1 … t−1 and measure p ≥ t",
                         1: "off by one in the positions: skip 1 … t−1 (range(1, t)) and measure p ≥ t"}},
    number="2.2")


def _updates(lm, ids, skip=None, what="update"):
    """Every layer's update ``Δ_j`` ``[L, T, d]`` of one prompt (or its output ``h_{j+1}``, ``what="output"``);
    ``skip = (s, positions)`` skips layer ``s`` there (its output replaced by its input)."""
    seen = []

    def hook(j):
        def fn(module, args, output):
            if skip is not None and skip[0] == j:
                output = output.clone()
                output[:, skip[1]] = args[0][:, skip[1]]
            seen.append((output if what == "output" else output - args[0])[0])
            return output
        return fn
    solutions._run_hooked(lm, ids, [lm.hf_layer(j).register_forward_hook(hook(j)) for j in range(lm.n_layers)])
    return torch.stack(seen)


def _matrix(lm, ids, t, skipped=lambda t: slice(1, t), measured=lambda t: slice(t, None), by="clean",
            what="update", reduce="max", below=float("nan")):
    """``D [L, L]`` as a known mistake computes it (the defaults compute it right)."""
    L = lm.n_layers
    clean = _updates(lm, ids, what=what)
    D = torch.full((L, L), below)
    for s in range(L):
        other = _updates(lm, ids, (s, skipped(t)), what)
        diff = (clean - other).norm(dim=-1)
        den = {"clean": clean.norm(dim=-1), "skipped": other.norm(dim=-1), None: torch.ones_like(diff)}[by]
        ratio = (diff / den)[:, measured(t)]
        D[s, s + 1:] = getattr(ratio, "amax" if reduce == "max" else reduce)(dim=-1)[s + 1:]
    return D


def _matrix_mistakes(lm, case):
    ids, t = case["input_ids"], case["position"]
    return {"you skipped position 0 too: position 0 is the BOS attention sink; skip positions 1 … t−1 only":
            _matrix(lm, ids, t, skipped=lambda t: slice(0, t)),
            "this is ‖Δ_j − Δ′_j‖ alone: divide it by ‖Δ_j‖, the clean run's update": _matrix(lm, ids, t, by=None),
            "you divided by ‖Δ′_j‖, the skipped run's update: divide by the clean run's ‖Δ_j‖":
            _matrix(lm, ids, t, by="skipped"),
            "you compared the residuals h_{j+1}, not the layers' updates Δ_j = h_{j+1} − h_j":
            _matrix(lm, ids, t, what="output"),
            "you took the maximum over every position: measure only the positions p ≥ t, after the skipped ones":
            _matrix(lm, ids, t, measured=lambda t: slice(None)),
            "this is the mean over the positions p ≥ t: the effect is their maximum": _matrix(lm, ids, t, reduce="mean"),
            "you put 0 where j ≤ s: a layer cannot change an earlier one, so D[s, j] is undefined there: NaN":
            _matrix(lm, ids, t, below=0.0),
            "your matrix is transposed: row s is the skipped layer, column j the later layer (D[s, j], j > s)":
            _matrix(lm, ids, t).T}


STRETCH = Exercise(
    "skip_matrix", "02_future_effects", "Every layer's effect on every later layer, in one batched pass",
    "skip_matrix(lm, input_ids, position) -> torch.Tensor",
    "[L, L]: D[s, j] = max over p ≥ position of ‖Δ_j[p] − Δ′_j[p]‖ / ‖Δ_j[p]‖ for j > s, where Δ′ comes from "
    "the run that skips layer s on positions 1 … position−1, and `NaN` where j ≤ s (one prompt, "
    "input_ids [1, T])",
    difficulty=4, importance=4,
    hints=("One forward pass of a batch of L + 1 copies of the prompt does it: row 0 is the clean run, and row "
           "s + 1 skips layer s. A forward hook on each layer can skip its own row and record Δ_j = output − "
           "input for every row.",
           "Skipping layer s sets h_{s+1}[p] := h_s[p] on positions 1 … t−1 (position 0 is BOS, the sink). Layers "
           "j ≤ s are not changed by the skip: leave D[s, j] at `NaN` there.",
           "The ratio is taken per position, then the maximum over p ≥ t."),
    cases=lambda lm: [dict(zip(("input_ids", "_prompt"), _one(lm)), position=t) for t in (12, 8)],
    reference=lambda lm, case: _future_of(lm, case)[1],
    axes=("skipped layer", "later layer"),
    mistakes=_matrix_mistakes,
    shifts={"position": {-1: "off by one in the positions: skip 1 … t−1 and measure p ≥ t",
                         1: "off by one in the positions: skip 1 … t−1 (range(1, t)) and measure p ≥ t"}},
    number="2.3")

register(EXERCISE, STRETCH)

# a chapter's page imports this module as its ``exercises``: exercises.task(…), exercises.check(…), exercises.show(…)
from depthutils.teaching.exercises.core import check, show, solution, task  # noqa: E402, F401
