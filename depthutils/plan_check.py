"""``python -m depthutils plan --check``: the cost model against measured runs on this CPU.

Random-init Llamas of Llama 3.1 8B's exact width (hidden 4096, MLP 14336, 32 query and 8 KV heads,
vocabulary 128256), truncated to 2 and 4 layers, in float32 (the stack path) and bfloat16 (the batched
path), plus the embedded ``ladder-16``. Every measurement runs once in a fresh process, on short prompts
(what is checked is the time per layer-pass and the peak memory, not a chapter's length); the process's
peak RSS (``ru_maxrss``, as ``/usr/bin/time`` reports it), its wall time and its layer-passes (counted
as ``bench`` counts them) are set beside the plan's prediction for the same prompt lengths.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import torch

from . import cost_measures as cm
from .bench import Counter, _isolated
from .cost import Shape
from .plan_time import calibration, cpu_seconds, peak_rss_now

WIDTH_8B = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                vocab_size=128256)
#: the short runs: future effects on one GSM8K prompt cut to this many tokens, P1's arithmetic prompt
#: for erasure and IG (IG at this many steps, in P1's batches of 16), one addition prompt per level
CHECK_TOKENS, CHECK_STEPS = 40, 32
MEASUREMENTS = ("contributions", "logit_lens", "future_effects", "residual_erasure", "integrated_gradients",
                "depth_score")
TOLERANCE = 0.25
#: timed runs of each measurement (the fastest counts), after one warm-up call
REPEATS = 2


def model_8b_width(layers: int, dtype: str) -> Path:
    """A random-init Llama of 8B width with ``layers`` layers in ``dtype`` and the project's tokenizer
    (built once under the temporary folder; weights filled uniformly, which does not change any cost)."""
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from .ladder.registry import TOKENIZER_DIR

    path = Path(tempfile.gettempdir()) / f"depthutils-8b-width-{layers}l-{dtype}"
    if not (path / "config.json").exists():
        tok = PreTrainedTokenizerFast.from_pretrained(TOKENIZER_DIR)
        cfg = LlamaConfig(**WIDTH_8B, num_hidden_layers=layers, max_position_embeddings=8192,
                          bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                          tie_word_embeddings=False)
        with torch.device("meta"):
            model = LlamaForCausalLM(cfg)
        model = model.to_empty(device="cpu").to(getattr(torch, dtype))
        torch.manual_seed(0)
        for p in model.parameters():
            p.data.uniform_(-0.02, 0.02)
        model.save_pretrained(path)
        tok.save_pretrained(path)
        del model
    return path


def _build_worker(args, queue):
    try:
        queue.put({"path": str(model_8b_width(*args))})
    except BaseException as e:
        queue.put({"error": f"{type(e).__name__}: {e}"})


def _worker(args, queue):
    try:
        queue.put(_run(*args))
    except BaseException as e:  # the parent reports it
        queue.put({"error": f"{type(e).__name__}: {e}"})


def _run(path: str, measurement: str, dtype: str, threads: int) -> dict:
    import depthutils as du
    from . import data
    from .bench import ARITH
    from .prompts import encode

    torch.set_num_threads(threads)
    handle = du.load_model(path, device="cpu", dtype=dtype)
    rss = peak_rss_now
    out = {"load_rss": rss()}
    gsm = data.gsm8k(1)
    arith = du.Prompt.from_parts(*ARITH, "check")
    add = data.project_task("addition", 1, operands=3)
    L = handle.n_layers
    run = {
        "contributions": lambda: du.contributions(handle, gsm, max_tokens=CHECK_TOKENS, progress_bar=False),
        "logit_lens": lambda: du.logit_lens(handle, gsm, max_tokens=CHECK_TOKENS, progress_bar=False),
        "future_effects": lambda: du.future_effects(handle, gsm, max_tokens=CHECK_TOKENS, progress_bar=False),
        "residual_erasure": lambda: du.residual_erasure(handle, arith, baseline=[[0.01] * handle.config.hidden_size]
                                                        * (L + 1), progress_bar=False),
        "integrated_gradients": lambda: du.integrated_gradients(handle, arith, steps=CHECK_STEPS, progress_bar=False),
        "depth_score": lambda: du.depth_score(handle, groups={"addition": {3: add}}, progress_bar=False),
    }[measurement]
    du.contributions(handle, [du.Prompt.from_parts("5 + 7 = ", "12")], progress_bar=False)  # page the weights in
    counter = Counter(handle)
    times = []
    for _ in range(REPEATS):
        counter.reset()
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    seconds = min(times)  # as the calibration: other processes on the machine only ever slow a run down
    counter.close()
    enc_g = encode(handle.tokenizer, gsm[0])
    enc_a = encode(handle.tokenizer, arith, need_answer=True)
    enc_d = encode(handle.tokenizer, add[0], need_answer=True)
    return {**out, "seconds": seconds, "layer_passes": counter.layer_passes, "peak_rss": rss(),
            "lengths": {"gsm": min(enc_g.n_tokens, CHECK_TOKENS), "arith": enc_a.n_tokens,
                        "arith_pred": len(enc_a.predict_positions),
                        "add": [enc_d.n_tokens, enc_d.answer_positions[0], len(enc_d.answer_positions)]}}


def predict(shape: Shape, measurement: str, dtype: str, lengths: dict):
    """The plan's cost of what :func:`_run` ran."""
    fast = dtype == "float32"
    if measurement in ("contributions", "logit_lens"):
        return cm.forward_only(shape, [lengths["gsm"]], dtype, False, measurement, lens=measurement == "logit_lens")
    if measurement == "future_effects":
        return cm.future_effects(shape, [lengths["gsm"]], dtype, fast, False)
    if measurement == "residual_erasure":
        return cm.residual_erasure(shape, lengths["arith"] - 1, lengths["arith_pred"], dtype, fast, False)
    if measurement == "integrated_gradients":
        return cm.integrated_gradients(shape, lengths["arith"], lengths["arith_pred"], dtype, fast, False,
                                       steps=CHECK_STEPS)
    T, ctx, n_ans = lengths["add"]
    return cm.depth_score(shape, [(T, 1, ctx, n_ans)], dtype, fast, False)


def check(models=None, json_path: str | None = None, quick: bool = False, threads: int | None = None) -> list:
    """Run every measurement on every model and print predicted against measured (peak RSS, seconds per
    layer-pass, layer-passes); returns the rows."""
    import os

    threads = threads or os.cpu_count() or 1
    if models is None:
        models = [(2, "float32")] if quick else [(2, "float32"), (4, "float32"), (2, "bfloat16"), (4, "bfloat16"),
                                                 ("ladder-16", "float32")]
    rows = []
    _header()
    for spec, dtype in models:
        from .plan_models import model_info
        path = _isolated(_build_worker, spec, dtype)["path"] if isinstance(spec, int) else spec
        name = f"8B-width {spec} layers" if isinstance(spec, int) else spec
        shape = model_info(path).shape
        cal = calibration(shape, dtype, threads)
        for meas in MEASUREMENTS:
            got = _isolated(_worker, path, meas, dtype, threads)
            c = predict(shape, meas, dtype, got["lengths"])
            rss = cal["base_rss_bytes"] + shape.resident_bytes(dtype) + c.peak
            sec = cpu_seconds(c, shape, dtype, cal)
            row = dict(model=name, dtype=dtype, measurement=meas, rss_pred=rss, rss_meas=got["peak_rss"],
                       load_rss=got["load_rss"], seconds_pred=sec, seconds_meas=got["seconds"],
                       lp_pred=c.layer_passes, lp_meas=got["layer_passes"], lengths=got["lengths"], path=path)
            row["rss_err"] = rss / got["peak_rss"] - 1
            if c.layer_passes:
                row["s_per_lp_pred"], row["s_per_lp_meas"] = sec / c.layer_passes, got["seconds"] / got["layer_passes"]
                row["time_err"] = sec / got["seconds"] - 1
            rows.append(row)
            _print(row)
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=1))
    within = [r for r in rows if abs(r["rss_err"]) <= TOLERANCE and abs(r.get("time_err", 0)) <= TOLERANCE]
    print(f"{len(within)} of {len(rows)} rows within ±{TOLERANCE:.0%} in both peak RSS and time", flush=True)
    return rows


def repredict(json_path: str, threads: int | None = None) -> list:
    """The rows of an earlier ``--check --json-path`` with the predictions recomputed by the current cost model
    and calibration (the measured columns are kept); prints the table."""
    import os

    from .plan_models import model_info

    threads = threads or os.cpu_count() or 1
    rows = json.loads(Path(json_path).read_text())
    _header()
    for r in rows:
        shape = model_info(r["path"]).shape
        cal = calibration(shape, r["dtype"], threads)
        c = predict(shape, r["measurement"], r["dtype"], r["lengths"])
        r.update(rss_pred=cal["base_rss_bytes"] + shape.resident_bytes(r["dtype"]) + c.peak,
                 seconds_pred=cpu_seconds(c, shape, r["dtype"], cal), lp_pred=c.layer_passes)
        r["rss_err"] = r["rss_pred"] / r["rss_meas"] - 1
        r["s_per_lp_pred"] = r["seconds_pred"] / c.layer_passes
        r["time_err"] = r["seconds_pred"] / r["seconds_meas"] - 1
        _print(r)
    return rows


def _header():
    print(f"{'model':<22}{'dtype':<9}{'measurement':<22}{'RSS pred':>10}{'RSS meas':>10}{'err':>7}"
          f"{'s/lp pred':>11}{'s/lp meas':>11}{'err':>7}{'lp pred':>9}{'lp meas':>9}", flush=True)


def _print(r):
    gb = lambda x: f"{x / 1e9:.2f}G"  # noqa: E731
    t = (f"{r['s_per_lp_pred']:>11.3f}{r['s_per_lp_meas']:>11.3f}{r['time_err']:>+7.0%}"
         if "time_err" in r else f"{'':>29}")
    print(f"{r['model'][:22]:<22}{r['dtype']:<9}{r['measurement']:<22}{gb(r['rss_pred']):>10}{gb(r['rss_meas']):>10}"
          f"{r['rss_err']:>+7.0%}{t}{r['lp_pred']:>9.1f}{r['lp_meas']:>9.1f}", flush=True)
