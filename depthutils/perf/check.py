"""``python -m depthutils plan --check``: the cost model against measured runs on this CPU.

Random-init Llamas of Llama 3.1 8B's exact width (hidden 4096, MLP 14336, 32 query and 8 KV heads,
vocabulary 128256), truncated to 2 and 4 layers, in float32 and bfloat16 (both on the stack path where
:func:`depthutils.models.stack.usable`), plus the embedded ``ladder-16`` and the book's real model SmolLM2-135M (from its cache). Every
measurement runs in a fresh process, on short prompts (what is checked is the time per layer-pass and the
peak memory, not a chapter's length); the process's peak RSS (``VmHWM``, as ``/usr/bin/time`` reports
it), the **process CPU seconds** of the measurement (user + system, the clock the calibration uses), its
wall seconds and its layer-passes (counted as ``bench`` counts them) are set beside the plan's prediction
for the same prompt lengths. The CPU seconds are the comparison: wall seconds grow with the machine's
load from other jobs; the predicted wall is the CPU seconds / threads, what an idle machine would take.
Run it with ``OMP_WAIT_POLICY=PASSIVE`` (idle OpenMP threads then sleep instead of spinning, which would
count as CPU seconds).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import torch

from depthutils.cost.accounting import Shape
from depthutils.cost.model_info import model_info
from depthutils.measures import cost_of
from depthutils.measures.depth_score import new_tokens
from depthutils.models.random import WIDTH_8B, random_model
from depthutils.perf.counting import Counter
from depthutils.perf.harness import isolated
from depthutils.perf.timing import calibration, calibration_key, cpu_clock, cpu_seconds, peak_rss_now, wall_estimate

#: the short runs: future effects on one GSM8K prompt cut to this many tokens, P1's arithmetic prompt
#: for erasure and IG (IG at this many steps, in P1's batches of 16), one addition prompt per level
CHECK_TOKENS, CHECK_STEPS = 40, 32
MEASUREMENTS = ("contributions", "logit_lens", "future_effects", "residual_erasure", "integrated_gradients",
                "depth_score", "effective_depth", "cross_model_mapping")
#: texts of the mapping check (chapter 7's held-out windows), each cut to CHECK_TOKENS; the model is mapped
#: onto itself
CHECK_TEXTS = 6
TOLERANCE = 0.25
#: timed runs of each measurement (the fastest counts): at least REPEATS, more (up to MAX_REPEATS) while they
#: have taken under REPEAT_BUDGET CPU seconds in all, as the calibration times its short calls: a run of a
#: tenth of a second is the one other jobs' load disturbs most
REPEATS, MAX_REPEATS, REPEAT_BUDGET = 2, 8, 2.0


def model_8b_width(layers: int, dtype: str) -> Path:
    """A random-init Llama of 8B width with ``layers`` layers in ``dtype`` and the project's tokenizer
    (built once under the temporary folder; weights filled uniformly, which does not change any cost)."""
    return random_model("llama", Path(tempfile.gettempdir()) / f"depthutils-8b-width-{layers}l-{dtype}",
                        dtype=dtype, uniform=0.02, vocab_size=128256, num_hidden_layers=layers,
                        max_position_embeddings=8192, tie_word_embeddings=False, **WIDTH_8B)


def _build(spec, dtype) -> dict:
    """The model of the plan's check at width ``spec``, built in a fresh process: ``{"path": folder}``."""
    return {"path": str(model_8b_width(spec, dtype))}


def _run(path: str, measurement: str, dtype: str, threads: int) -> dict:
    import depthutils as du
    from depthutils import data
    from depthutils.core.prompts import P1_ARITHMETIC, encode

    torch.set_num_threads(threads)
    handle = du.load_model(path, device="cpu", dtype=dtype)
    rss = peak_rss_now
    out = {"load_rss": rss()}
    gsm = data.gsm8k(1)
    arith = du.Prompt.from_parts(*P1_ARITHMETIC, "check")
    add = data.project_task("addition", 1, operands=3)
    texts = data.heldout_text(CHECK_TEXTS)
    L = handle.n_layers
    run = {
        "contributions": lambda: du.contributions(handle, gsm, max_tokens=CHECK_TOKENS, progress_bar=False),
        "logit_lens": lambda: du.logit_lens(handle, gsm, max_tokens=CHECK_TOKENS, progress_bar=False),
        "future_effects": lambda: du.future_effects(handle, gsm, max_tokens=CHECK_TOKENS, progress_bar=False),
        "residual_erasure": lambda: du.residual_erasure(handle, arith, baseline=[[0.01] * handle.config.hidden_size]
                                                        * (L + 1), progress_bar=False),
        "integrated_gradients": lambda: du.integrated_gradients(handle, arith, steps=CHECK_STEPS, progress_bar=False),
        "depth_score": lambda: du.depth_score(handle, groups={"addition": {3: add}}, progress_bar=False),
        "effective_depth": lambda: du.effective_depth(handle, add, progress_bar=False),  # skips, never cuts, a prompt
        "cross_model_mapping": lambda: du.cross_model_mapping(handle, handle, texts, max_tokens=CHECK_TOKENS,
                                                              progress_bar=False),
    }[measurement]
    du.contributions(handle, [du.Prompt.from_parts("5 + 7 = ", "12")], progress_bar=False)  # page the weights in
    counter = Counter(handle)
    times = []
    while len(times) < REPEATS or (len(times) < MAX_REPEATS and sum(t for t, _ in times) < REPEAT_BUDGET):
        counter.reset()
        t0, c0 = time.perf_counter(), cpu_clock()
        run()
        times.append((cpu_clock() - c0, time.perf_counter() - t0))
    seconds, wall = min(times)  # as the calibration: the fastest run
    counter.close()
    enc_g = encode(handle.tokenizer, gsm[0])
    enc_a = encode(handle.tokenizer, arith, need_answer=True)
    enc_d = encode(handle.tokenizer, add[0], need_answer=True)
    return {**out, "seconds": seconds, "wall": wall, "layer_passes": counter.layer_passes, "peak_rss": rss(),
            "lengths": {"gsm": min(enc_g.n_tokens, CHECK_TOKENS), "arith": enc_a.n_tokens,
                        "arith_pred": len(enc_a.predict_positions),
                        "add": [enc_d.n_tokens, enc_d.answer_positions[0], len(enc_d.answer_positions)],
                        "texts": [min(encode(handle.tokenizer, t).n_tokens, CHECK_TOKENS) for t in texts]}}


def predict(shape: Shape, measurement: str, dtype: str, lengths: dict):
    """The plan's cost of what :func:`_run` ran (on this CPU: the stack path in float32 and in bfloat16)."""
    fast = dtype in ("float32", "bfloat16")
    if measurement in ("contributions", "logit_lens"):
        return cost_of(measurement)(shape, [lengths["gsm"]], dtype, False)
    if measurement == "future_effects":
        return cost_of("future_effects")(shape, [lengths["gsm"]], dtype, fast, False)
    if measurement == "residual_erasure":
        return cost_of("residual_erasure")(shape, lengths["arith"] - 1, lengths["arith_pred"], dtype, fast, False)
    if measurement == "integrated_gradients":
        return cost_of("integrated_gradients")(shape, lengths["arith"], lengths["arith_pred"], dtype, fast, False,
                                       steps=CHECK_STEPS)
    if measurement == "effective_depth":
        return cost_of(measurement)(shape, [lengths["add"][0]], dtype, False)
    if measurement == "cross_model_mapping":
        return cost_of("cross_model_mapping")(shape, shape, lengths["texts"], dtype, False, same=True)
    T, ctx, n_ans = lengths["add"]
    return cost_of("depth_score")(shape, [(T, 1, ctx, new_tokens(n_ans, False, 48))], dtype, fast, False)


def _row(r: dict, shape, cal: dict, threads: int) -> dict:
    """``r`` (what :func:`_run` measured, with model, dtype, measurement and path) with the plan's predictions."""
    c = predict(shape, r["measurement"], r["dtype"], r["lengths"])
    sec = cpu_seconds(c, shape, r["dtype"], cal)
    r.update(rss_pred=cal["base_rss_bytes"] + shape.resident_bytes(r["dtype"]) + c.peak, seconds_pred=sec,
             wall_pred=wall_estimate(sec, threads), threads=threads, lp_pred=c.layer_passes)
    r["rss_err"] = r["rss_pred"] / r["rss_meas"] - 1
    r["time_err"] = sec / r["seconds_meas"] - 1
    return r


def within(r: dict) -> bool:
    return abs(r["rss_err"]) <= TOLERANCE and abs(r["time_err"]) <= TOLERANCE


def check(models=None, json_path: str | None = None, quick: bool = False, threads: int | None = None,
          measurements=MEASUREMENTS, recalibrate: bool = True) -> list:
    """Run every measurement on every model and print predicted against measured (peak RSS, process CPU
    seconds, wall seconds, layer-passes); returns the rows. ``recalibrate``: measure each calibration again
    first (a minute at 8B width), so that it and the runs share the machine's current load: memory-bound
    calls (one token, the decoding steps) slow down by a third when other jobs use the memory bus, which
    CPU seconds do not remove."""
    threads = threads or torch.get_num_threads()
    if os.environ.get("OMP_WAIT_POLICY", "").upper() != "PASSIVE":
        print("note: OMP_WAIT_POLICY is not PASSIVE, so spinning OpenMP threads inflate the CPU seconds", flush=True)
    if models is None:
        models = [(2, "float32")] if quick else [(2, "float32"), (4, "float32"), (2, "bfloat16"), (4, "bfloat16"),
                                                 ("ladder-16", "float32"), ("smollm2-135m", "float32")]
    rows, fresh = [], set()
    _header(threads)
    for spec, dtype in models:
        path = isolated(_build, spec, dtype)["path"] if isinstance(spec, int) else spec
        name = f"8B-width {spec} layers" if isinstance(spec, int) else spec
        shape = model_info(path).shape
        key = calibration_key(shape, dtype, threads)  # measured again, under the same load as the runs it predicts
        cal = calibration(shape, dtype, threads, refresh=recalibrate and key not in fresh)
        fresh.add(key)
        for meas in measurements:
            got = isolated(_run, path, meas, dtype, threads)
            row = dict(model=name, dtype=dtype, measurement=meas, path=path, rss_meas=got["peak_rss"],
                       load_rss=got["load_rss"], seconds_meas=got["seconds"], wall_meas=got["wall"],
                       lp_meas=got["layer_passes"], lengths=got["lengths"])
            rows.append(_row(row, shape, cal, threads))
            _print(row)
    _footer(rows, json_path)
    return rows


def repredict(json_path: str, threads: int | None = None, out_path: str | None = None) -> list:
    """The rows of an earlier ``--check --json-path`` with the predictions recomputed by the current cost model
    and calibration (the measured columns are kept); prints the table."""
    rows = json.loads(Path(json_path).read_text())
    threads = threads or rows[0].get("threads") or torch.get_num_threads()
    _header(threads)
    for r in rows:
        shape = model_info(r["path"]).shape
        _print(_row(r, shape, calibration(shape, r["dtype"], threads), threads))
    _footer(rows, out_path)
    return rows


def _footer(rows: list, json_path: str | None):
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=1))
    n = sum(within(r) for r in rows)
    print(f"{n} of {len(rows)} rows within ±{TOLERANCE:.0%} in both peak RSS and CPU seconds. CPU s: process CPU "
          "seconds (user + system), measured and predicted alike; wall: measured under this machine's load, and "
          "predicted for an idle machine as CPU s / threads.", flush=True)


def _header(threads: int):
    print(f"{'model':<20}{'dtype':<9}{'measurement':<21}{'RSS pred':>9}{'RSS meas':>9}{'ratio':>6}"
          f"{'CPU s pred':>11}{'CPU s meas':>11}{'ratio':>6}{'within':>7}"
          f"{f'wall idle({threads}t)':>15}{'wall meas':>10}{'lp pred':>9}{'lp meas':>9}", flush=True)


def _print(r):
    gb = lambda x: f"{x / 1e9:.2f}G"  # noqa: E731
    print(f"{r['model'][:19]:<20}{r['dtype']:<9}{r['measurement']:<21}{gb(r['rss_pred']):>9}{gb(r['rss_meas']):>9}"
          f"{r['rss_pred'] / r['rss_meas']:>6.2f}{r['seconds_pred']:>11.3f}{r['seconds_meas']:>11.3f}"
          f"{r['seconds_pred'] / r['seconds_meas']:>6.2f}{'yes' if within(r) else 'no':>7}"
          f"{r['wall_pred']:>15.3f}{r['wall_meas']:>10.3f}{r['lp_pred']:>9.1f}{r['lp_meas']:>9.1f}", flush=True)
