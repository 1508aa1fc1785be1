"""float32 against bfloat16 on the real models: each chapter's headline run in both dtypes, side by side, with
its CPU time, peak memory, graded statistic and verdict.

``python -m depthutils bench --only real`` prints this table (:func:`dtype_table`), with the book's headline runs
(:func:`depthutils.book.realruns.measure_run`) as the ``measure`` of :func:`dtype_rows`. Each (model, chapter,
dtype) runs in a fresh process (:func:`depthutils.perf.harness.isolated`), so that its peak resident memory is
its own, and the two dtypes of a chapter run one after the other, so that both see the same load on the machine.

A chapter's bfloat16 run *agrees* (:func:`agrees`) when its verdict is the same and every graded value lies
inside the float32 value's 95% bootstrap interval; the prompts a chapter chose (chapters 4 and 5 pick prompts
the model answers) are compared too, since a different choice makes the values incomparable.
"""
from __future__ import annotations

import re

from depthutils.models.real.catalog import REAL_MODELS
from depthutils.perf.harness import isolated

__all__ = ["DTYPES", "dtype_rows", "values", "agrees", "largest_difference", "dtype_table"]

DTYPES = ("float32", "bfloat16")
_NUMBER = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
#: ``0.66 [0.61, 0.77]``: a graded value with its interval, as :func:`~depthutils.book.grading.interval_text` writes it
_INTERVAL = re.compile(rf"({_NUMBER}) \[({_NUMBER}), ({_NUMBER})\]")


def values(text: str) -> list[tuple[float, float, float]]:
    """Every ``value [lo, hi]`` in a verdict's value text, in order."""
    return [tuple(float(x) for x in m) for m in _INTERVAL.findall(text or "")]


def agrees(f32: dict, b16: dict) -> tuple[bool, str]:
    """Whether the bfloat16 row agrees with the float32 one (same verdict, same prompts, every graded bfloat16
    value inside its float32 interval), and why not in a few words."""
    if f32["prompts"] != b16["prompts"]:
        return False, "other prompts chosen"
    if f32["outcome"] != b16["outcome"]:
        return False, f"verdict {f32['outcome']} -> {b16['outcome']}"
    a, b = values(f32["value"]), values(b16["value"])
    if len(a) != len(b):
        return False, "graded values differ in number"
    out = [i for i, ((_, lo, hi), (v, _, _)) in enumerate(zip(a, b)) if not lo <= v <= hi]
    return (not out), ("" if not out else f"value {out[0] + 1} outside the float32 interval")


def dtype_rows(measure, models=tuple(REAL_MODELS), chapters=("00", "01", "02", "03", "04", "05", "06"),
               threads: int | None = None, skip=None) -> list[dict]:
    """Every (model, chapter) in both dtypes, each in a fresh process, printed as they finish: ``measure(model,
    chapter, dtype, threads)`` (a module-level function, run in that process) returns its row. ``skip(model)``
    returns a sentence for a model that cannot run here (not cached, terms not accepted), or None."""
    rows = []
    for model in models:
        why = skip(model) if skip else None
        if why:
            print(f"[{model}] skipped: {why}", flush=True)
            continue
        for ch in chapters:
            pair = {dt: isolated(measure, model, ch, dt, threads) for dt in DTYPES}
            ok, why_not = agrees(pair["float32"], pair["bfloat16"])
            row = {"model": model, "chapter": ch, **{dt: pair[dt] for dt in DTYPES}, "agrees": ok, "why": why_not}
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def largest_difference(f32: dict, b16: dict) -> float | None:
    """The largest difference between the two rows' graded values (None where they cannot be paired)."""
    a, b = values(f32["value"]), values(b16["value"])
    return max(abs(x[0] - y[0]) for x, y in zip(a, b)) if a and len(a) == len(b) else None


def _line(row: dict) -> str:
    f, b = row["float32"], row["bfloat16"]
    ratio = f["cpu_seconds"] / b["cpu_seconds"] if b["cpu_seconds"] else float("nan")
    diff = largest_difference(f, b)
    return (f"| {row['model']} | {row['chapter']} | {f['seconds']:.0f} / {b['seconds']:.0f} | "
            f"{f['cpu_seconds']:.0f} / {b['cpu_seconds']:.0f} | {ratio:.2f}x | "
            f"{f['peak_rss_gb']:.2f} / {b['peak_rss_gb']:.2f} | {f['outcome']}: {f['value']} | "
            f"{b['outcome']}: {b['value']} | {'—' if diff is None else f'{diff:.3g}'} | "
            f"{'yes' if row['agrees'] else 'no: ' + row['why']} |")


def dtype_table(rows: list[dict]) -> str:
    """The rows as one Markdown table: wall and CPU seconds (load apart) in each dtype and the CPU ratio, peak
    memory, the verdict and graded value in each dtype, their largest difference, and whether bfloat16 agrees."""
    head = ("| model | chapter | wall s (f32 / bf16) | CPU s (f32 / bf16) | speed-up (CPU) | peak GB (f32 / bf16) | "
            "float32 verdict | bfloat16 verdict | largest difference | agrees |\n"
            "|---|---|---|---|---|---|---|---|---|---|")
    return "\n".join([head] + [_line(r) for r in rows])
