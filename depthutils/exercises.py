"""Exercises for learners: write a measurement in a few lines, then check it against the library.

Every chapter of the book has an implement-it exercise (ARENA-style: a difficulty and an importance
rating, hints, a checker and a solution). :data:`EXERCISES` maps an id to what to implement::

    from depthutils import exercises
    exercises.EXERCISES["relative_contribution"].signature   # what to write
    exercises.check("relative_contribution", my_function)     # passes, or says what differs
    exercises.solution("relative_contribution")               # the reference solution (a function)
    exercises.show("relative_contribution")                    # ... and its source, for a notebook

:func:`check` runs the student's function on the book's embedded model (a few seconds on a laptop
CPU), compares it with the library's own measurement and passes, or raises ``AssertionError`` with
what differs: which layer or position, by how much, and the likely mistake when the answer equals
what a known mistake gives (the layer's input instead of its output, batch row 0, the KL the wrong
way round, position 0, ...). The reference solutions are in :mod:`depthutils.solutions`.
"""
from __future__ import annotations

import functools
import html
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import nnsight
import numpy as np
import torch
from IPython.display import Markdown

from . import data, solutions
from .contributions import prompt_stats
from .cross_model_mapping import _with_bias, fit_maps, residuals
from .curves import ed_kl
from .depth_score import score
from .errors import DepthError
from .future_effects import future_effects
from .integrated_gradients import integrated_gradients
from .logit_lens import prompt_lens
from .models import check_residual, load_model
from .prompts import Encoded, Prompt, encode
from .residual_erasure import residual_erasure, residual_means

#: How close a learner's answer must be to the library's: both run in float32 along different code paths
#: (nnsight or hooks, other batch sizes), which differ by ~1e-6; every mistake below differs by far more.
RTOL, ATOL = 1e-3, 1e-5


@dataclass(frozen=True)
class Exercise:
    """One implement-it exercise: what to write, how hard and how important it is (ARENA's
    ratings, 1–5), hints, and how to check it.

    ``cases(lm)`` gives the argument sets the student's function is called with (it receives those its
    signature names; the others, such as ``_prompt``, are for the reference only); ``reference(lm, case)`` is the library's answer;
    ``mistakes(lm, case)`` what known mistakes return (message → answer); ``shifts`` names the
    arguments whose ±1 is a likely mistake (argument → what that mistake usually is).
    """

    id: str
    chapter: str
    title: str
    signature: str
    returns: str
    difficulty: int
    importance: int
    hints: tuple
    cases: Callable
    reference: Callable
    axes: tuple = ()
    mistakes: Callable = None
    shifts: dict = field(default_factory=dict)
    model: str = "default"

    def rating(self) -> str:
        """``Difficulty ●●○○○ (2/5) · Importance ●●●●○ (4/5)`` (ARENA's ratings, in characters every font has)."""
        bar = lambda n: "●" * n + "○" * (5 - n) + f" ({n}/5)"  # noqa: E731
        return f"**Difficulty** {bar(self.difficulty)} · **Importance** {bar(self.importance)}"


# --------------------------------------------------------------------------- the inputs the checks use
@functools.lru_cache(maxsize=None)
def _model(name: str):
    return load_model(name)


def _encoded(lm, prompt: Prompt, max_tokens: int | None = None) -> Encoded:
    enc = encode(lm.tokenizer, prompt, need_answer=prompt.answer_start < len(prompt.text), prepend_bos=lm.prepend_bos)
    if max_tokens is not None:
        enc.input_ids = enc.input_ids[:, :max_tokens]
    return enc


def batch(lm, n: int = 2, tokens: int = 24) -> torch.Tensor:
    """``[n, tokens]`` ids of ``n`` different public-domain passages (BOS first), cut to the same length."""
    ids = [_encoded(lm, p).input_ids[:, :tokens] for p in data.heldout_text(n, words=40)]
    T = min(i.shape[1] for i in ids)
    return torch.cat([i[:, :T] for i in ids])


def _one(lm, tokens: int = 24) -> tuple[torch.Tensor, Prompt]:
    """One passage's ids ``[1, tokens]`` and its prompt (the library re-encodes it and cuts it the same way)."""
    p = data.heldout_text(1, words=40)[0]
    return _encoded(lm, p, tokens).input_ids, p


def _answer(lm, prompt: Prompt) -> dict:
    """A prompt with an answer as the exercises take it: ``input_ids``, ``predict_positions``, ``answer_ids``."""
    enc = _encoded(lm, prompt)
    return {"input_ids": enc.input_ids, "predict_positions": enc.predict_positions, "answer_ids": enc.answer_ids}


def _rows(ids: torch.Tensor) -> list[Encoded]:
    return [Encoded(ids[b:b + 1], [], [], [], []) for b in range(ids.shape[0])]


# --------------------------------------------------------------------------------------- references
def _stats(lm, case) -> torch.Tensor:
    """The library's per-token contributions statistics ``[B, L, 6, T]``."""
    return torch.stack([prompt_stats(lm, e) for e in _rows(case["input_ids"])])


def _hidden(lm, ids: torch.Tensor) -> torch.Tensor:
    """``[L+1, B, T, d]``: ``h_0 … h_L`` through the library's accessors (``h_L``: the last layer's output)."""
    B, T = ids.shape
    with lm.no_grad(), lm.trace(ids):
        hs = nnsight.save([])  # made and saved inside the trace, filled in forward order
        for l in range(lm.n_layers):
            hs.append(check_residual(lm.layers_input(l), B, T, f"layer {l} input").save())
        hs.append(check_residual(lm.layers_output(lm.n_layers - 1), B, T, "last layer output").save())
    return torch.stack(list(hs))


def _relative_mistakes(lm, case):
    h = _hidden(lm, case["input_ids"])
    l = case["layer"]
    d = h[l + 1] - h[l]
    return {"this is ‖Δ_l‖ / ‖h_{l+1}‖: divide by the norm of the residual the layer *receives*, h_l, not of "
            "its output": d.norm(dim=-1) / h[l + 1].norm(dim=-1),
            "this is ‖h_{l+1}‖ / ‖h_l‖: the norm of the layer's output, not of its update Δ_l = h_{l+1} − h_l":
            h[l + 1].norm(dim=-1) / h[l].norm(dim=-1)}


def _lens_mistakes(lm, case):
    ids, l = case["input_ids"], case["layer"]
    with lm.no_grad(), lm.trace(ids):
        h = lm.layers_output(l)
        raw = lm.finish_logits(lm.unembed(h)).save()
        lens = lm.lens(h).save()
        final = lm.logits().save()
    log_q, log_p, log_raw = (x.float().log_softmax(-1) for x in (lens, final, raw))
    return {"this is KL(q_L ‖ q_l), the other direction: the spec's KL puts the lens first, "
            "Σ q_l (log q_l − log q_L)": (log_p.exp() * (log_p - log_q)).sum(-1),
            "this is the lens without the final norm: apply final_norm to h before the unembedding":
            (log_raw.exp() * (log_raw - log_p)).sum(-1)}


@functools.lru_cache(maxsize=None)
def _future(name: str, text: str, answer_start: int, position: int, tokens: int):
    lm = _model(name)
    r = future_effects(lm, [Prompt(text, answer_start)], positions=[position], max_tokens=tokens, progress_bar=False)
    return r.output_effect_by_prompt[0], r.layer_effect_by_prompt[0]


def _future_of(lm, case):
    p = case["_prompt"]
    return _future(lm.name, p.text, p.answer_start, case["position"], case["input_ids"].shape[1])


def _skip_mistakes(lm, case):
    ids, s, t = case["input_ids"], case["layer"], case["position"]

    def from_bos(h_in, h_out):
        h_new = h_out.clone()
        h_new[:, :t] = h_in[:, :t]
        return h_new

    clean = solutions._output_probs(lm, ids)
    skipped = solutions._output_probs(lm, ids, s, from_bos)
    return {"you skipped position 0 too: position 0 is the BOS attention sink; skip positions 1 … t−1 only":
            float((clean - skipped)[0, t:].norm(dim=-1).max())}


@functools.lru_cache(maxsize=None)
def _erasure(name: str):
    lm = _model(name)
    p = Prompt.from_parts("5 + 7 + 5 + 3 + 1 + 7 = ", "28")
    means = residual_means(lm, data.gsm8k(3), max_tokens=64, progress_bar=False)
    return p, means, residual_erasure(lm, p, baseline=means, progress_bar=False).effect


@functools.lru_cache(maxsize=None)
def _ig(name: str, steps: int):
    lm = _model(name)
    p = Prompt.from_parts("The spouse of the performer of Imagine is", " Yoko Ono")
    return p, integrated_gradients(lm, p, steps=steps, progress_bar=False).attribution


def _random_D(L: int, seed: int, zero_rows: tuple = ()) -> np.ndarray:
    D = np.random.default_rng(seed).uniform(0.0, 1.0, (L, L))
    D[np.tril_indices(L)] = np.nan
    for s in zero_rows:
        D[s] = np.where(np.isnan(D[s]), np.nan, 0.0)
    return D


def _depth_mistakes(lm, case):
    D = np.asarray(case["D"], float)
    L = D.shape[0]
    sums = np.array([np.nansum(D[s, s + 1:]) for s in range(L - 1)])
    r = sums / (L - 1 - np.arange(L - 1))
    s = np.arange(L - 1)
    return {"you did not average r_s over the later layers: divide each row's sum by L−1−s": (s * sums).sum() / sums.sum(),
            "this is the normalised score, divided by L−1: return the score in layers": (s * r).sum() / r.sum() / (L - 1),
            "off by one: the weight of row s is s (layer 0 weighs 0), not s+1": ((s + 1) * r).sum() / r.sum()}


@functools.lru_cache(maxsize=None)
def _mapping_data(name: str, source: int, target: int):
    """Residuals of the embedded model (BOS excluded): layer ``source``'s output → layer ``target``'s,
    fitted on 6 GSM8K problems and scored on 2 others, float64 ``[tokens, d]``."""
    lm = _model(name)
    hs = [residuals(lm, _encoded(lm, p, 96).input_ids)[:, 1:] for p in data.gsm8k(8)]
    X = [h[source].numpy() for h in hs]
    Y = [h[target].numpy() for h in hs]
    return np.vstack(X[:6]), np.vstack(Y[:6]), np.vstack(X[6:]), np.vstack(Y[6:])


def _map_reference(lm, case):
    X, Y = torch.as_tensor(case["X_fit"]), torch.as_tensor(case["Y_fit"])
    Xb = _with_bias(X)
    W = fit_maps((Xb.T @ Xb)[None], (Xb.T @ Y)[None], ridge=0.0)[0]
    pred = _with_bias(torch.as_tensor(case["X_test"])) @ W
    y = torch.as_tensor(case["Y_test"])
    return float(((pred - y).norm(dim=-1) / y.norm(dim=-1)).mean())


def _map_mistakes(lm, case):
    X, Y, Xt, Yt = (np.asarray(case[k], float) for k in ("X_fit", "Y_fit", "X_test", "Y_test"))
    W, *_ = np.linalg.lstsq(X, Y, rcond=None)
    no_bias = float(np.mean(np.linalg.norm(Xt @ W - Yt, axis=1) / np.linalg.norm(Yt, axis=1)))
    Wt, *_ = np.linalg.lstsq(np.hstack([Xt, np.ones((len(Xt), 1))]), Yt, rcond=None)
    pred = np.hstack([Xt, np.ones((len(Xt), 1))]) @ Wt
    on_test = float(np.mean(np.linalg.norm(pred - Yt, axis=1) / np.linalg.norm(Yt, axis=1)))
    return {"the map has no bias: append a column of ones to X (y ≈ W x + c)": no_bias,
            "you fitted the map on the held-out tokens: fit on X_fit, Y_fit and score on X_test, Y_test": on_test}


def _ed_mistakes(lm, case):
    kl = np.asarray(case["kl"], float)
    hits = np.flatnonzero(kl < 0.5 * kl.max())
    if not hits.size:
        return {"no layer qualifies here: return None (undefined), not 0": 0}
    return {"this is the last qualifying layer: ED_KL is the first l with KL_l < 0.5·max KL": int(hits[-1]),
            "off by one: return the layer index l itself, not l + 1 (the ratio uses ED + 1)": int(hits[0]) + 1,
            "this is P2's ratio (ED + 1) / L: return the layer index": (int(hits[0]) + 1) / len(kl)}


# ---------------------------------------------------------------------------------------- the table
_LAYER_INPUT = ("did you read the layer's input (h_l, the previous layer's output) instead of its output "
                "(h_{l+1})? Read `.output`, not `.input`")
_NEXT_LAYER = "you used the next layer: decoder layer `layer` is lm.layer(layer), counted from 0"

EXERCISES: dict[str, Exercise] = {e.id: e for e in [
    Exercise(
        "layer_output", "00_residual_stream", "Read the residual stream after one layer",
        "layer_output(lm, input_ids, layer) -> torch.Tensor",
        "h_{layer+1}, the output of decoder layer `layer`, for every prompt of the batch: [B, T, d]",
        difficulty=1, importance=5,
        hints=("Inside `with lm.nn.trace(input_ids):` the layer is `lm.layer(layer)`; its `.output` is the "
               "residual after it. Call `.save()` on what you want to keep after the trace.",
               "A decoder layer returns a tensor [B, T, d] on today's transformers, not a tuple: `output[0]` "
               "is batch row 0, and a batch of one hides the mistake."),
        cases=lambda lm: [dict(input_ids=batch(lm), layer=l) for l in (3, 0)],
        reference=lambda lm, case: _hidden(lm, case["input_ids"])[case["layer"] + 1],
        axes=("batch row", "position", "hidden unit"),
        shifts={"layer": {-1: _LAYER_INPUT, 1: _NEXT_LAYER}}),
    Exercise(
        "relative_contribution", "01_contributions", "The relative contribution of one layer",
        "relative_contribution(lm, input_ids, layer) -> torch.Tensor",
        "‖Δ_l‖ / ‖h_l‖ at every token, with Δ_l = h_{l+1} − h_l: [B, T]",
        difficulty=2, importance=4,
        hints=("You need the layer's input h_l and its output h_{l+1}: with hooks, a forward pre-hook "
               "(`args[0]`) and a forward hook (`output`) on `lm.hf_layer(layer)`; with nnsight, "
               "`lm.layer(layer).input` and `.output` (read the input first).",
               "Norms over the hidden axis: `.norm(dim=-1)`, one per token."),
        cases=lambda lm: [dict(input_ids=batch(lm), layer=l) for l in (2, 6)],
        reference=lambda lm, case: _stats(lm, case)[:, case["layer"], 4],
        axes=("batch row", "position"), mistakes=_relative_mistakes,
        shifts={"layer": {-1: "you measured the previous layer", 1: _NEXT_LAYER}}),
    Exercise(
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
                             1: "off by one in the positions: skip 1 … t−1 (range(1, t)) and measure p ≥ t"}}),
    Exercise(
        "later_effect", "08_shared_layers", "The effect of skipping one layer on a later layer",
        "later_effect(lm, input_ids, layer, later, position) -> float",
        "max over p ≥ position of ‖Δ_j[p] − Δ′_j[p]‖ / ‖Δ_j[p]‖ for j = later, when layer `layer` is skipped "
        "on positions 1 … position−1 (one prompt, on the shared-layer model)",
        difficulty=3, importance=3,
        hints=("Record Δ_j = h_{j+1} − h_j of layer `later` in a clean run and in a run where layer `layer` "
               "is skipped; one forward hook on each layer does both.",
               "On the shared-layer model two layers share their weights, but they are still two calls: hook "
               "the layer (a position in the stack), and check that your hook runs once per forward."),
        cases=lambda lm: [dict(zip(("input_ids", "_prompt"), _one(lm)), layer=s, later=j, position=t)
                          for s, j, t in ((1, 4, 12), (3, 6, 16))],
        reference=lambda lm, case: float(_future_of(lm, case)[1][case["layer"], case["later"]]),
        shifts={"later": {-1: "you measured the layer before `later`", 1: "you measured the layer after `later`"},
                "layer": {-1: "you skipped the previous layer", 1: "you skipped the next layer"},
                "position": {-1: "off by one in the positions: skip 1 … t−1 and measure p ≥ t",
                             1: "off by one in the positions: skip 1 … t−1 and measure p ≥ t"}},
        model="ladder-8-shared"),
    Exercise(
        "lens_kl", "03_logit_lens", "The logit lens at one layer",
        "lens_kl(lm, input_ids, layer) -> torch.Tensor",
        "KL(q_l ‖ q_L) at every token, [B, T], where q_l = softmax(unembed(final_norm(h_{l+1}))) is the "
        "lens on layer `layer`'s output and q_L the model's output distribution",
        difficulty=2, importance=5,
        hints=("In an nnsight trace, `lm.final_norm` and `lm.unembed` can be called on a tensor, "
               "and `lm.unembed.output` is the model's own logits.",
               "Work in log-probabilities (`log_softmax`): KL = Σ q_l (log q_l − log q_L). Note the direction."),
        cases=lambda lm: [dict(input_ids=batch(lm), layer=l) for l in (1, 5)],
        reference=lambda lm, case: torch.stack([prompt_lens(lm, (e, 5))[case["layer"], 0]
                                                for e in _rows(case["input_ids"])]),
        axes=("batch row", "position"), mistakes=_lens_mistakes,
        shifts={"layer": {-1: _LAYER_INPUT, 1: _NEXT_LAYER}}),
    Exercise(
        "erasure_effect", "04_residual_erasure", "Erase one position of the residual",
        "erasure_effect(lm, input_ids, layer, position, means, predict_positions) -> float",
        "replace h_layer[position] (the input of decoder layer `layer`; layer = L: the last layer's output) by "
        "means[layer], and return max over predict_positions of ‖p − p′‖₂",
        difficulty=3, importance=3,
        hints=("`means` is [L+1, d]: one mean residual per h_0 … h_L; take `means[layer]`.",
               "A forward pre-hook on `lm.hf_layer(layer)` can return new arguments: `(edited, *args[1:])`. "
               "For layer = L, edit the last layer's output instead.",
               "The answer's distribution is read at the positions that *predict* the answer tokens."),
        cases=lambda lm: [dict(_answer(lm, _erasure(lm.name)[0]), layer=l, position=t, means=_erasure(lm.name)[1])
                          for l, t in ((4, 5), (6, 16))],
        reference=lambda lm, case: float(_erasure(lm.name)[2][case["layer"], case["position"]]),
        shifts={"layer": {-1: "you erased h_{l−1}: the input of layer `layer` is h_l", 1: "you erased the layer's "
                          "output h_{l+1}; h_l is the input of decoder layer `layer` (a forward pre-hook)"},
                "position": {-1: "off by one: you erased the position before `position`",
                             1: "off by one: you erased the position after `position`"}}),
    Exercise(
        "ig_riemann", "05_integrated_gradients", "Integrated gradients on one layer, by a Riemann sum",
        "ig_riemann(lm, input_ids, layer, predict_positions, answer_ids, steps) -> torch.Tensor",
        "A[l, t] for every position t, [T]: the left Riemann sum over k = 0 … K−1 of ∂f/∂x(b + (k/K)(x − b)) · "
        "(x − b) / K, summed over the hidden axis, with x the output of layer `layer`, b its mean over positions "
        "and f = Σ p(answer token)",
        difficulty=4, importance=3,
        hints=("A forward hook that *returns* a tensor replaces the layer's output: return the interpolated "
               "point, made with `requires_grad_(True)`, and take `torch.autograd.grad(f, point)`.",
               "The baseline is the mean over positions (dim=1 of [1, T, d]), not over the hidden axis.",
               "Left Riemann sum: k = 0 … K−1, so the point at α = 1 (x itself) is not included."),
        cases=lambda lm: [dict(_answer(lm, _ig(lm.name, 8)[0]), layer=l, steps=8) for l in (2, 6)],
        reference=lambda lm, case: _ig(lm.name, case["steps"])[1][case["layer"]],
        axes=("position",),
        shifts={"layer": {-1: _LAYER_INPUT, 1: _NEXT_LAYER}}),
    Exercise(
        "depth_score", "06_depth_score", "The depth score of a future-effect matrix",
        "depth_score(D) -> float",
        "Σ_s s·r_s / Σ_s r_s with r_s = Σ_{j>s} D[s, j] / (L−1−s), for D [L, L] (NaN where j ≤ s)",
        difficulty=1, importance=3,
        hints=("Row s of D holds the effects of skipping layer s on the later layers j > s; `np.nansum` "
               "ignores the NaNs below the diagonal.",
               "The last layer has no later layer: s runs over 0 … L−2."),
        cases=lambda lm: [dict(D=_random_D(8, 0)), dict(D=_random_D(6, 1, zero_rows=(0, 1)))],
        reference=lambda lm, case: score(case["D"]), mistakes=_depth_mistakes, model=None),
    Exercise(
        "map_error", "07_cross_model_mapping", "A linear map between two layers, scored on held-out text",
        "map_error(X_fit, Y_fit, X_test, Y_test) -> float",
        "fit y ≈ W x + c by least squares on the fitting tokens ([N, d] each) and return the token mean of "
        "‖ŷ − y‖ / ‖y‖ on the held-out tokens",
        difficulty=2, importance=3,
        hints=("`np.linalg.lstsq` solves least squares; a column of ones appended to X gives the bias.",
               "The error is relative per token (norm over the hidden axis), then averaged over tokens."),
        cases=lambda lm: [dict(zip(("X_fit", "Y_fit", "X_test", "Y_test"), _mapping_data(lm.name, s, j)))
                          for s, j in ((1, 5), (3, 2))],
        reference=_map_reference, mistakes=_map_mistakes),
    Exercise(
        "effective_depth_kl", "09_depth_across_scale", "P2's effective depth from a KL curve",
        "effective_depth_kl(kl) -> int | None",
        "the first layer l with KL_l < 0.5 · max KL, or None when no layer qualifies",
        difficulty=1, importance=3,
        hints=("Compare each layer with half of the curve's maximum and stop at the first one below it.",
               "An undefined effective depth is None, never 0: 0 would claim the first layer already decides."),
        cases=lambda lm: [dict(kl=np.array(k, float)) for k in ([5.1, 4.2, 3.0, 2.2, 1.1, 0.0],
                                                                 [0.4, 3.0, 2.9, 1.2, 0.6, 0.0],
                                                                 [1.0, 1.0, 1.0, 1.0])],
        reference=lambda lm, case: ed_kl(case["kl"]), mistakes=_ed_mistakes, model=None),
]}


# ------------------------------------------------------------------------------------------ checking
def _as_array(x: Any):
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=float)


def _close(got, want) -> bool:
    if want is None or got is None:
        return want is None and got is None
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True))


def _where(ex: Exercise, idx: tuple) -> str:
    names = ex.axes[-len(idx):] if len(ex.axes) >= len(idx) else [f"axis {i}" for i in range(len(idx))]
    return ", ".join(f"{n} {i}" for n, i in zip(names, idx))


def _diagnose(ex: Exercise, lm, case: dict, got, want) -> str:
    """Why ``got`` is not ``want``: a known mistake it equals, else where and by how much it differs."""
    if want is not None and got is not None and got.shape != want.shape:
        if want.ndim >= 2 and got.shape == want.shape[1:]:
            return (f"your answer has shape {got.shape}, the expected one {want.shape}: you dropped the batch "
                    "axis. Decoder layers return a tensor [B, T, d], not a tuple, so output[0] is batch row 0.")
        return f"your answer has shape {got.shape}, expected {want.shape} ({ex.returns})."
    for arg, by_step in ex.shifts.items():
        for step, why in by_step.items():
            shifted = dict(case, **{arg: case[arg] + step})
            try:
                other = _as_array(ex.reference(lm, shifted))
            except (IndexError, KeyError, DepthError, ValueError):
                continue
            if other is not None and np.isfinite(other).all() and _close(got, other):
                return f"your answer equals the library's for {arg}={case[arg] + step}: {why}."
    for why, answer in (ex.mistakes(lm, case) if ex.mistakes else {}).items():
        if _close(got, _as_array(answer)):
            return f"{why}."
    if got is None:
        return f"your function returned None; it should return {ex.returns}."
    if want is None:
        return "no layer qualifies here, so the answer is None (undefined), not a number."
    if not np.isfinite(got).all():
        return "your answer contains NaN or inf."
    if not got.any() and want.any():
        return "your answer is all zeros: the function does not compute anything yet."
    diff = np.abs(got - want)
    if got.ndim == 0:
        return f"got {float(got):.6g}, expected {float(want):.6g} (off by {float(diff):.3g})."
    idx = np.unravel_index(int(np.argmax(diff)), diff.shape)
    n_bad = int((~np.isclose(got, want, rtol=RTOL, atol=ATOL)).sum())
    note = ""
    if "position" in ex.axes and n_bad and np.isclose(np.delete(got, 0, axis=-1), np.delete(want, 0, axis=-1),
                                                      rtol=RTOL, atol=ATOL).all():
        note = " Only position 0 differs: position 0 is the BOS attention sink."
    return (f"{n_bad} of {diff.size} values differ; the largest difference is at {_where(ex, idx)}: got "
            f"{got[idx]:.6g}, expected {want[idx]:.6g}.{note}")


def check(id: str, fn: Callable, lm=None) -> None:
    """Run ``fn`` on exercise ``id``'s cases and compare it with the library.

    Prints a tick when every case matches (within :data:`RTOL`/:data:`ATOL`); raises ``AssertionError``
    saying what differs otherwise. A function that still raises ``NotImplementedError`` is reported as
    not attempted (printed, not raised), so a notebook's exercise cell runs before it is solved. Returns
    nothing, so a notebook cell shows only the printed line.
    ``lm``: the model to check on (default: the exercise's embedded model, loaded once).
    """
    if id not in EXERCISES:
        raise DepthError(f"No exercise {id!r}; the exercises are: {', '.join(EXERCISES)}.")
    ex = EXERCISES[id]
    lm = lm if lm is not None else (_model(ex.model) if ex.model else None)
    cases = ex.cases(lm)
    params = inspect.signature(solution(id)).parameters  # what the student's function takes
    for k, case in enumerate(cases):
        public = {a: lm if a == "lm" else case[a] for a in params}
        try:
            got = fn(**public)
        except NotImplementedError:
            print(f"{id}: not implemented yet; write the body of your function, then run this cell again.")
            return
        want = _as_array(ex.reference(lm, case))
        got = _as_array(got)
        if not _close(got, want):
            shown = ", ".join(f"{a}={v}" for a, v in public.items() if isinstance(v, (int, float)) and a != "lm")
            raise AssertionError(f"{id}, case {k + 1} of {len(cases)} ({shown or 'see EXERCISES'}): "
                                 f"{_diagnose(ex, lm, case, got, want)}")
    print(f"✔ {id}: all {len(cases)} cases match the library (rtol {RTOL:g}, atol {ATOL:g}).")


def solution(id: str) -> Callable:
    """The reference solution of exercise ``id`` (a function of :mod:`depthutils.solutions`)."""
    if id not in EXERCISES:
        raise DepthError(f"No exercise {id!r}; the exercises are: {', '.join(EXERCISES)}.")
    return getattr(solutions, id)


def source(id: str) -> str:
    """The source code of :func:`solution` (``id``), with the helpers of :mod:`depthutils.solutions` it calls."""
    fn = solution(id)
    names = [n for n in dir(solutions) if n.startswith("_") and callable(getattr(solutions, n))
             and n in inspect.getsource(fn)]
    return "\n\n".join([inspect.getsource(getattr(solutions, n)) for n in names] + [inspect.getsource(fn)])


def show(id: str) -> Markdown:
    """The reference solution's source as a highlighted code block (for a notebook's solution cell)."""
    return Markdown(f"```python\n{source(id)}```")


def task(id: str) -> Markdown:
    """The exercise as Markdown: its rating, what to write and what it returns, and its hints (folded)."""
    ex = EXERCISES[id]
    code = lambda h: re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(h, quote=False))  # noqa: E731
    hints = "".join(f"<li>{code(h)}</li>" for h in ex.hints)
    return Markdown(f"{ex.rating()}\n\nWrite `{ex.signature}`: {ex.returns}. Then run the cell: "
                    f"`exercises.check` calls your function on the book's embedded model and compares it with the "
                    f"library.\n\n<details><summary>Hints</summary><ol>{hints}</ol></details>")
