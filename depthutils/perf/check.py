"""``python -m depthutils plan --check``: the cost model against measured runs on this CPU.

Random-init Llamas of Llama 3.1 8B's exact width (hidden 4096, MLP 14336, 32 query and 8 KV heads,
vocabulary 128256), truncated to 2 and 4 layers, in float32 and bfloat16 (both on the stack path where
:func:`depthutils.models.stack.usable`), plus the embedded ``ladder-16`` and the book's real model SmolLM2-135M (from its cache). Every
registered measurement runs its example (:mod:`depthutils.measures.example`: short prompts, since what is
checked is the time per layer-pass and the peak memory, not a chapter's length) in a fresh process; the process's peak RSS (``VmHWM``, as ``/usr/bin/time`` reports
it), the **process CPU seconds** of the measurement (user + system, the clock the calibration uses), its
wall seconds and its layer-passes (counted as ``bench`` counts them) are set beside the plan's prediction
for the example's ``work``. The CPU seconds are the comparison: wall seconds grow with the machine's
load from other jobs; the predicted wall is the CPU seconds / threads, what an idle machine would take.
Run it with ``OMP_WAIT_POLICY=PASSIVE`` (idle OpenMP threads then sleep instead of spinning, which would
count as CPU seconds).

Last, a chapter as a user runs it (:func:`user_run`): ``python -m depthutils run 01 --model <the 2-layer
8B-width folder> -p n_examples 4`` in its own process, whose largest process's peak RSS (the chapter's kernel, as
GNU ``time -v`` reports it) is set beside the peak ``python -m depthutils plan`` gives for the same chapter and
parameters.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import torch

from depthutils.core.errors import DepthError
from depthutils.cost.model_info import model_info
from depthutils.measures import MEASUREMENTS
from depthutils.models.random_init import WIDTH_8B, random_model
from depthutils.perf.counting import Counter
from depthutils.perf.harness import isolated
from depthutils.perf.timing import calibration, calibration_key, cpu_clock, cpu_seconds, peak_rss_now, wall_estimate

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
    """Time ``measurement``'s example (:mod:`depthutils.measures.example`) on the model at ``path``: the fastest
    of its repeats, its layer-passes and the process's peak RSS, and the example's ``work``."""
    import depthutils as du

    torch.set_num_threads(threads)
    handle = du.load_model(path, device="cpu", dtype=dtype)
    out = {"load_rss": peak_rss_now()}
    example = MEASUREMENTS[measurement].example(handle)
    du.contributions(handle, [du.Prompt.from_parts("5 + 7 = ", "12")], progress_bar=False)  # page the weights in
    counter = Counter(handle)
    times = []
    while len(times) < REPEATS or (len(times) < MAX_REPEATS and sum(t for t, _ in times) < REPEAT_BUDGET):
        counter.reset()
        t0, c0 = time.perf_counter(), cpu_clock()
        example.run()
        times.append((cpu_clock() - c0, time.perf_counter() - t0))
    seconds, wall = min(times)  # as the calibration: the fastest run
    counter.close()
    return {**out, "seconds": seconds, "wall": wall, "layer_passes": counter.layer_passes, "peak_rss": peak_rss_now(),
            "work": example.work}


def _row(r: dict, shape, cal: dict, threads: int) -> dict:
    """``r`` (what :func:`_run` measured, with model, dtype, measurement and path) with the plan's predictions
    (the measurement's cost of its example's ``work``, on this CPU)."""
    c = MEASUREMENTS[r["measurement"]].predict(shape, r["work"], r["dtype"])
    sec = cpu_seconds(c, shape, r["dtype"], cal)
    r.update(rss_pred=cal["base_rss_bytes"] + shape.resident_bytes(r["dtype"]) + c.peak, seconds_pred=sec,
             wall_pred=wall_estimate(sec, threads), threads=threads, lp_pred=c.layer_passes)
    r["rss_err"] = r["rss_pred"] / r["rss_meas"] - 1
    r["time_err"] = sec / r["seconds_meas"] - 1
    return r


#: the chapter, its parameters and the model (layers, dtype) of :func:`user_run`'s row
USER_RUN = ("01", {"n_examples": 4}, 2, "bfloat16")


def _run_chapter(chapter: str, path: str, params: dict) -> dict:
    """In a fresh process: ``python -m depthutils run`` of ``chapter`` on ``path``; the peak RSS of its largest
    process (its only children are the run's, so ``RUSAGE_CHILDREN`` is theirs) and its wall seconds."""
    import resource
    import subprocess
    import sys

    args = [a for name, value in params.items() for a in ("-p", name, repr(value))]
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "depthutils", "run", chapter, "--model", path, *args,
                               "--out", out], capture_output=True, text=True)
        wall = time.perf_counter() - t0
    if done.returncode:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise DepthError(f"run {chapter} on {path} failed: {tail[0]}")
    return {"peak_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, "wall": wall}


def user_run(path: str, predicted: float, chapter: str = USER_RUN[0], params: dict | None = None) -> dict:
    """``predicted``, the peak ``plan`` gives for ``chapter`` on ``path`` with ``params`` (the caller's, from the
    book's workloads: :func:`depthutils.__main__.planned_peak`), beside the peak of that chapter's ``run``
    (:func:`_run_chapter`); prints one line."""
    params = dict(USER_RUN[1] if params is None else params)
    got = isolated(_run_chapter, chapter, path, params)
    row = {"chapter": chapter, "params": params, "path": path, "rss_pred": predicted, "rss_meas": got["peak_rss"],
           "wall_meas": got["wall"], "rss_err": predicted / got["peak_rss"] - 1}
    shown = " ".join(f"-p {k} {v}" for k, v in params.items())
    print(f"run {chapter} {shown} as a user runs it: peak RSS planned {predicted / 1e9:.2f}G, measured "
          f"{got['peak_rss'] / 1e9:.2f}G (ratio {predicted / got['peak_rss']:.2f}, "
          f"{'within' if abs(row['rss_err']) <= TOLERANCE else 'outside'} ±{TOLERANCE:.0%}); {got['wall']:.0f} s",
          flush=True)
    return row


def within(r: dict) -> bool:
    return abs(r["rss_err"]) <= TOLERANCE and abs(r["time_err"]) <= TOLERANCE


def check(models=None, json_path: str | None = None, quick: bool = False, threads: int | None = None,
          measurements=tuple(MEASUREMENTS), recalibrate: bool = True, planned=None) -> list:
    """Run every measurement on every model and print predicted against measured (peak RSS, process CPU
    seconds, wall seconds, layer-passes); returns the rows. ``recalibrate``: measure each calibration again
    first (a minute at 8B width), so that it and the runs share the machine's current load: memory-bound
    calls (one token, the decoding steps) slow down by a third when other jobs use the memory bus, which
    CPU seconds do not remove. ``planned(chapter, path, params)``: the peak ``plan`` gives for a chapter's run, for
    the last row, a chapter as a user runs it (:func:`user_run`; none without it)."""
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
                       lp_meas=got["layer_passes"], work=got["work"])
            rows.append(_row(row, shape, cal, threads))
            _print(row)
    _footer(rows, json_path)
    if planned is not None:
        chapter, params, layers, dtype = USER_RUN
        path = isolated(_build, layers, "float32" if quick else dtype)["path"]
        user = user_run(path, planned(chapter, path, params), chapter, params)
        if json_path:
            Path(json_path).with_suffix(".run.json").write_text(json.dumps(user, indent=1))
    return rows


def repredict(json_path: str, threads: int | None = None, out_path: str | None = None) -> list:
    """The rows of an earlier ``--check --json-path`` with the predictions recomputed by the current cost model
    and calibration (the measured columns are kept); prints the table."""
    rows = json.loads(Path(json_path).read_text())
    if any("work" not in r for r in rows):
        raise DepthError(f"{json_path} holds rows without the workload each example ran (saved by an older "
                         "`plan --check`, which recorded prompt lengths instead): run `python -m depthutils plan "
                         "--check --json-path ...` again to measure them.")
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
