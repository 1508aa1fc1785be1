"""Batch sizes from the cost model and a memory budget: the batched
paths of future effects and residual erasure pick the largest batch the plan fits, say so in one line,
give the same values at any batch, and stop with one sentence when even the smallest batch cannot fit."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import ATOL

import depthutils as du
from depthutils.core.errors import DepthError
from depthutils.core.prompts import encode
from depthutils.cost import passes
from depthutils.cost.budget import candidates, pick_batch, shape_of
from depthutils.measures import cost_of

PROMPT = du.Prompt.from_parts("5 + 7 + 5 + 3 + 1 + 7 + 2 + 4 + 6 + 1 + 9 + 3 + 8 + 1 = ", "62")


@pytest.fixture(autouse=True)
def say_lines(monkeypatch):
    """The batch line shows where progress bars do (a terminal): here, as a reader's terminal would."""
    monkeypatch.setenv("DEPTHUTILS_PROGRESS", "1")


def test_the_book_pages_do_not_print_it(tiny, capsys, monkeypatch):
    """In the book's kernels (DEPTHUTILS_PROGRESS=0) the line would land in the page and in nbval's outputs,
    with the machine's free memory in it: it is not printed there."""
    monkeypatch.setenv("DEPTHUTILS_PROGRESS", "0")
    assert pick_batch("x", lambda b: 10.0 * b, 33, 100.0) == 8
    assert capsys.readouterr().err == ""


def test_candidates_and_pick():
    assert candidates(33, 2) == [33, 16, 8, 4, 2]
    assert pick_batch("x", lambda b: 10.0 * b, 33, 100.0, say=False) == 8
    with pytest.raises(DepthError, match="needs about .* even at batch 2"):
        pick_batch("x", lambda b: 10.0 * b, 33, 5.0, say=False)


def _batch_line(err: str, what: str) -> int:
    lines = [ln for ln in err.splitlines() if ln.startswith(f"{what}: batch ")]
    assert len(lines) == 1, err
    return int(lines[0].split(": batch ")[1].split()[0])


def test_future_effects_batch_follows_the_budget(tiny, capsys):
    handle, _ = tiny("llama")
    kw = dict(method="batched", positions=[4, 8, 12], progress_bar=True)
    full = du.future_effects(handle, [PROMPT], **kw)
    b_full = _batch_line(capsys.readouterr().err, "future effects")
    T = encode(handle.tokenizer, PROMPT).n_tokens
    want = candidates(3 * handle.n_layers + 1, 2)[-2]
    budget = cost_of("future_effects")(shape_of(handle), [T], "float32", False, False, positions=[[4, 8, 12]], batch=want).peak
    small = du.future_effects(handle, [PROMPT], max_memory=budget, **kw)
    b_small = _batch_line(capsys.readouterr().err, "future effects")
    assert b_full == 3 * handle.n_layers + 1 and b_small == want
    np.testing.assert_allclose(small.layer_effect_by_prompt, full.layer_effect_by_prompt, atol=ATOL)
    np.testing.assert_allclose(small.output_effect_by_prompt, full.output_effect_by_prompt, atol=ATOL)
    with pytest.raises(DepthError, match="future effects needs about .* even at batch 2"):
        du.future_effects(handle, [PROMPT], max_memory=1e3, **kw)


def test_residual_erasure_batch_follows_the_budget(tiny, capsys):
    handle, _ = tiny("llama")
    base = torch.zeros(handle.n_layers + 1, handle.config.hidden_size).numpy()
    kw = dict(baseline=base, method="batched", progress_bar=True)
    full = du.residual_erasure(handle, PROMPT, **kw)
    b_full = _batch_line(capsys.readouterr().err, "residual erasure")
    enc = encode(handle.tokenizer, PROMPT, need_answer=True)
    T = max(enc.predict_positions) + 1
    want = candidates(T, 2)[-2]
    budget = cost_of("residual_erasure")(shape_of(handle), T, len(enc.predict_positions), "float32", False, False,
                                 batch=want, suffix=False).peak
    small = du.residual_erasure(handle, PROMPT, max_memory=budget, **kw)
    b_small = _batch_line(capsys.readouterr().err, "residual erasure")
    assert b_full == T and b_small == want
    np.testing.assert_allclose(small.effect, full.effect, atol=ATOL)
    with pytest.raises(DepthError, match="residual erasure needs about"):
        du.residual_erasure(handle, PROMPT, max_memory=1e3, **kw)


def test_an_explicit_batch_size_is_kept(tiny, capsys):
    handle, _ = tiny("llama")
    du.future_effects(handle, [PROMPT], method="batched", positions=[4], batch_size=3, progress_bar=False)
    assert "batch" not in capsys.readouterr().err


def test_depth_score_decoding_batch_follows_the_budget(tiny, capsys):
    """The greedy decodings' batch shrinks under a smaller budget; the accuracy and scores do not change."""
    handle, _ = tiny("llama")
    groups = {"addition": {3: du.data.project_task("addition", 4, operands=3)}}
    full = du.depth_score(handle, groups=groups, max_new_tokens=4, progress_bar=True)
    b_full = _batch_line(capsys.readouterr().err, "greedy decoding")
    T = max(len(handle.tokenizer(p.context)["input_ids"]) + 1 for p in groups["addition"][3])
    peak = lambda b: passes.generate(shape_of(handle), [T] * b, [4] * b, "float32", False, batch=b).peak  # noqa: E731
    small = du.depth_score(handle, groups=groups, max_new_tokens=4, max_memory=(peak(2) + peak(4)) / 2,
                           progress_bar=True)
    b_small = _batch_line(capsys.readouterr().err, "greedy decoding")
    assert b_full == 4 and b_small == 2
    assert [r["accuracy"] for r in small.rows] == [r["accuracy"] for r in full.rows]
    np.testing.assert_allclose(small.prompt_scores, full.prompt_scores, atol=ATOL)


def test_integrated_gradients_layers_per_pass_follows_the_budget(tiny, capsys):
    """The batched path shares a pass among as many layers as the budget holds; the attribution does not
    change with it."""
    handle, _ = tiny("llama")
    kw = dict(steps=8, method="batched", progress_bar=True)
    full = du.integrated_gradients(handle, PROMPT, **kw)
    g_full = _batch_line(capsys.readouterr().err, "integrated gradients (layers per pass)")
    T = encode(handle.tokenizer, PROMPT, need_answer=True)
    peak = lambda g: cost_of("integrated_gradients")(shape_of(handle), T.n_tokens, len(T.predict_positions), "float32",  # noqa: E731
                                             False, False, steps=8, batch=16, layers_per_pass=g).peak
    small = du.integrated_gradients(handle, PROMPT, max_memory=(peak(1) + peak(2)) / 2, **kw)
    g_small = _batch_line(capsys.readouterr().err, "integrated gradients (layers per pass)")
    assert g_full == handle.n_layers and g_small == 1
    np.testing.assert_allclose(small.attribution, full.attribution, atol=ATOL)


def test_integrated_gradients_stack_batch_follows_the_budget(tiny, capsys):
    """The stack path runs up to ``IG_ROWS`` interpolation points of all layers per pass, fewer under a smaller
    budget, and P1's 16 on the batched path; the attribution does not change with it."""
    from depthutils.cost.chunks import IG_ROWS
    from depthutils.measures.integrated_gradients import P1_BATCH

    handle, _ = tiny("llama")
    kw = dict(steps=8, method="stack", progress_bar=True)
    full = du.integrated_gradients(handle, PROMPT, **kw)
    b_full = _batch_line(capsys.readouterr().err, "integrated gradients (rows per pass)")
    assert b_full == full.meta["params"]["batch_size"] == min(IG_ROWS, 8 * handle.n_layers)
    T = encode(handle.tokenizer, PROMPT, need_answer=True)
    peak = lambda b: cost_of("integrated_gradients")(shape_of(handle), T.n_tokens, len(T.predict_positions),  # noqa: E731
                                                     "float32", True, False, steps=8, batch=b).peak
    assert peak(None) == peak(b_full) > peak(1)
    small = du.integrated_gradients(handle, PROMPT, max_memory=(peak(1) + peak(2)) / 2, **kw)
    assert _batch_line(capsys.readouterr().err, "integrated gradients (rows per pass)") == 1
    assert small.meta["params"]["batch_size"] == 1
    np.testing.assert_allclose(small.attribution, full.attribution, atol=ATOL)
    batched = du.integrated_gradients(handle, PROMPT, steps=8, method="batched", progress_bar=False)
    assert batched.meta["params"]["batch_size"] == P1_BATCH


def test_fact_check_batches_follow_the_budget(tiny, capsys):
    """The fact check's greedy decodings and teacher-forced forwards shrink under a smaller budget; what
    each candidate's check finds does not change."""
    from depthutils.analysis import known_facts as kf
    from depthutils.core.encoding import encode_all

    handle, _ = tiny("llama")
    contexts = [f"{a} + {b} = " for a, b in ((5, 7), (1, 2), (3, 4), (8, 9), (6, 6), (2, 7))]

    def run(max_memory):
        cands = [kf.Candidate("arithmetic", c, ["1"], "test") for c in contexts]
        kf.check(handle, cands, max_new=3, max_memory=max_memory, progress_bar=True)
        forced = [kf.Candidate("arithmetic", c.context, [c.continuation], "test", answer=c.continuation.strip() or "1")
                  for c in cands]
        kf._forced(handle, forced, None, max_memory, True)
        err = capsys.readouterr().err
        return [c.continuation for c in cands], [c.forced for c in forced], forced, \
            _batch_line(err, "greedy answers"), _batch_line(err, "teacher-forced check")

    full = run(None)
    tokens = lambda ps, **kw: max(e.n_tokens for e in encode_all(handle, ps, max_tokens=None, **kw)[1])  # noqa: E731
    T_gen = tokens([du.Prompt(c, len(c)) for c in contexts])
    T_fwd = tokens([du.Prompt.from_parts(c.context, c.answer) for c in full[2]], need_answer=True)
    gen = lambda b: passes.generate(shape_of(handle), [T_gen] * b, [3] * b, "float32", False, batch=b).peak  # noqa: E731
    fwd = lambda b: passes.forward_batch(shape_of(handle), b, T_fwd, "float32").peak  # noqa: E731
    limit = max(gen(3), fwd(1))  # room for 3 decodings and 1 forward, not for 6 of either
    assert limit < min(gen(6), fwd(6))
    small = run(limit)
    assert full[3:] == (6, 6) and small[3] < 6 and small[4] < 6
    assert small[:2] == full[:2]
    with pytest.raises(DepthError, match="greedy answers needs about"):
        run(gen(1) / 2)


def _chunk_line(err: str, what: str) -> float:
    lines = [ln for ln in err.splitlines() if ln.startswith(f"{what}: working chunks of ")]
    assert len(lines) == 1, err
    value, unit = lines[0].split("working chunks of ")[1].split()[:2]
    return float(value) * {"GB": 1e9, "MB": 1e6, "kB": 1e3}[unit.rstrip(",")]


def test_the_stack_paths_chunks_follow_the_budget(tiny, capsys):
    """The stack path of future effects and the logit lens cut their work into chunks of at most the tuned
    size, smaller where the budget leaves less above what they keep; the values do not change; a budget
    below what they keep stops them with one sentence."""
    from depthutils.cost import chunks

    handle, _ = tiny("llama")
    s, T = shape_of(handle), encode(handle.tokenizer, PROMPT).n_tokens
    kw = dict(method="stack", positions=[4, 8, 12], progress_bar=True)
    full = du.future_effects(handle, [PROMPT], **kw)
    assert _chunk_line(capsys.readouterr().err, "future effects (stack path)") == pytest.approx(
        chunks.GROUP_BYTES, rel=0.01)
    kept = passes.stack_bytes(s, T, "float32")
    small = du.future_effects(handle, [PROMPT], max_memory=kept + 20_000, **kw)  # one skipped layer per group
    assert _chunk_line(capsys.readouterr().err, "future effects (stack path)") == pytest.approx(20_000, rel=0.03)
    np.testing.assert_allclose(small.layer_effect, full.layer_effect, atol=ATOL)
    np.testing.assert_allclose(small.output_effect, full.output_effect, atol=ATOL)
    with pytest.raises(DepthError, match=r"future effects \(stack path\) keeps about .* but the budget is"):
        du.future_effects(handle, [PROMPT], max_memory=kept / 2, **kw)

    lens_full = du.logit_lens(handle, [PROMPT], progress_bar=True)
    capsys.readouterr()
    lens_small = du.logit_lens(handle, [PROMPT], max_memory=passes.lens_bytes(s, T, "float32") + 5_000, progress_bar=True)
    assert _chunk_line(capsys.readouterr().err, "logit lens") == pytest.approx(5_000, rel=0.1)
    np.testing.assert_allclose(lens_small.kl, lens_full.kl, atol=ATOL)
    np.testing.assert_allclose(lens_small.overlap, lens_full.overlap, atol=ATOL)


def test_residual_erasure_suffix_block_follows_the_budget(tiny, capsys):
    """The suffix path erases SUFFIX_BLOCK positions per pass, one where the budget holds only one; the map
    does not change."""
    from depthutils.measures.residual_erasure import SUFFIX_BLOCK

    handle, _ = tiny("llama")
    base = np.zeros((handle.n_layers + 1, handle.config.hidden_size))
    kw = dict(baseline=base, method="stack", progress_bar=True)
    full = du.residual_erasure(handle, PROMPT, **kw)
    assert _batch_line(capsys.readouterr().err, "residual erasure (positions per pass)") == SUFFIX_BLOCK == 2
    enc = encode(handle.tokenizer, PROMPT, need_answer=True)
    T = max(enc.predict_positions) + 1
    peak = lambda b: cost_of("residual_erasure")(shape_of(handle), T, len(enc.predict_positions), "float32", True,  # noqa: E731
                                         False, suffix=True, block=b).peak
    small = du.residual_erasure(handle, PROMPT, max_memory=(peak(1) + peak(2)) / 2, **kw)
    assert _batch_line(capsys.readouterr().err, "residual erasure (positions per pass)") == 1
    np.testing.assert_allclose(small.effect, full.effect, atol=ATOL)
