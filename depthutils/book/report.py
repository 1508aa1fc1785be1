"""What a chapter's prose says about its own run: glued numbers and the closing verdict.

Every number a reading guide states comes from the run through myst-nb's
``glue`` (``{glue:text}`name``` in the Markdown), so the prose stays true when a
reader re-runs the chapter on another model. myst-nb comes with the book's
dependencies (``pip install -e .[book]``); outside the book these functions only
display.
"""
from __future__ import annotations

import json
import os
import platform
import re
import time

import matplotlib.pyplot as plt
import torch
from IPython.display import Image, Markdown

from depthutils.book.claim_table import CLAIMS
from depthutils.book.claims import Verdict, paper_vs_run
from depthutils.book.grading import MIXED_KINDS, interval_text, run_models
from depthutils.book.plotstyle import save
from depthutils.core.numbers import as_shown, listing
from depthutils.core.progress import JOBS_ENV
from depthutils.ladder.registry import is_embedded
from depthutils.measures import CALLS
from depthutils.models.handle import loaded_dtypes
from depthutils.models.real.catalog import REAL_MODELS

#: how the pages name the real models
TITLES = {"smollm2-135m": "SmolLM2-135M", "gemma3-270m": "Gemma 3 270M"}

try:
    from myst_nb import glue as _glue
except ImportError:  # the package without the book's extras: nothing to glue into
    _glue = None


def glue_facts(facts, prefix: str) -> None:
    """Glue every ``facts[name]`` as ``{prefix}_{name}`` (not displayed).

    ``facts`` is a dict, or a result: then its ``facts()`` and, where it has them, its
    bootstrap ``intervals()`` over prompts (``{name}_lo``, ``{name}_hi``).

    Returns nothing, so the cell shows nothing either: nbval runs cells without history,
    where a trailing ``;`` does not silence a returned value.

    Each value is glued as prose shows it (:func:`depthutils.core.numbers.as_shown`): ``None`` (a quantity that is
    undefined on this run) as the word "undefined", a list as its items in words, no negative zero.
    """
    if not isinstance(facts, dict):
        facts = {**facts.facts(), **(facts.intervals() if hasattr(facts, "intervals") else {})}
    for name, value in facts.items():
        if _glue is not None:
            _glue(f"{prefix}_{name}", as_shown(value), display=False)


def sample(results: dict, out_dir: str, name: str, prefix: str) -> None:
    """Chapters 4 and 5's sample, shown: each kind's worked prompt (its first, the chapter's own) saved as
    ``{out_dir}/{name}_{kind}``, its summary printed and its facts glued as ``{prefix}_{kind}_…``; then each kind's
    sample summary, and the samples' numbers glued as ``{prefix}_sample_…``
    (:func:`depthutils.book.claims.context.sample_facts`)."""
    from depthutils.book.claims.context import by_kind, sample_facts, worked  # chapters 4 and 5's alone

    for kind, r in worked(results).items():
        r.save(f"{out_dir}/{name}_{kind}")
        print(f"{kind}:", r.summary())
        glue_facts(r.facts(), f"{prefix}_{kind}")
    for kind, s in by_kind(results).items():
        print(f"{kind} sample:", s.summary())
    glue_facts(sample_facts(results), f"{prefix}_sample")


def paper(v: Verdict, *results) -> Markdown:
    """The "paper vs this run" table of a verdict's claim (see :func:`depthutils.book.claims.paper_vs_run`), this
    run's side read from the ``results`` (results, or dicts/lists of them). The models the results ran on are kept
    in the verdict's ``rows["models"]``, where its box (:func:`box`) names them."""
    metas = []
    for r in results:
        for one in (r.values() if isinstance(r, dict) else r if isinstance(r, (list, tuple)) else [r]):
            if one is not None:
                metas.append(one.meta)
    v.rows.setdefault("models", run_models(metas, is_embedded))
    return Markdown(paper_vs_run(v, metas))


#: how a chapter's several verdicts are named in their headings (chapter 9: P2's three questions)
QUESTIONS = {"scale": "model size", "cot": "long chain-of-thought training", "difficulty": "task difficulty",
             "s5": "the S5 word problem, which needs depth", "z10": "the Z10 chains, the control with a shortcut",
             "premise": "the premise: S5 needs more layers than C10"}


_NUMBER = r"[+\-−]?\d+(?:\.\d+)?(?:e[+\-]\d+)?"
#: words that mark a part of a verdict's value as not graded
_UNGRADED = ("not tested", "not counted", "not graded", "undefined", "at no layer")


def number(value: str) -> str:
    """The point estimate of the first graded part of a verdict's :attr:`~depthutils.book.grading.Verdict.value`
    (parts are separated by "; "; a part not tested or not counted is passed over): the number before its
    interval, or the number that opens the part after its label; "" when no part gives one."""
    for part in value.split("; "):
        if any(word in part for word in _UNGRADED):
            continue
        found = re.search(rf"(?<![\w.])({_NUMBER}) (\[|\(interval of zero width\))", part)
        if found is None:  # no interval: "label: 0.52", "label: mean 0.52", "label: cos +0.12"
            found = re.match(rf"(?:[a-z]+ )?({_NUMBER})(?![\w.])", part.split(": ", 1)[-1])
        if found:
            return found.group(1)
    return ""


def cell(v: Verdict) -> str:
    """A verdict in one cell of the intro's overview: its outcome and, where it has one, its :func:`number`."""
    n = "" if v.outcome == "not tested" else number(v.value)  # a number beside "not tested" would read as graded
    return f"{v.outcome} · {n}" if n else v.outcome


def verdict(v: Verdict | dict[str, Verdict], prefix: str = "verdict", real: dict | None = None) -> Markdown:
    """Glue the outcome as ``{prefix}`` and return the chapter's verdict box as Markdown (:func:`box`).

    Several verdicts (``{name: Verdict}``) are glued as ``{prefix}_{name}``, one row of the box each. For the
    intro's overview (:mod:`depthutils.book.overview`), each one's :func:`cell` is glued as
    ``{prefix}[_{name}]_cell`` and the paper's value of its statistic as ``{prefix}[_{name}]_paper``. ``real``
    (``{model title: Verdict}``, from :func:`depthutils.book.realruns.section`) adds one row per real model; a
    chapter with a real-model section passes it even when empty, and the box then says they did not run.
    """
    named = v if isinstance(v, dict) else {"": v}
    for name, one in named.items():
        if _glue is not None:
            glue_name = f"{prefix}_{name}" if name else prefix
            _glue(glue_name, one.outcome, display=False)
            _glue(f"{glue_name}_cell", cell(one), display=False)
            claim = CLAIMS.get(one.key)
            _glue(f"{glue_name}_paper", claim.paper_says() if claim else "—", display=False)
    return Markdown(box(named, real))


def _word(v: Verdict) -> str:
    kind = v.mixed_kind()
    return f"**{v.outcome}**" + (f" ({kind})" if kind else "")


def _cell_text(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def box(named: dict[str, Verdict], real: dict | None = None) -> str:
    """The chapter's verdict box, in Markdown: a headline naming every model's outcome (the pretrained models'
    first), a table with one row per model (and per question, ``named`` holding several), with the statistic, this
    run's value and interval and the outcome; then the claim and its criterion, once each; then the embedded
    model's numbers and notes, collapsed. ``real``: ``{title: Verdict}`` of the pretrained models that ran (None: the
    chapter has no real-model section)."""
    own = {name: one for name, one in named.items()}
    # a verdict's models: its own, or those of another verdict on the same claim (chapter 10's two tasks)
    models = {one.key: one.rows["models"] for one in own.values() if one.rows.get("models")}
    label = next(iter(models.values()), "this chapter's models")
    rows = []  # (question, model, verdict)
    for title, one in (real or {}).items():
        rows.append(("", title, one))
    for name, one in own.items():
        rows.append((QUESTIONS.get(name, name), models.get(one.key, label), one))
    head = ["question"] if len(own) > 1 else []
    lines = ["| " + " | ".join(head + ["model", "statistic", "this run [95% interval]", "verdict"]) + " |",
             "|" + "---|" * (len(head) + 4)]
    for question, model, one in rows:
        claim = CLAIMS.get(one.key)
        stat = claim.short or claim.statistic if claim else "—"
        value = one.value or (one.numbers if one.outcome == "not tested" else "—")
        cells = ([question] if head else []) + [model, stat, value, _word(one)]
        lines.append("| " + " | ".join(_cell_text(c) for c in cells) + " |")
    if real is not None:
        for title in TITLES.values():
            if title not in real:
                lines.append("| " + " | ".join(([""] if head else []) + [title, "—", "not run in this build (its section "
                                                                         "says why)", "—"]) + " |")
    said = []
    for outcome in dict.fromkeys(one.outcome for one in (real or {}).values()):
        titles = [t for t, one in real.items() if one.outcome == outcome]
        said.append(f"**{outcome}** on the pretrained {listing(titles)}")
    for name, one in own.items():
        # several questions are named by their question (their models are in the table), one by its models
        said.append(f"**{one.outcome}** on {QUESTIONS.get(name, name) if len(own) > 1 else label}")
    first = said[0].replace("**", "", 1)
    headline = f"**Verdict: {first}" + (f"; {'; '.join(said[1:])}" if len(said) > 1 else "") + "."
    if real == {}:
        headline += " The pretrained models did not run in this build."
    kinds = dict.fromkeys(one.mixed_kind() for _, _, one in rows if one.mixed_kind())
    legend = [f"*mixed ({kind})*: {MIXED_KINDS[kind]}." for kind in kinds]
    out = ['<div class="verdict-box">', "", headline, "", *lines, "", *legend, "", "</div>", ""]
    groups: dict[str, dict[str, list]] = {}  # claim -> criterion -> the questions graded by it
    for name, one in own.items():
        groups.setdefault(one.claim, {}).setdefault(one.criterion, []).append(QUESTIONS.get(name, name))
    for claim, criteria in groups.items():
        on = f" ({'; '.join(q for qs in criteria.values() for q in qs)})" if len(groups) > 1 else ""
        out.append(f"- *Claim{on}:* {claim}")
        for criterion, names in criteria.items():
            on = f" ({'; '.join(names)})" if len(criteria) > 1 else ""
            out.append(f"- *Criterion{on}:* {criterion}")
    detail = []
    for name, one in own.items():
        on = f" ({QUESTIONS.get(name, name)})" if len(own) > 1 else ""
        detail.append(f"- *This run{on}:* {one.numbers}")
    detail += [f"- *Note:* {n}" for n in dict.fromkeys(n for one in own.values() for n in one.notes)]
    out += ["", "<details><summary>This run's numbers and notes, in full</summary>", "", *detail, "", "</details>"]
    return "\n".join(out)


#: the chapter's clock: its number, when it started, and the seconds its sections on the real models took
_CLOCK = {"chapter": None, "started": time.perf_counter(), "real": 0.0}


def start(chapter: str | None = None) -> None:
    """Start chapter ``chapter``'s clock (its first code cell) and its count of measurement calls
    (:data:`depthutils.measures.CALLS`); :func:`ran_in` glues both at the end."""
    _CLOCK.update(chapter=chapter, started=time.perf_counter(), real=0.0)
    CALLS.clear()


def count_real(seconds: float) -> None:
    """Count ``seconds`` as spent on the real models (:mod:`depthutils.book.realruns` calls it for each section),
    so :func:`ran_in` can tell the chapter's own run from them."""
    _CLOCK["real"] += seconds


def machine() -> str:
    """The machine a chapter ran on, in words: the GPU, or the CPU model and its thread count (and how many chapters
    ran beside it, :data:`~depthutils.core.progress.JOBS_ENV`)."""
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (GPU)"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    threads = torch.get_num_threads()
    beside = int(os.environ.get(JOBS_ENV, "1")) - 1  # the book's runner, the tests' xdist workers
    return (f"{cpu}, {threads} CPU thread{'' if threads == 1 else 's'} of {os.cpu_count()}"
            + (f", beside {beside} other chapter{'' if beside == 1 else 's'} running at once" if beside > 0 else ""))


def ran_in() -> None:
    """Glue the chapter's run time and machine; shows nothing.

    ``ran_in``: seconds since :func:`start`, whole; ``ran_in_real``: those of them spent on the real models
    (:func:`count_real`); ``ran_in_own``: the rest, the chapter's run on its own models. ``ran_on``:
    :func:`machine`, then the dtype of every model the chapter loaded (its header line
    names it); ``ran_dtype``: the dtype(s) of the chapter's own models, those that are not named real models;
    ``ran_times``: both times in a sentence (:func:`times`), the chapter's header line;
    ``calls``: the chapter's own measurement calls (:data:`depthutils.measures.CALLS`, as JSON), which the tests
    compare with the chapter's plan (a chapter itself never refuses a call: a reader's own cell may make any)."""
    if _glue is not None:
        total = time.perf_counter() - _CLOCK["started"]
        _glue("ran_in", f"{total:.0f}", display=False)
        _glue("ran_in_real", f"{_CLOCK['real']:.0f}", display=False)
        _glue("ran_in_own", f"{total - _CLOCK['real']:.0f}", display=False)
        dtypes = loaded_dtypes()
        _glue("ran_on", machine() + precisions(dtypes), display=False)
        _glue("ran_times", times(total, _CLOCK["real"], machine() + precisions(dtypes)), display=False)
        own = [d for name, d in dtypes.items() if name not in REAL_MODELS]
        _glue("ran_dtype", " and ".join(dict.fromkeys(own)) or "—", display=False)
        _glue("calls", json.dumps(dict(sorted(CALLS.items()))), display=False)


def times(total: float, real: float, on: str) -> str:
    """The chapter's header line on its run time: a class run's (default parameters: the chapter's own models, no
    pretrained model), and, where the build also ran the pretrained models' sections, the build's whole run."""
    if real < 0.5:
        return f"This chapter ran in {total:.0f} s with its default parameters, on {on}."
    return (f"A class run (default parameters: the embedded models only) takes about {total - real:.0f} s here: this "
            f"build's run less its pretrained-model sections. This build's whole run, with those sections, took "
            f"{total:.0f} s, on {on}.")


def precisions(dtypes: dict[str, str]) -> str:
    """``", with ladder-8 in float32 and smollm2-135m in bfloat16"``: what each model computed in ("" for none)."""
    parts = [f"{name} in {dtype}" for name, dtype in dtypes.items()]
    if not parts:
        return ""
    return ", with " + listing(parts)


def figure(fig, out_dir, name: str) -> None:
    """Save ``fig`` as ``name.png`` and ``name.pdf`` in ``out_dir`` and glue the saved PNG as ``fig_<name>`` for a
    captioned ``{glue:figure}`` in the chapter's Markdown (alt text, caption, full-size link); shows nothing."""
    png, _ = save(fig, out_dir, name)
    if _glue is not None:
        _glue(f"fig_{name}", Image(data=png.read_bytes(), format="png"), display=False)
    plt.close(fig)


def glue_markdown(name: str, text: str) -> None:
    """Glue Markdown (a table) as ``name`` for ``{glue:md}`` in a tab or a narrow place; shows nothing."""
    if _glue is not None:
        _glue(name, Markdown(text), display=False)


#: the controlled depth ladder a reviewer's section runs on (same data, tokens and width; 4 to 16 layers)
LADDER = ("ladder-4", "ladder-8", "ladder-12", "ladder-16")


def ladder_for(ladder, model) -> list[str]:
    """The models a chapter's reviewer section runs on: ``ladder="auto"`` gives :data:`LADDER` when the chapter's own
    ``model`` is an embedded one (the book's run, a class's) and none when a reader re-runs the chapter on a model of
    their own, whose time goes to that model; a list is taken as it is."""
    if ladder == "auto":
        return list(LADDER) if is_embedded(model) else []
    return list(ladder)


def ladder_table(results: dict, keys: dict[str, str], grade=None) -> str:
    """A Markdown table, one row per model (``{model: result}``), or per model and set of prompts (``{model: {set:
    result}}``): each fact of ``keys`` (``{fact: column}``) with its 95% bootstrap interval over prompts, and the
    outcome of ``grade`` (a function of one model's result(s), returning a verdict) where given; a sentence saying
    how to run them when there are none (:func:`ladder_for`)."""
    if not results:
        return ("*Not run on the ladder: with `ladder = \"auto\"` it runs when the chapter runs on an embedded model; "
                "set `ladder = [\"ladder-4\", \"ladder-16\"]` (any embedded models) to run it beside yours.*")
    sets = any(isinstance(rs, dict) for rs in results.values())
    head = ["model", *(["set"] if sets else []), *keys.values()] + (["verdict"] if grade else [])
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, rs in results.items():
        many = rs if isinstance(rs, dict) else {"": rs}
        outcome = grade(rs).outcome if grade else None
        for name, r in many.items():
            f, band = r.facts(), r.intervals()
            cells = [interval_text(f[k], band.get(f"{k}_lo"), band.get(f"{k}_hi")) for k in keys]
            rows.append("| " + " | ".join([f"{model} ({f['L']} layers)", *([name] if sets else []), *cells]
                                          + ([outcome] if grade else [])) + " |")
    return "\n".join(rows)
