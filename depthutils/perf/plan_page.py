"""The tables of the book's page "Running on a bigger model" (``bigger_models.ipynb``).

Each row is :func:`depthutils.perf.plan.make_plan` for one chapter at its default parameters, with the model
replaced, on one H100 (``--device cuda``) and on NDIF (``-p remote True``): what
``python -m depthutils plan CHAPTER --model M --device cuda`` prints. The page runs this when the book is
built, so its numbers are the cost model's of that build, never typed. Every time here is an estimate from
the device table of :mod:`depthutils.perf.timing` (no GPU is measured).
"""
from __future__ import annotations

import pandas as pd
from IPython.display import Markdown, display

from depthutils.book.report import glue_facts
from depthutils.book.runner import find_chapter, parameters
from depthutils.perf.plan import Plan, chapter_parameters, duration, gigabytes, make_plan
from depthutils.perf.workloads import workload

#: the chapters a reader runs on one large model (7 and 8 compare two models, 0 is the identity check)
PAGE_CHAPTERS = ("01", "02", "03", "04", "05", "06", "09")
#: the models of the page: P1's own Llama 3.1 8B and 70B (their configs are in the papers' table, offline)
PAGE_MODELS = ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B")


def plans(model: str, chapters=PAGE_CHAPTERS) -> list[tuple[str, Plan, Plan]]:
    """``(chapter stem, plan on one H100, plan on NDIF)`` for each chapter, at its default parameters."""
    out = []
    for num in chapters:
        path = find_chapter(num)
        _, p = chapter_parameters(path, parameters(path), model, None, {})
        out.append((path.stem, make_plan(num, p, workload(num), device="cuda"),
                    make_plan(num, {**p, "remote": True}, workload(num), device="cuda")))
    return out


def table(rows: list[tuple[str, Plan, Plan]]) -> pd.DataFrame:
    """The page's table of :func:`plans`: one row per chapter."""
    records = []
    for stem, gpu, ndif in rows:
        batch = gpu.batch_size if gpu.layers_per_pass is None else f"{gpu.batch_size} × {gpu.layers_per_pass} layers"
        records.append({
            "chapter": f"{stem[:2]} {stem[3:].replace('_', ' ')}",
            "layer-passes": f"{gpu.layer_passes:,.0f}",
            "one H100: peak memory": gigabytes(gpu.peak_memory_bytes, 0),
            f"fits {gigabytes(gpu.memory_budget_bytes, 0)}": "yes" if gpu.fits else "no",
            "batch": (batch or 1) if gpu.fits else "–",
            "time (estimate)": duration(gpu.seconds) if gpu.fits else "–",
            "NDIF: requests": ndif.requests,
            "download": f"{ndif.download_bytes / 2 ** 20:.1f} MiB",
            "time (estimate, no queue)": duration(ndif.seconds)})
    return pd.DataFrame.from_records(records)


def markdown(df: pd.DataFrame) -> str:
    """``df`` as a GitHub-flavoured Markdown table (the book renders Markdown outputs as GFM)."""
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "|".join("---" for _ in df.columns) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def facts(model: str, rows: list[tuple[str, Plan, Plan]]) -> dict:
    """What the page's prose says of ``model``'s plans, as one sentence that holds for these numbers: its
    bf16 weights against one H100's memory, and which chapters fit there."""
    name = model.split("/")[-1]
    fit = [stem[:2] for stem, gpu, _ in rows if gpu.fits]
    weights, budget = gigabytes(rows[0][1].weights_bytes, 0), gigabytes(rows[0][1].memory_budget_bytes, 0)
    if not fit:
        sentence = (f"{name}'s bf16 weights alone ({weights}) exceed one H100's {budget}, so every chapter of it "
                    f"belongs on NDIF")
    elif len(fit) == len(rows):
        sentence = (f"On one H100, {name} ({weights} of bf16 weights) fits every chapter listed here; the "
                    f"measurements that batch their interventions do so in batches the plan picks under {budget}")
    else:
        sentence = (f"On one H100, {name} ({weights} of bf16 weights) fits chapters {', '.join(fit)} of those "
                    f"listed here; the others belong on NDIF")
    return {"weights": weights, "budget": budget, "fits": f"{len(fit)} of {len(rows)}", "sentence": sentence}


def show(model: str, key: str) -> None:
    """The page's table for ``model``, and its :func:`facts` glued as ``{key}_weights``, ``{key}_sentence``, …"""
    rows = plans(model)
    display(Markdown(f"**{model.split('/')[-1]}**\n\n" + markdown(table(rows))))
    glue_facts(facts(model, rows), key)
