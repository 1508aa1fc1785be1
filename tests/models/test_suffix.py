"""The positional shortcuts of the fast path (``depthutils.models.stack``): an intervention at position ``t``
changes nothing before ``t``, and a later position cannot change an earlier answer. They must give the
whole-sequence result (within the oracle tolerance) on every family, fall back where a family's attention
cannot reuse keys and values, and really do less work (layer-tokens counted with hooks, not timed)."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
from conftest import ATOL, FAMILIES

import depthutils
from depthutils.core.prompts import encode
from depthutils.models import stack
from depthutils.models.architectures import get_path
from depthutils.perf import bench


@pytest.mark.parametrize("family", FAMILIES)
def test_suffix_erasure_equals_the_whole_sequence(tiny, prompts, family):
    handle, _ = tiny(family)
    base = depthutils.residual_means(handle, prompts, progress_bar=False)
    fast = depthutils.residual_erasure(handle, prompts[0], baseline=base, method="stack", progress_bar=False)
    whole = depthutils.residual_erasure(handle, prompts[0], baseline=base, method="stack-whole", progress_bar=False)
    np.testing.assert_allclose(fast.effect, whole.effect, atol=ATOL)
    assert whole.meta["params"]["method"] == "stack"
    assert fast.effect.max() > 1e-3


@pytest.mark.parametrize("family", ["llama", "qwen2", "mistral", "gemma2", "mixtral", "granite", "olmo2"])
def test_the_suffix_path_is_taken_where_it_applies(tiny, prompts, family):
    """The pre-norm, sandwich-norm, MoE and multiplier families take the suffix path (so the tests above
    compare two different algorithms there, not one with itself)."""
    handle, _ = tiny(family)
    ids = encode(handle.tokenizer, prompts[0]).input_ids
    assert stack.Stack(handle, ids).suffix_ok()
    base = depthutils.residual_means(handle, prompts, progress_bar=False)
    got = depthutils.residual_erasure(handle, prompts[0], baseline=base, progress_bar=False)
    assert got.meta["params"]["method"] == "stack-suffix"


def test_a_family_that_cannot_reuse_keys_falls_back(tiny, prompts, monkeypatch):
    """If the check fails (here forced), erasure runs whole sequences and IG whole layers, same results."""
    handle, _ = tiny("llama")
    base = depthutils.residual_means(handle, prompts, progress_bar=False)
    fast = depthutils.residual_erasure(handle, prompts[0], baseline=base, progress_bar=False)
    ig_fast = depthutils.integrated_gradients(handle, prompts[1], steps=8, progress_bar=False)
    monkeypatch.setattr(stack.Stack, "suffix_ok", lambda self: False)
    slow = depthutils.residual_erasure(handle, prompts[0], baseline=base, progress_bar=False)
    ig_slow = depthutils.integrated_gradients(handle, prompts[1], steps=8, progress_bar=False)
    assert slow.meta["params"]["method"] == "stack"
    np.testing.assert_allclose(fast.effect, slow.effect, atol=ATOL)
    np.testing.assert_allclose(ig_fast.attribution, ig_slow.attribution, atol=ATOL)


def test_a_broken_key_reuse_is_caught_by_the_check(tiny, prompts, monkeypatch):
    """If the clean keys and values were not passed on (a family whose attention ignores the cache
    stand-in), the check sees the difference and the path is not used."""
    handle, _ = tiny("llama")
    ids = encode(handle.tokenizer, prompts[0]).input_ids
    monkeypatch.setattr(stack.Prefix, "update", lambda self, k, v, *a, **kw: (k, v))
    assert not stack.Stack(handle, ids).suffix_ok()


@pytest.mark.parametrize("family", ["llama", "gemma2", "mixtral", "falcon", "granite"])
def test_ig_up_to_the_last_answer_position_equals_the_whole_run(tiny, prompts, family):
    """run_to (positions up to the last answer-predicting one, last layer pruned) against the nnsight
    path, which runs every position of every layer; later positions get exactly 0."""
    handle, _ = tiny(family)
    p = prompts[1]
    fast = depthutils.integrated_gradients(handle, p, steps=8, method="stack", progress_bar=False)
    slow = depthutils.integrated_gradients(handle, p, steps=8, method="batched", progress_bar=False)
    np.testing.assert_allclose(fast.attribution, slow.attribution, atol=ATOL)
    np.testing.assert_allclose(fast.f_b, slow.f_b, atol=ATOL)
    last = max(encode(handle.tokenizer, p, need_answer=True).predict_positions)
    assert np.all(fast.attribution[:, last + 1:] == 0)


class _LayerTokens:
    """Layer-tokens (rows x positions) through the decoder layers, counted by forward pre-hooks."""

    def __init__(self, handle):
        self.n = 0
        layers = get_path(handle.nn._module, handle.arch.layers)
        self.hooks = [layer.register_forward_pre_hook(self.count, with_kwargs=True) for layer in layers]

    def count(self, mod, args, kwargs):
        x = args[0] if args else kwargs["hidden_states"]
        self.n += x.shape[0] * x.shape[1]

    def close(self):
        for h in self.hooks:
            h.remove()


def test_erasure_work_is_at_the_floor(tiny, prompts):
    """The suffix path's layer-tokens stay within the floor (spec §4: layers l…L-1 over positions
    t…T-1 for each erasure, plus the clean run) plus the keys-and-values and check passes and the
    positions SUFFIX_BLOCK shares; the whole-sequence path does about twice the floor."""
    handle, _ = tiny("llama")
    L, p = handle.n_layers, prompts[2]
    T = max(encode(handle.tokenizer, p, need_answer=True).predict_positions) + 1
    base = depthutils.residual_means(handle, prompts, progress_bar=False)
    floor = L * T + sum((L - l) * (T - t) for l in range(L + 1) for t in range(1, T))
    work = {}
    for method in ("stack", "stack-whole"):
        counter = _LayerTokens(handle)
        try:
            depthutils.residual_erasure(handle, p, baseline=base, method=method, progress_bar=False)
        finally:
            counter.close()
        work[method] = counter.n
    block = importlib.import_module("depthutils.measures.residual_erasure").SUFFIX_BLOCK
    shared = L * (L + 1) // 2 * block * (block - 1) // 2 * -(-(T - 1) // block)  # row (l, t0+i) redoes i positions
    extra = 2 * L * T + shared  # + the clean keys and values of every layer, + the check at t = T // 2
    assert floor <= work["stack"] <= floor + extra, (work, floor)
    assert work["stack-whole"] > 1.5 * floor


def test_bench_floors_and_rule_table():
    fl = bench.floors(L=4, T_fe=[10], positions=[[2, 6]], T_er=5, steps=8)
    # skipping layer s runs layers s+1 … L-1; the row with t = 2 shares positions 0, 1 with the row with t = 6
    assert fl["future_effects"] == pytest.approx(4 + (3 + 2 + 1 + 0) * (10 + 8) / 10)
    assert fl["residual_erasure"] == pytest.approx(4 + sum((4 - l) * (5 - t) / 5 for l in range(5) for t in range(1, 5)))
    rows = {"riemann-256": dict(rule="riemann", K=256, median_s=8.0, error=1e-3),
            "gauss-8": dict(rule="gauss", K=8, median_s=0.5, error=1e-2),
            "gauss-16": dict(rule="gauss", K=16, median_s=1.0, error=5e-4),
            "gauss-32": dict(rule="gauss", K=32, median_s=2.0, error=1e-5)}
    table = bench.ig_rule_table(rows)
    assert table["smallest_gauss_at_riemann_error"] == "gauss-16"
    assert table["rules"]["gauss-16"]["speedup_vs_riemann_256"] == 8.0
    rows["gauss-16"]["error"] = rows["gauss-32"]["error"] = 1.0
    assert bench.ig_rule_table(rows)["smallest_gauss_at_riemann_error"] is None
    rows["riemann-256"]["evaluations_per_layer"] = 256.0
    rows["adaptive"] = dict(rule="adaptive", K=None, median_s=3.0, error=5e-4, evaluations_per_layer=64.0)
    assert all(bench.ig_rule_table(rows)["adaptive_goal"].values())
    for change in (dict(error=2e-3), dict(evaluations_per_layer=65.0), dict(median_s=4.5)):  # each goal can fail
        goal = bench.ig_rule_table({**rows, "adaptive": {**rows["adaptive"], **change}})["adaptive_goal"]
        assert sum(goal.values()) == 2, (change, goal)
    # beside a CPU-bound job, the adaptive rule is held against the loaded Riemann-256, not the idle one
    rows["riemann-256 loaded"] = dict(rule="riemann", K=256, median_s=30.0, error=1e-3)
    rows["adaptive loaded"] = dict(rule="adaptive", K=None, median_s=20.0, error=5e-4, evaluations_per_layer=64.0)
    table = bench.ig_rule_table(rows)
    assert table["rules"]["adaptive loaded"]["speedup_vs_riemann_256"] == 1.5
    assert table["adaptive_goal"]["twice_as_fast"] and not table["adaptive_goal"]["twice_as_fast_loaded"]
    rows["adaptive loaded"]["median_s"] = 10.0
    assert bench.ig_rule_table(rows)["adaptive_goal"]["twice_as_fast_loaded"]


#: CPU seconds the bench's neighbour must spend once it is running: starting Python and importing torch take about one
#: (a neighbour that stops computing stays near that), its loop takes two threads' worth of every second it gets
NEIGHBOUR_WORK = 3.0


def test_the_neighbour_loads_the_cpu_and_stops():
    """``perf.harness.neighbour``, the bench's CPU-bound job: it is running when the block starts, it keeps computing
    (its CPU time grows by :data:`NEIGHBOUR_WORK` while the block runs), and it is stopped when the block ends, after
    an error too. No speed is asserted: on a loaded machine the neighbour gets fewer CPU seconds per second, and only
    takes longer to spend them (the deadline guards against a hang, not a slow machine)."""
    import os
    import time

    from depthutils.perf.harness import neighbour

    def cpu_seconds(pid):  # user + system time of a running process, all its threads (Linux's /proc)
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    with neighbour() as job:
        c0, deadline = cpu_seconds(job.pid), time.monotonic() + 120
        while cpu_seconds(job.pid) - c0 < NEIGHBOUR_WORK:
            assert job.poll() is None, f"the neighbour stopped by itself (exit code {job.returncode})"
            assert time.monotonic() < deadline, f"the neighbour spent {cpu_seconds(job.pid) - c0:.2f} CPU s in 2 min"
            time.sleep(0.1)
        assert job.poll() is None
    assert job.poll() is not None  # stopped with the block
    with pytest.raises(RuntimeError, match="the block fails"), neighbour() as job:
        raise RuntimeError("the block fails")
    assert job.poll() is not None


def test_counter_counts_rows_times_positions(tiny, prompts):
    handle, _ = tiny("llama")
    counter = bench.Counter(handle)
    try:
        ids = encode(handle.tokenizer, prompts[0]).input_ids
        st = stack.Stack(handle, ids)
        T = ids.shape[1]
        with torch.no_grad():
            st.suffix(0, st.h(0)[:, 2:].expand(3, -1, -1), 2)
    finally:
        counter.close()
    assert counter.passes == 1 and counter.longest == T
    assert counter.tokens == handle.n_layers * T + T + 3 * (T - 2)  # clean run, layer 0's keys, the suffix


@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_rows_that_join_at_different_layers_get_what_each_gets_alone(tiny, prompts, family):
    """``Stack.run_joined``: each row equals :meth:`run_to` from its own start layer (one call per row)."""
    handle, _ = tiny(family)
    ids = encode(handle.tokenizer, prompts[0]).input_ids
    st = stack.Stack(handle, ids)
    L, T = st.L, ids.shape[1]
    first = T - 2 if st.suffix_ok() else 0
    g = torch.Generator().manual_seed(0)
    entries = [(s, st.outputs[s - 1] + 0.1 * torch.randn((k, T, st.outputs[0].shape[-1]), generator=g))
               for s, k in ((1, 2), (1, 1), (L - 1, 1), (L, 2))]
    joined = st.run_joined(entries, first)
    alone = torch.cat([st.run_to(x, s, first) for s, x in entries])
    assert joined.shape == alone.shape == (6, T - first, st.outputs[0].shape[-1])
    torch.testing.assert_close(joined, alone, atol=ATOL, rtol=0)
    with pytest.raises(ValueError, match="increasing"):
        st.run_joined(entries[::-1], first)


def test_ig_batches_that_span_layers_give_the_one_layer_batches_result(tiny, prompts):
    """IG's fast path cuts the rows of all layers into batches; a batch of 5 spans layers, a batch of 1
    never does: the attributions agree, on a fixed rule and on the adaptive one."""
    handle, _ = tiny("llama")
    for kw in (dict(steps=8), dict(rule="adaptive", budget=24)):
        spanning = depthutils.integrated_gradients(handle, prompts[1], batch_size=5, progress_bar=False, **kw)
        single = depthutils.integrated_gradients(handle, prompts[1], batch_size=1, progress_bar=False, **kw)
        assert spanning.meta["params"]["method"] == "stack"
        np.testing.assert_allclose(spanning.attribution, single.attribution, atol=ATOL)
        assert np.abs(spanning.attribution).max() > 1e-4


def test_the_fast_path_runs_in_bfloat16_only_on_batch_invariant_kernels(tiny_root, prompts, monkeypatch):
    """In bfloat16 the fast path compares intervened rows, run in batches, with a clean run made alone: it is
    taken only where :func:`stack.batch_invariant` found every layer's input the same alone and in a batch, and
    then gives the batched nnsight path's effects (clean row in the batch) within bfloat16's rounding."""
    from conftest import build_tiny

    handle = depthutils.load_model(str(build_tiny("llama", tiny_root)), device="cpu", dtype="bfloat16")
    invariant = stack.batch_invariant(handle)
    assert stack.usable(handle) == invariant and handle._batch_invariant == invariant  # measured once, kept
    if invariant:
        fast = depthutils.future_effects(handle, prompts[:2], method="stack", progress_bar=False)
        slow = depthutils.future_effects(handle, prompts[:2], method="batched", progress_bar=False)
        upper = np.triu(np.ones_like(fast.layer_effect, bool), 1)
        assert np.nanmax(np.abs(fast.layer_effect - slow.layer_effect)[upper]) < 3e-2  # ~8 bfloat16 rounding units
        assert np.nanmax(fast.layer_effect[upper]) > 0.1  # a real effect, compared
    handle._batch_invariant = False  # kernels whose rows depend on the batch: the batched path, clean row in batch
    assert not stack.usable(handle)
    with pytest.raises(depthutils.DepthError, match="method='stack' needs a local model in float32"):
        depthutils.future_effects(handle, prompts[:1], method="stack", progress_bar=False)
    assert stack.usable(depthutils.load_model(str(build_tiny("llama", tiny_root)), device="cpu", dtype="float32"))
