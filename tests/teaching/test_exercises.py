"""The learners' checkers: every reference solution passes, and the classic wrong answers fail with a
message that says what is wrong (a do-nothing answer, a wrong-layer answer, an off-by-one answer).

The wrong answers are the reference solutions with one thing changed, so each test fails only if the
checker stops catching that mistake or stops naming it.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from depthutils.book.runner import chapters
from depthutils.core.errors import DepthError
from depthutils.teaching import exercises, solutions

IDS = list(exercises.EXERCISES)


def shifted(id: str, **steps):
    """The solution of ``id`` with some integer arguments moved by ``steps`` (``layer=1``: the next layer)."""
    fn = exercises.solution(id)

    def wrong(**kw):
        return fn(**{k: v + steps[k] if k in steps else v for k, v in kw.items()})
    return wrong


def zeros_like_solution(id: str):
    fn = exercises.solution(id)

    def nothing(**kw):
        out = fn(**kw)
        return torch.zeros_like(out) if isinstance(out, torch.Tensor) else 0.0 * np.asarray(out, float)
    return nothing


def fails(id: str, fn, *expected: str) -> str:
    with pytest.raises(AssertionError) as err:
        exercises.check(id, fn)
    msg = str(err.value)
    for phrase in expected:
        assert phrase in msg, msg
    return msg


@pytest.mark.parametrize("id", IDS)
def test_every_solution_passes(id, capsys):
    exercises.check(id, exercises.solution(id))
    assert "✔" in capsys.readouterr().out


@pytest.mark.parametrize("id", IDS)
def test_do_nothing_fails(id):
    fails(id, lambda **kw: None, "returned None")
    if id != "effective_depth_kl":  # zero is a layer index there; its do-nothing is None (above)
        fails(id, zeros_like_solution(id), "all zeros")


def test_not_implemented_is_reported_not_raised(capsys):
    def stub(lm, input_ids, layer):
        raise NotImplementedError
    exercises.check("layer_output", stub)
    assert "not implemented yet" in capsys.readouterr().out


# ----------------------------------------------------------------------- wrong layer and off by one
def overlap_of_outputs(lm, input_ids):
    """3.3 off by one: the top-5 overlap of the lens on each layer's output h_{l+1}, not its input h_l."""
    lens = []
    with torch.no_grad(), lm.nn.trace(input_ids):
        for l in range(lm.n_layers):
            lens.append(lm.unembed(lm.final_norm(lm.layer(l).output)).save())
        top_final = lm.unembed.output.topk(5, dim=-1).indices.save()
    return torch.stack([(z.topk(5, dim=-1).indices[..., :, None] == top_final[..., None, :]).any(-1).float().mean(-1)
                        for z in lens], dim=1)


WRONG_LAYER = {  # id -> (wrong answer, phrases its message must contain)
    "layer_output": (shifted("layer_output", layer=1), ["layer=4", "next layer"]),
    "relative_contribution": (shifted("relative_contribution", layer=1), ["layer=3", "next layer"]),
    "skip_effect": (shifted("skip_effect", layer=1), ["layer=3", "skipped the next layer"]),
    "later_effect": (shifted("later_effect", later=1), ["later=5", "after `later`"]),
    "lens_kl": (shifted("lens_kl", layer=1), ["layer=2", "layer's output"]),
    "erasure_effect": (shifted("erasure_effect", layer=1), ["layer=5", "output h_{l+1}"]),
    "ig_riemann": (shifted("ig_riemann", layer=1), ["layer=3", "next layer"]),
    "depth_score": (lambda D: solutions.depth_score(D) / (len(D) - 1), ["normalised score"]),
    "map_error": (lambda X_fit, Y_fit, X_test, Y_test: solutions.map_error(X_test, Y_test, X_test, Y_test),
                  ["held-out tokens"]),
    "effective_depth_kl": (lambda kl: (lambda hits: int(hits[-1]) if hits.size else None)(
        np.flatnonzero(np.asarray(kl)[:-1] < 0.5 * np.max(kl))), ["last qualifying layer"]),
    "ig_gauss": (shifted("ig_gauss", layer=1), ["layer=4", "next layer"]),
    "slope_interval": (lambda scores, levels, n_layers, n_boot, seed: solutions.slope_interval(
        scores, levels, 2, n_boot, seed), ["did not normalise"]),  # L − 1 = 1: the raw scores
    "diagonal_distance": (lambda error, n_perm, seed: solutions.diagonal_distance(np.asarray(error).T, n_perm, seed),
                          ["argmin over axis 0"]),
    "later_ratio": (lambda D: 1 / solutions.later_ratio(D), ["first half / second half"]),
    "answer_only_targets": (lambda input_ids, answer_mask: solutions.answer_only_targets(input_ids, ~answer_mask),
                            ["inverted the mask"]),
    "answer_only_loss": (lambda lm, input_ids, answer_mask: solutions.answer_only_loss(
        lm, input_ids, torch.ones_like(answer_mask)), ["mean over every position"]),
    "mean_cosine": (lambda lm, input_ids: solutions.mean_cosine(lm, input_ids[:1]), ["batch row 0"]),
    # the stretch exercises (their full mutation tables: tests/teaching/test_stretch_mutations_0to4.py)
    "residual_terms": (lambda lm, input_ids: (lambda t: torch.stack([t[0], *(t[1::2] + t[2::2])]))(
        solutions.residual_terms(lm, input_ids)), ["each layer's update Δ_l"]),
    "layer_cosines": (shifted("layer_cosines", layer=1), ["layer=2", "next layer"]),
    "skip_matrix": (lambda lm, input_ids, position: solutions.skip_matrix(lm, input_ids, position).T, ["transposed"]),
    "lens_overlap": (lambda lm, input_ids: solutions.lens_overlap(lm, input_ids) * 5, ["divided by 5"]),
    "erasure_matrix": (lambda lm, input_ids, means, predict_positions: solutions.erasure_matrix(
        lm, input_ids, means, predict_positions)[:-1], ["no row for h_L"]),
}


def _split_at_half(D):
    """8.3 with the middle layer of an odd L in the second half (``L // 2``)."""
    D = np.asarray(D, float)
    e = np.array([np.nanmean(D[s, s + 1:]) for s in range(len(D) - 1)] + [np.nan])
    return float(np.nanmean(e[len(D) // 2:]) / np.nanmean(e[:len(D) // 2]))


def _cosines_without_bos(lm, input_ids):
    """9.3 averaged over the positions 1 … T−1 only (BOS left out)."""
    cos = torch.nn.functional.cosine_similarity
    return torch.stack([((cos(a, h, dim=-1) + cos(m, h + a, dim=-1) + cos(o - h, h, dim=-1)) / 3)[:, 1:].mean()
                        for h, a, m, o in solutions._layer_parts(lm, input_ids)])


def _zero_based_depth(error, n_perm, seed):
    """7.3 with the relative depth of layer l taken as l / L (the last layer short of 1)."""
    error = np.asarray(error, float)
    Ls, Lt = error.shape
    best, src = error.argmin(axis=1), np.arange(Ls) / Ls
    perms = np.argsort(np.random.default_rng(seed).random((n_perm, Lt)), axis=1)
    return np.array([np.abs(best / Lt - src).mean(), np.percentile(np.abs(perms[:, best] / Lt - src).mean(1), 5)])

OFF_BY_ONE = {
    "layer_output": (shifted("layer_output", layer=-1), ["layer=2", "layer's input"]),
    "relative_contribution": (shifted("relative_contribution", layer=-1), ["layer=1", "previous layer"]),
    "skip_effect": (shifted("skip_effect", position=1), ["position=13", "off by one"]),
    "later_effect": (shifted("later_effect", position=-1), ["position=11", "off by one"]),
    "lens_kl": (shifted("lens_kl", layer=-1), ["layer=0", "previous layer"]),
    "erasure_effect": (shifted("erasure_effect", position=-1), ["position=4", "off by one"]),
    "ig_riemann": (shifted("ig_riemann", layer=-1), ["layer=1", "layer's input"]),
    "depth_score": (lambda D: (lambda r: float(((np.arange(len(r)) + 1) * r).sum() / r.sum()))(
        np.array([np.nansum(D[s, s + 1:]) / (len(D) - 1 - s) for s in range(len(D) - 1)])), ["off by one"]),
    "map_error": (lambda X_fit, Y_fit, X_test, Y_test: float(np.mean(
        np.linalg.norm(X_test @ np.linalg.lstsq(X_fit, Y_fit, rcond=None)[0] - Y_test, axis=1)
        / np.linalg.norm(Y_test, axis=1))), ["no bias"]),
    "effective_depth_kl": (lambda kl: (lambda l: None if l is None else l + 1)(solutions.effective_depth_kl(kl)),
                           ["off by one"]),
    "ig_gauss": (shifted("ig_gauss", layer=-1), ["layer=2", "layer's input"]),
    "slope_interval": (lambda scores, levels, n_layers, n_boot, seed: solutions.slope_interval(
        scores, levels, n_layers + 1, n_boot, seed), ["off by one", "not score / L"]),
    "diagonal_distance": (_zero_based_depth, ["is l / L"]),
    "later_ratio": (_split_at_half, ["middle layer of an odd L"]),
    "answer_only_targets": (lambda input_ids, answer_mask: solutions.answer_only_targets(
        input_ids, torch.cat([answer_mask[:, :1], answer_mask[:, :-1]], 1)), ["answer_mask[:, 1:]"]),
    "answer_only_loss": (lambda lm, input_ids, answer_mask: solutions.answer_only_loss(
        lm, input_ids, torch.cat([answer_mask[:, :1], answer_mask[:, :-1]], 1)), ["answer_only_loss"]),
    "mean_cosine": (lambda lm, input_ids: _cosines_without_bos(lm, input_ids), ["position 0"]),
    "residual_terms": (lambda lm, input_ids: solutions.residual_terms(lm, input_ids)[1:], ["no h_0"]),
    "layer_cosines": (shifted("layer_cosines", layer=-1), ["layer=0", "previous layer"]),
    "skip_matrix": (shifted("skip_matrix", position=1), ["position=13", "off by one"]),
    "lens_overlap": (lambda lm, input_ids: overlap_of_outputs(lm, input_ids), ["each layer's output"]),
    "erasure_matrix": (lambda lm, input_ids, means, predict_positions: solutions.erasure_matrix(
        lm, input_ids, means, [p + 1 for p in predict_positions]), ["at its own positions"]),
}


@pytest.mark.parametrize("id", IDS)
def test_wrong_layer_fails(id):
    fn, phrases = WRONG_LAYER[id]
    fails(id, fn, *phrases)


@pytest.mark.parametrize("id", IDS)
def test_off_by_one_fails(id):
    fn, phrases = OFF_BY_ONE[id]
    fails(id, fn, *phrases)


# ----------------------------------------------------------------------------- the named pitfalls
def test_batch_row_zero_is_named():
    """The pitfall of today's stack: output[0] of a decoder layer's tensor is batch row 0."""
    fails("layer_output", lambda lm, input_ids, layer: solutions.layer_output(lm, input_ids, layer)[0],
          "batch row 0", "dropped the batch axis")


def test_kl_direction_and_final_norm_are_named():
    def reversed_kl(lm, input_ids, layer):
        with torch.no_grad(), lm.nn.trace(input_ids):
            lens = lm.unembed(lm.final_norm(lm.layer(layer).input)).save()
            final = lm.unembed.output.save()
        log_q, log_p = lens.log_softmax(-1), final.log_softmax(-1)
        return (log_p.exp() * (log_p - log_q)).sum(-1)
    fails("lens_kl", reversed_kl, "other direction")


def test_position_zero_is_named():
    def from_bos(lm, input_ids, layer, position):
        clean = solutions._output_probs(lm, input_ids)
        skipped = solutions._output_probs(lm, input_ids, layer, lambda h_in, h_out: torch.cat(
            [h_in[:, :position], h_out[:, position:]], dim=1))
        return float((clean - skipped)[0, position:].norm(dim=-1).max())
    fails("skip_effect", from_bos, "position 0", "BOS")


def test_undefined_is_none_not_zero():
    fails("effective_depth_kl", lambda kl: 0 if solutions.effective_depth_kl(kl) is None
          else solutions.effective_depth_kl(kl), "None")


def test_relative_to_the_output_is_named():
    def by_output(lm, input_ids, layer):
        h_in, h_out = solutions._residual_around(lm, input_ids, layer)
        return (h_out - h_in).norm(dim=-1) / h_out.norm(dim=-1)
    fails("relative_contribution", by_output, "h_{l+1}")


# ------------------------------------------------------------------------------------- the table
def test_every_exercise_is_complete():
    stems = {p.stem for p in chapters().values()}
    for id, ex in exercises.EXERCISES.items():
        assert ex.chapter in stems, (id, ex.chapter)
        assert 1 <= ex.difficulty <= 5 and 1 <= ex.importance <= 5 and ex.hints
        assert ex.signature.startswith(id + "(")
        assert callable(exercises.solution(id)) and "def " + id in exercises.source(id)
    measurements = {"relative_contribution", "skip_effect", "lens_kl", "erasure_effect", "ig_riemann",
                    "depth_score", "map_error"}  # P1's measurements: §1–§7 of the spec
    assert measurements <= set(exercises.EXERCISES)


def test_a_statement_shows_no_raw_math():
    """A task's Markdown is rendered without dollar math (GFM): ``h_{layer+1}`` or ``Σ_{j>s}`` showed as typed until
    the statements' sub- and superscripts were set as HTML. Code (a name such as ``input_ids``) is left as it is."""
    for id in IDS:
        text = exercises.task(id).data
        prose = re.sub(r"`[^`]*`|<code>.*?</code>", "", text)
        assert "_{" not in prose and "^{" not in prose, (id, prose)
        assert not re.search(r"(?<![\w.])[^\W\d_][\u0304′]?_\w", prose), (id, prose)  # h_l, Δ′_j
    assert "h<sub>layer+1</sub>" in exercises.task("layer_output").data
    assert "Σ<sub>j>s</sub>" in exercises.task("depth_score").data
    assert "predict_positions" in exercises.task("erasure_effect").data  # a name, not a subscript


def test_unknown_exercise_is_one_sentence():
    with pytest.raises(DepthError, match="No exercise 'nope'; the exercises are: layer_output"):
        exercises.check("nope", print)


@pytest.mark.parametrize("id", IDS)
def test_the_shown_solution_defines_every_helper_it_calls(id):
    """``exercises.show`` prints the solution with its helpers, and theirs: a student who copies it has every
    private function it calls."""
    src = exercises.source(id)
    called = set(re.findall(r"\b(_[a-z]\w*)\(", src))
    defined = set(re.findall(r"^def (_\w+)\(", src, flags=re.M))
    assert called <= defined, f"{id}: the shown source calls {sorted(called - defined)} without showing them"
