"""``python -m depthutils plan CHAPTER --model M``: what a chapter will cost before it runs.

A chapter's run is a list of measurement calls (:func:`chapter_costs`): the chapter's own calls, its
:data:`Workload` (:mod:`depthutils.perf.workloads`), which the tests check against the calls the chapter made. Each call's :class:`~depthutils.cost.accounting.Cost`
comes from the model's config alone, from the measurement's own ``cost`` (:data:`depthutils.measures.MEASUREMENTS`).
The plan adds the weights and the process's own memory, picks the largest batch that fits the memory budget where the measurement's path takes a batch
size (the batched path of future effects and erasure, the layers per pass of integrated gradients), and
turns FLOPs into seconds (:mod:`depthutils.perf.timing`: measured here for the CPU, a data sheet for a GPU).
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch

from depthutils import data
from depthutils.analysis.objectives import shipped_runs
from depthutils.core.answers import new_tokens
from depthutils.core.errors import DepthError
from depthutils.cost.accounting import Cost, total
from depthutils.cost.budget import parse_bytes
from depthutils.cost.model_info import ModelInfo, model_info
from depthutils.ladder.registry import is_embedded
from depthutils.measures import MEASUREMENTS
from depthutils.measures.depth_score import TASKS, levels_of
from depthutils.models.devices import auto_dtype, available_memory
from depthutils.perf.timing import DEVICES, base_rss, calibration, cpu_seconds, gpu_seconds, wall_estimate


@dataclass(frozen=True)
class Knobs:
    """What the plan decides for a chapter's calls: the dtype and path the run takes, whether it is remote, and
    the batch (or layers per pass) it is trying."""
    dtype: str
    fast: bool
    remote: bool
    batch: int | None = None
    layers_per_pass: int | None = None


#: a chapter's own calls (:data:`depthutils.perf.workloads.WORKLOADS`): ``(models, parameters, knobs) ->
#: [(model, measurement name, work)]``, ``work`` as the measurement's ``cost`` takes it
Workload = Callable[[list[ModelInfo], dict, Knobs], list[tuple[ModelInfo, str, dict]]]


def prompt_tokens(info: ModelInfo, name: str, n: int | None, **kw) -> list[tuple[int, int]]:
    """``(tokens, answer tokens)`` of the first ``n`` prompts of data set ``name``, counted for ``info``."""
    out = []
    for p in data.load(name, n, **kw):
        T = info.count(p.context + (p.answer or ""))
        out.append((T, max(1, T - info.count(p.context)) if p.answer else 0))
    return out


def capped(Ts, max_tokens, shape) -> list[int]:
    """``Ts`` cut at the chapter's ``max_tokens`` (or the model's context)."""
    limit = max_tokens or shape.context or 10 ** 9
    return [min(T, limit) for T in Ts]


def dataset_tokens(info: ModelInfo, p: dict, key: str = "n_examples", ds: str = "dataset") -> list[int]:
    """The token counts of the chapter's ``p[key]`` prompts of its data set ``p[ds]`` (GSM8K by default), cut at its
    ``max_tokens``."""
    return capped([T for T, _ in prompt_tokens(info, p.get(ds, "gsm8k"), p[key])], p.get("max_tokens"), info.shape)


def score_prompts(info, tasks, n, seed, max_new_tokens, n_by_family=None):
    """``(T, answer positions, context, decoded tokens)`` of every depth-score prompt; ``tasks``, ``n`` and
    ``n_by_family`` as :func:`depthutils.measures.depth_score.depth_score` takes them (``"auto"``, family names, or
    ``{family: levels}``)."""
    out = []
    for t, levels in levels_of(info.name, tasks).items():
        _, load, rule = TASKS[t]
        for lv in levels:
            for p in load(lv, dict(n_by_family or {}).get(t, n), seed):
                T = info.count(p.context + p.answer)
                ctx = info.count(p.context)
                n_ans = max(1, T - ctx)
                k = 1 if rule == "first" else len(range(0, n_ans, 4)[:4])
                out.append((T, k, ctx, new_tokens(n_ans, bool(p.meta.get("final")), max_new_tokens)))
    return out


def chapter_costs(chapter: str, models: list[ModelInfo], p: dict, knobs: Knobs,
                  workload: Workload | None) -> list[tuple[ModelInfo, Cost]]:
    """Every measurement call of ``chapter`` (a number "00"–"10") with parameters ``p``: the chapter's own calls
    (``workload``, :func:`depthutils.perf.workloads.workload`), then every other measurement registered for the chapter
    (:data:`depthutils.measures.MEASUREMENTS`) on the chapter's ``n_examples`` prompts of its ``dataset``, so a
    measurement a chapter gains is counted before its workload says more."""
    calls = workload(models, p, knobs) if workload else []
    out = [(info, MEASUREMENTS[name].predict(info.shape, work, knobs.dtype, knobs.remote)) for info, name, work in calls]
    named = {name for _, name, _ in calls}
    rest = [m for name, m in MEASUREMENTS.items()
            if m.chapter == chapter and name not in named and (m.runs_remotely or not knobs.remote)]
    for info in models:
        Ts = dataset_tokens(info, p) if rest else None  # counted once per model, not once per measurement
        out += [(info, m.predict(info.shape, {"Ts": Ts}, knobs.dtype, knobs.remote)) for m in rest]
    return out


@dataclass
class Plan:
    """A chapter's plan: the numbers ``--json`` prints."""
    chapter: str
    models: list
    device: str
    dtype: str
    remote: bool
    layer_passes: float
    flops_forward: float
    flops_backward: float
    weights_bytes: float
    peak_memory_bytes: float
    memory_budget_bytes: float
    fits: bool
    batch_size: int | None
    layers_per_pass: int | None
    seconds: float            # wall seconds (on a CPU: an idle machine's, the CPU seconds / threads)
    seconds_source: str
    cpu_seconds: float | None  # on a CPU: process CPU seconds (user + system), what the calibration measures
    requests: int
    download_bytes: float
    rows: list = field(default_factory=list)

    def json(self) -> str:
        return json.dumps(self.__dict__, indent=1, default=str)


def chapter_parameters(path, defaults: dict, model: str | None, models: list[str] | None,
                       params: dict) -> tuple[str, dict]:
    """The chapter's number and its parameters: its ``defaults`` (its parameters cell), then ``model`` /
    ``models``, then ``params`` (``path`` is the chapter's notebook, from :func:`depthutils.book.chapters.find_chapter`)."""
    p = dict(defaults)
    unknown = sorted(set(params) - set(p))
    if unknown:
        raise DepthError(f"Unknown parameter(s) {unknown} for chapter {path.stem}; valid: {', '.join(p)}.")
    p.update(params)
    num = path.name[:2]
    if models:
        p["models"] = models
    if model:
        if num == "07":  # the source is replaced; the deeper target stays
            p["models"] = [model, *p["models"][1:]] if len(p["models"]) > 1 else [model]
        elif "models" in p:
            p["models"] = [model]
        else:
            p["model"] = model
    return num, p


def make_plan(num: str, p: dict, workload: Workload | None, device: str = "cpu", memory: str | float | None = None,
              threads: int | None = None, timing: bool = True) -> Plan:
    """The plan of chapter ``num`` ("00"–"10") with parameters ``p`` (:func:`chapter_parameters`) and its own calls
    ``workload`` (:func:`depthutils.perf.workloads.workload`); without ``timing`` no calibration is run and ``seconds``
    is 0 (what :func:`preflight` needs is the memory)."""
    if device not in ("cpu", "cuda"):
        raise DepthError(f"--device must be 'cpu' or 'cuda', got {device!r}.")
    threads = threads or torch.get_num_threads()
    remote = bool(p.get("remote"))
    dtype = p.get("dtype", "auto")
    names = p["models"] if "models" in p else [p["model"]] if "model" in p else (p.get("live") or shipped_runs())
    if remote or dtype == "auto":  # what load_model's "auto" picks (every model of the chapter alike)
        embedded = all(is_embedded(n) for n in names)
        dtype = "bfloat16" if remote else str(auto_dtype(device, embedded)[0]).replace("torch.", "")
    # the fast stack path: float32, or bfloat16 on a CPU, whose kernels are batch-invariant where it computes
    # bfloat16 natively (depthutils.models.stack.batch_invariant checks each model when it runs)
    fast = not remote and (dtype == "float32" or (dtype == "bfloat16" and device == "cpu"))
    infos = [model_info(n) for n in names]
    budget = parse_bytes(memory) if isinstance(memory, str) else memory
    if budget is None:
        budget = DEVICES["h100"]["memory"] if device == "cuda" else available_memory()
    local_cpu = device == "cpu" and not remote
    cals = {i.name: calibration(i.shape, dtype, threads) for i in infos} if local_cpu and timing else {}
    base = max((c["base_rss_bytes"] for c in cals.values()), default=base_rss() if local_cpu else 0.0)
    together = num in ("07", "08")  # these chapters hold every model at once
    weights = [i.shape.resident_bytes(dtype, "cpu" if device == "cpu" and not remote else "gpu") for i in infos]
    held = sum(weights) if together else max(weights)
    # loading a checkpoint stored in another dtype: the stored weights and the converted ones at once
    loading = base + held + max(i.shape.load_bytes(dtype, "cpu" if device == "cpu" and not remote else "gpu")
                                for i in infos)

    def evaluate(batch, lpp):
        calls = chapter_costs(num, infos, p, Knobs(dtype, fast, remote, batch, lpp), workload)
        peak = max([loading] + [base + (held if together else weights[infos.index(info)]) + c.peak
                                for info, c in calls])
        return calls, peak

    L = max(i.shape.layers for i in infos)
    choices = [(None, None)] + [(b, None) for b in (256, 128, 64, 32, 16, 8, 4, 2)] if not fast else [(None, None)]
    if num == "05" and not fast:
        choices = [(None, g) for g in sorted({L, *[max(1, L // d) for d in (2, 4, 8, 16, 32, 64, 128)]}, reverse=True)]
    for batch, lpp in choices:
        calls, peak = evaluate(batch, lpp)
        if remote or peak <= budget:
            break
    fits = remote or peak <= budget
    rows = []
    for info, c in calls:
        if remote or device == "cuda":
            sec = gpu_seconds(c, info.shape, dtype)
        elif not timing:
            sec = 0.0
        else:
            sec = wall_estimate(cpu_seconds(c, info.shape, dtype, cals[info.name]), threads)
        rows.append(dict(model=info.name, measurement=c.what, layer_passes=c.layer_passes, flops_fwd=c.flops_fwd,
                         flops_bwd=c.flops_bwd, extra_bytes=c.peak, batch_size=c.batch_size, seconds=sec,
                         requests=c.requests, download_bytes=c.download, notes=c.notes))
    t = total([c for _, c in calls])
    on_cpu = not (remote or device == "cuda")
    source = ("estimate: " + DEVICES["h100"]["source"]) if not on_cpu else \
        (f"process CPU seconds from this machine's calibration (cache); wall ≈ CPU seconds / {threads} threads "
         "on an idle machine, longer under other jobs' load")
    batch = min((r["batch_size"] for r in rows if r["batch_size"]), default=None)
    return Plan(chapter=num, models=[f"{i.name} ({i.source})" for i in infos], device="ndif" if remote else device,
                dtype=dtype, remote=remote, layer_passes=t.layer_passes, flops_forward=t.flops_fwd,
                flops_backward=t.flops_bwd, weights_bytes=held, peak_memory_bytes=peak, memory_budget_bytes=budget,
                fits=fits, batch_size=batch, layers_per_pass=lpp, seconds=sum(r["seconds"] for r in rows), seconds_source=source,
                cpu_seconds=sum(r["seconds"] for r in rows) * threads if on_cpu and timing else None,
                requests=t.requests, download_bytes=t.download, rows=rows)


def preflight(num: str, p: dict, workload: Workload | None) -> Plan | None:
    """Before a chapter runs: stop with one sentence when even its smallest batch cannot fit the memory the
    device has free (the weights are never loaded); ``None`` when the plan cannot be made for this run."""
    remote = bool(p.get("remote"))
    device = p.get("device", "auto")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    memory = None
    if device.startswith("cuda") and not remote:
        if not torch.cuda.is_available():
            return None
        memory, device = torch.cuda.mem_get_info()[0], "cuda"
    try:
        plan = make_plan(num, p, workload, device=device, memory=memory, timing=False)
    except DepthError:
        raise
    except Exception as e:  # a parameter the plan does not model: the run itself will tell
        warnings.warn(f"No memory plan for this run ({type(e).__name__}: {e}); running without one.")
        return None
    if not plan.fits:
        raise DepthError(f"Chapter {num} on {', '.join(plan.models)} needs about {gigabytes(plan.peak_memory_bytes)} "
                         f"({plan.dtype}, batch {plan.batch_size or 1}) but {gigabytes(plan.memory_budget_bytes)} is free on "
                         f"{plan.device}; run it on NDIF (-p remote True) or in bfloat16 (-p dtype bfloat16).")
    return plan


def gigabytes(x: float, digits: int = 2) -> str:
    """Bytes as GB with ``digits`` decimals (the plan's table, its errors, and the bigger-models page)."""
    return f"{x / 1e9:.{digits}f} GB"


def duration(s: float) -> str:
    """Seconds as s, min or h."""
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"


def format_plan(plan: Plan) -> str:
    """The plan as one table: a row per measurement call, then the totals and the verdict."""
    head = (f"chapter {plan.chapter} · {', '.join(plan.models)} · {plan.device} · {plan.dtype}\n"
            f"{'measurement':<22}{'layer-passes':>13}{'TFLOP fwd':>11}{'TFLOP bwd':>11}{'+memory':>11}"
            f"{'batch':>7}{'wall':>10}" + (f"{'requests':>10}{'download':>11}" if plan.remote else ""))
    lines = [head]
    for r in plan.rows:
        lines.append(f"{r['measurement'][:22]:<22}{r['layer_passes']:>13,.0f}{r['flops_fwd'] / 1e12:>11.3f}"
                     f"{r['flops_bwd'] / 1e12:>11.3f}{gigabytes(r['extra_bytes']):>11}{str(r['batch_size'] or '-'):>7}"
                     f"{duration(r['seconds']):>10}" + (f"{r['requests']:>10}{r['download_bytes'] / 2**20:>9.1f}MB"
                                                   if plan.remote else ""))
    lines.append(f"{'total':<22}{plan.layer_passes:>13,.0f}{plan.flops_forward / 1e12:>11.3f}"
                 f"{plan.flops_backward / 1e12:>11.3f}{'':>11}{str(plan.batch_size or '-'):>7}{duration(plan.seconds):>10}"
                 + (f"{plan.requests:>10}{plan.download_bytes / 2**20:>9.1f}MB" if plan.remote else ""))
    where = "NDIF's GPUs" if plan.remote else plan.device
    lines.append(f"peak memory {gigabytes(plan.peak_memory_bytes)} (weights {gigabytes(plan.weights_bytes)}) on {where}; "
                 f"budget {gigabytes(plan.memory_budget_bytes)}")
    if plan.remote:
        verdict = "runs on NDIF (time excludes NDIF's queue and the download)"
    elif plan.fits:
        verdict = "fits: runs locally"
    else:
        verdict = "does not fit even at batch 1: run it on NDIF (-p remote True) or in bfloat16 (-p dtype bfloat16)"
    cpu = f" wall, {plan.cpu_seconds:,.1f} process CPU seconds" if plan.cpu_seconds else " wall"
    lines.append(f"time: {duration(plan.seconds)}{cpu} ({plan.seconds_source})\n{verdict}")
    return "\n".join(lines)
