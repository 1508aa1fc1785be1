"""The cost model's python and float64 terms (depthutils.perf.overheads): what each measurement's plan counts
against the calls its module makes, and how ``cpu_seconds`` prices each count."""
from __future__ import annotations

import pytest
import torch

import depthutils as du
from depthutils.cost import passes
from depthutils.cost.accounting import Shape
from depthutils.measures import contributions, cross_model_mapping, effective_depth, logit_lens, residual_erasure
from depthutils.perf import overheads as po
from depthutils.perf.timing import cpu_seconds

LLAMA = dict(model_type="llama", hidden_size=64, intermediate_size=128, num_attention_heads=4,
             num_key_value_heads=2, num_hidden_layers=3, vocab_size=300, tie_word_embeddings=False)


def _calibration(**terms) -> dict:
    """A calibration in which every term costs nothing but ``terms``."""
    cal = {"layer_params": 1, "vocab": 1, "width": {"hidden_size": 1}, "layer_seconds": {1: 0.0},
           "grad_seconds": {1: 0.0}, "unembed_seconds": {1: 0.0}, "trace_layer_seconds": 0.0,
           "step_layer_seconds": 0.0, "stats_layer_seconds": 0.0, "result_seconds": 0.0, "forward_seconds": 0.0,
           "window_seconds": 0.0, "lens_row_seconds": 0.0,
           "product_flops_per_second": {8: 1e30, 512: 1e30}, "linalg_flops_per_second": 1e30,
           "solve_flops_per_second": 1e30, "fresh_seconds_per_byte": 0.0, "stream_bytes_per_second": 1e30}
    cal.update(terms)
    return cal


def test_forward_terms_count_one_result_per_call():
    """Contributions on three prompts: three traces (each a forward), the statistics of every layer of each,
    and one result; the logit lens computes no statistics."""
    s = Shape.from_config(LLAMA)
    c = contributions.cost(s, [10, 12, 14], "float32", False)
    assert (c.traces, c.forwards, c.stat_layers, c.results) == (3, 3, 3 * s.layers, 1)
    cal = _calibration(stats_layer_seconds=1.0, result_seconds=10.0, forward_seconds=100.0,
                       trace_layer_seconds=1000.0)
    assert cpu_seconds(c, s, "float32", cal) == pytest.approx(3 * 3 + 10 + 3 * 100 + 3 * 3 * 1000)
    assert logit_lens.cost(s, [10], "float32", False).stat_layers == 0


def test_lens_statistics_per_position_and_layer():
    """On NDIF effective depth reads every layer's lens inside its trace: the statistics of ``T`` positions per
    layer, priced per position at the calibrated vocabulary and scaled to the model's. Locally it decodes them
    after the trace with ``chunked_lens``, as the logit lens does: no per-layer statistics in the trace."""
    s = Shape.from_config(LLAMA)
    c = effective_depth.cost(s, [10, 12], "float32", True)
    assert c.lens_rows == s.layers * 22 and c.stat_layers == 2 * s.layers
    cal = _calibration(lens_row_seconds=1.0, vocab=3 * s.vocab)
    assert cpu_seconds(c, s, "float32", cal) == pytest.approx(s.layers * 22 / 3)
    local = effective_depth.cost(s, [10, 12], "float32", False)
    assert local.lens_rows == 0 and local.stat_layers == 2 * s.layers  # chunked_lens
    assert logit_lens.cost(s, [10], "float32", False).lens_rows == 0


def test_decoding_counts_a_forward_per_token():
    """A greedy decoding of n tokens: the prompt's forward and n-1 more, as ``generate`` runs them."""
    s = Shape.from_config(LLAMA)
    c = passes.generate(s, [7, 9], [4, 4], "float32", False, batch=2)
    assert (c.forwards, c.gen_steps, c.traces) == (4, 4, 1)


def test_mapping_float64_work_closed_form():
    """A model mapped onto itself on four texts (two fit, two held out): the products by their rows, the fresh
    ``XᵀY`` of every fitting text, the fit's buffers, and the held-out predictions, in closed form."""
    s = Shape.from_config(LLAMA)
    L, H1, K, Ts = s.layers, s.hidden + 1, s.layers * s.hidden, [11, 13, 17, 19]
    c = cross_model_mapping.cost(s, s, Ts, "float32", False, same=True)
    O, P = L * H1 * K * 8, [L * (T - 1) * K * 8 for T in Ts[2:]]
    assert c.product_rows == {H1: sum(2 * L * (T - 1) * H1 * (H1 + K) for T in Ts[:2]),
                              **{T - 1: 2 * L * (T - 1) * H1 * K for T in Ts[2:]}}
    assert sum(c.product_rows.values()) == pytest.approx(c.linalg_flops)
    assert c.fresh_bytes == 2 * O + 2 * L * H1 * H1 * 8 + 2 * O + 2 * sum(P)
    assert c.stream_bytes == 3 * O + 2 * O + 2 * sum(P)
    cal = _calibration(fresh_seconds_per_byte=1e-9, stream_bytes_per_second=1e10)
    assert cpu_seconds(c, s, "float32", cal) == pytest.approx(c.fresh_bytes * 1e-9 + c.stream_bytes / 1e10)


def test_products_priced_at_the_rate_of_their_rows():
    """A product of few rows is priced at the calibrated rate of its rows (held beyond the timed ones)."""
    rates = {8: 1e9, 32: 4e9, 512: 8e9}
    assert po.rate_at(rates, 20) == pytest.approx(2.5e9)
    assert po.rate_at(rates, 4) == 1e9 and po.rate_at(rates, 4096) == 8e9
    s = Shape.from_config(LLAMA)
    c = cross_model_mapping.cost(s, s, [11, 13], "float32", False, same=True)
    cal = _calibration(product_flops_per_second=rates, linalg_flops_per_second=8e9)
    want = sum(f / po.rate_at(rates, m) for m, f in c.product_rows.items())
    assert cpu_seconds(c, s, "float32", cal) == pytest.approx(want)


def test_stats_calibration_times_the_contributions_statistics(monkeypatch):
    """``stats_layer_seconds`` is what ``read_stats`` adds to a trace: the calibration runs that very function,
    once per timed trace (a changed statistics function is what the calibration then times)."""
    calls = []
    real = po.read_stats

    def spy(model, T):
        calls.append(T)
        return real(model, T)

    monkeypatch.setattr(po, "read_stats", spy)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    out = po.python(1)
    assert len(calls) == 16 and set(calls) == {4}
    assert all(out[k] >= 0 for k in ("trace_layer_seconds", "stats_layer_seconds", "step_layer_seconds",
                                      "result_seconds", "forward_seconds", "window_seconds"))
    assert out["result_seconds"] > 0 and out["window_seconds"] > 0  # python work is never free


def test_suffix_calls_counted_as_the_erasure_makes_them(monkeypatch):
    """The erasure's suffix path cuts a layer's arguments once per layer and block of positions: the plan's
    ``windows`` equals the calls of ``Stack._window_kwargs`` the measurement makes (its clean keys and values
    and the suffix check aside)."""
    from depthutils.core.prompts import encode
    from depthutils.cost.model_info import model_info
    from depthutils.models.stack import Stack

    model = du.load_model("default")
    p = du.Prompt.from_parts("12 + 7 = ", "19")
    enc = encode(model.tokenizer, p, need_answer=True)
    T = max(enc.predict_positions) + 1
    calls = []
    real = Stack._window_kwargs

    def spy(self, j, lo, hi, prefix=None):
        calls.append(lo)
        return real(self, j, lo, hi, prefix)

    monkeypatch.setattr(Stack, "_window_kwargs", spy)
    du.residual_erasure(model, p, baseline=[[0.0] * model.config.hidden_size] * (model.n_layers + 1),
                        progress_bar=False)
    plan = residual_erasure.cost(model_info("default").shape, T, len(enc.predict_positions), "float32", True, False)
    check = 2  # Stack.suffix_ok: the first layer and the last, at T // 2
    assert plan.windows == len(calls) - check > 0
