"""The intro's overview: every chapter's verdicts in two tables (the papers' claims, then P1's reviewers' questions),
one column per model that ran in the build, and what held, in three sentences counted from the same verdicts.

``python -m depthutils book`` (:func:`depthutils.book.runner.build_book`) writes them into the staged
``intro.md`` in place of the lines that start with :data:`MARKER` and :data:`SUMMARY`, once every chapter is
executed. Each cell
is a glue reference to a chapter's ``{prefix}_cell`` (the chapter's own model, glued by
:func:`depthutils.book.report.verdict`) or ``{prefix}_{slug}_cell`` (a real model, glued by
:func:`depthutils.book.realruns.section`): the verdict and its number (:func:`depthutils.book.report.cell`).
Which real models ran, and the dtypes every model computed in, are read from the values the executed chapters
glued (:func:`glued`), so a book rendered from notebooks executed elsewhere (``--executed``) shows the models
those runs included.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from depthutils.book.chapters import chapters
from depthutils.book.claim_table import CLAIMS
from depthutils.book.realruns import TITLES, slug
from depthutils.core.errors import DepthError
from depthutils.models.real.catalog import REAL_MODELS

#: the line of the source intro.md that the table replaces
MARKER = "% OVERVIEW"
#: the line of the source intro.md that the build's summary in three sentences replaces (:func:`summary`)
SUMMARY = "% SUMMARY"
#: P1's OpenReview forum, where its reviewers' questions and the authors' replies stand
FORUM = "https://openreview.net/forum?id=Kz6eUL86XP"
#: the tables' captions
CAPTION = ("The papers' claims, graded in this build. A cell: the verdict · this run's value of the row's statistic "
           "(its first graded part; the chapter gives every part with its interval). —: not run for that claim.")
REVIEW_CAPTION = ("P1's reviewers' questions, graded in this build (the questions in our words). A cell: the answer "
                  "(*shown*: yes, *not shown*: no) · this run's value of the row's statistic. —: not run.")
OUTCOME_WORDS = (("shown", "the evidence supports the claim"),
                 ("mixed", "the evidence points both ways (one part shown, another not) or is inconclusive (the "
                           "interval does not decide); the chapter's verdict says which"),
                 ("not shown", "nothing supports the claim, or something contradicts it"),
                 ("not tested", "the run cannot speak to it"))


@dataclass(frozen=True)
class Row:
    """One verdict of the table: its chapter, its claim (a key of the claim table), the glue name of its outcome,
    the claim and the paper's value in a few words, whether the real models run it and, for a reviewer's question,
    the question (from the claim's :class:`~depthutils.book.claim_table.Headline`)."""

    chapter: str
    claim: str
    prefix: str
    words: str
    paper: str | Callable[[], str]
    real: bool = False
    question: str = ""

    @property
    def statistic(self) -> str:
        """The statistic the row grades, in a few words (the claim's :attr:`~depthutils.book.claim_table.Claim.short`)."""
        return CLAIMS[self.claim].short

    @property
    def where(self) -> str:
        """``"1"``, or ``"1 (norms)"`` for a verdict glued under a name of its own: the row in a sentence."""
        tag = self.prefix.removeprefix("verdict").strip("_").replace("_", " ")
        return f"{int(self.chapter)}" + (f" ({tag})" if tag else "")


#: every verdict a chapter glues, in book order: each claim's :class:`~depthutils.book.claim_table.Headline` rows
#: (the claim table's order within a chapter)
ROWS = tuple(sorted((Row(h.chapter or c.chapter, c.key, h.glue, h.words, h.paper, h.real, h.question)
                     for c in CLAIMS.values() for h in c.overview), key=lambda r: r.chapter))
#: the papers' claims (the first table) and the reviewers' questions (the second)
CLAIM_ROWS = tuple(r for r in ROWS if not r.question)
REVIEW_ROWS = tuple(r for r in ROWS if r.question)

# ------------------------------------------------------------------------------------ what the run glued

def glued(notebook: Path) -> dict[str, object]:
    """Every value an executed notebook glued, by name (its text form, as myst-nb stores it)."""
    out = {}
    for c in json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]:
        for o in c.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            text = o.get("data", {}).get("application/papermill.record/text/plain")
            if name and text is not None:
                try:
                    out[name] = ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    out[name] = text
    return out


def read_run(chapter_dir: Path) -> dict[str, dict[str, object]]:
    """``{chapter number: its glued values}`` for every chapter in ``chapter_dir`` (empty where a chapter's
    notebook is missing)."""
    paths = {num: Path(chapter_dir) / f"{stem}.ipynb" for num, stem in stems().items()}
    return {num: glued(path) if path.exists() else {} for num, path in paths.items()}


def models_run(run: dict[str, dict[str, object]]) -> list[str]:
    """The real models that ran in at least one chapter's section: their glued outcome is not "not run"."""
    return [name for name in REAL_MODELS if any(
        run.get(r.chapter, {}).get(f"{r.prefix}_{slug(name)}", "not run") != "not run" for r in ROWS if r.real)]


# ------------------------------------------------------------------------------------ the table

def stems() -> dict[str, str]:
    """Chapter number -> the stem of its notebook (:func:`depthutils.book.chapters.chapters`)."""
    return {num: path.stem for num, path in chapters().items()}


def _ref(chapter: str, name: str) -> str:
    return f"{{glue:text}}`chapters/{stems()[chapter]}.ipynb::{name}:s`"


def _where(places: list[str]) -> str:
    return "chapter " + places[0] if len(places) == 1 else "chapters " + ", ".join(places[:-1]) + " and " + places[-1]


def _dtypes(run, places: list[tuple[str, str, str]]) -> str:
    """The dtype(s) a model computed in, from ``places`` (chapter, glue name, the place in words): each dtype glued
    from the first place that recorded it, with the places it holds for when they differ; "" when none did."""
    groups: dict[str, list[tuple[str, str, str]]] = {}
    for chapter, name, where in places:
        value = run.get(chapter, {}).get(name)
        if isinstance(value, str) and value and value != "not run":
            groups.setdefault(value, []).append((chapter, name, where))
    parts = [(_ref(*ps[0][:2]), [p[2] for p in ps]) for ps in groups.values()]
    if len(parts) == 1:
        return parts[0][0]
    return "; ".join(f"{ref} in {_where(where)}" for ref, where in parts)


def note(name: str | None, run) -> str:
    """The table's note on one model's column (``None``: the chapters' own models): what it is, its quantization,
    and the dtype(s) it computed in, glued from the run."""
    if name is None:
        dtype = _dtypes(run, [(num, "ran_dtype", str(int(num))) for num in dict.fromkeys(r.chapter for r in ROWS)])
        return ("- **embedded**: each chapter's own models, by default the 1–4M-parameter models this project "
                "trained (see [The default model](#the-default-model)), unquantized"
                + (f"; computed in {dtype}" if dtype else "") + ".")
    m = REAL_MODELS[name]
    dtype = _dtypes(run, [(r.chapter, f"{r.prefix}_{slug(name)}_dtype", r.where) for r in ROWS if r.real])
    return (f"- **{TITLES[name]}**: {m.title}, {m.quantization.removeprefix('GGUF ')} GGUF, dequantized to float32"
            + (f"; computed in {dtype}" if dtype else "") + ".")


def table(models: list[str], run: dict | None = None) -> str:
    """The overview in MyST Markdown: the verdict words defined, the table (a column for the chapters' own models,
    then one per real model of ``models``), a note per column, and how to add each real model left out. ``run``
    (:func:`read_run`) gives the dtypes each model recorded; without it the notes name none."""
    run = run or {}
    unknown = [m for m in models if m not in REAL_MODELS]
    if unknown:
        raise DepthError(f"The overview names unknown real models {', '.join(unknown)}; the named real models are "
                         f"{', '.join(REAL_MODELS)}.")
    models = [m for m in REAL_MODELS if m in models]
    blocks = ["The verdict words: " + "; ".join(f"*{w}*: {what}" for w, what in OUTCOME_WORDS) + ".",
              _markdown(CLAIM_ROWS, models, "overview", CAPTION),
              f"P1's reviewers asked questions on [OpenReview]({FORUM}). The chapters grade three of them, each "
              "worded (ours) so that *shown* answers it yes and *not shown* answers it no:",
              _markdown(REVIEW_ROWS, models, "overview-reviewers", REVIEW_CAPTION),
              "\n".join([note(None, run), *(note(m, run) for m in models)])]
    for name in REAL_MODELS:
        if name not in models:
            terms = " --accept-terms" if REAL_MODELS[name].terms_url else ""
            blocks.append(f"{TITLES[name]} did not run in this build; to include it, run "
                          f"`python -m depthutils fetch {name}{terms}`, then `python -m depthutils book`.")
    return "\n\n".join(blocks)


def head(reviewers: bool, models: list[str]) -> list[str]:
    """The header of the claims' table (``reviewers`` False) or of the reviewers' questions' table."""
    first = ["ch.", "the reviewer's question", "statistic"] if reviewers else \
        ["ch.", "the claim", "statistic", "the paper's value"]
    return [*first, "embedded", *(TITLES[m] for m in models)]


def _markdown(rows: tuple[Row, ...], models: list[str], name: str, caption: str) -> str:
    """One table: a row per verdict, a glued cell per model (``—`` where the real models do not run it)."""
    reviewers = bool(rows[0].question)
    lines = []
    for r in rows:
        paper = r.paper() if callable(r.paper) else r.paper
        cells = [f"[{int(r.chapter)}](chapters/{stems()[r.chapter]})", r.question if reviewers else r.words,
                 r.statistic, *([] if reviewers else [paper]), _ref(r.chapter, f"{r.prefix}_cell")]
        cells += [_ref(r.chapter, f"{r.prefix}_{slug(m)}_cell") if r.real else "—" for m in models]
        lines.append("| " + " | ".join(cells) + " |")
    top = head(reviewers, models)
    return "\n".join([f"```{{table}} {caption}", f":name: {name}", ":class: overview", "",
                      "| " + " | ".join(top) + " |", "|" + "---|" * len(top), *lines, "```"])


# ------------------------------------------------------------------------------------ the summary

def outcome(value: object) -> str | None:
    """The outcome word a glued verdict starts with (``"shown"``, ``"mixed: 0.6 […] (float32)"``); None for a
    verdict that was not run or not glued."""
    if not isinstance(value, str):
        return None
    return next((o for o in ("not shown", "not tested", "shown", "mixed") if value.startswith(o)), None)


def _tally(found: list[tuple[Row, str]], words: dict[str, str]) -> str:
    """``"3 shown (chapters 0, 1 and 9), 1 mixed (chapter 3) and 1 not tested"``: each outcome counted, with the
    chapters it holds in for every outcome but *not tested*, in the words ``words`` gives the outcomes."""
    parts = []
    for o in ("shown", "mixed", "not shown", "not tested"):
        where = [r.chapter for r, got in found if got == o]
        if where:
            places = [str(int(c)) for c in dict.fromkeys(where)]
            parts.append(f"{len(where)} {words.get(o, o)}" + ("" if o == "not tested" else f" ({_where(places)})"))
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _found(run, rows, name: str | None) -> list[tuple[Row, str]]:
    """The outcome of each row of ``rows`` that ran on ``name`` (None: the chapters' own models)."""
    got = [(r, outcome(run.get(r.chapter, {}).get(r.prefix if name is None else f"{r.prefix}_{slug(name)}")))
           for r in rows if name is None or r.real]
    return [(r, o) for r, o in got if o]


def summary(run: dict, models: list[str]) -> str:
    """What held in this build, in three sentences counted from the outcomes the executed chapters glued: the
    papers' claims on the pretrained models that ran, the same on the chapters' own (embedded) models, and the
    reviewers' questions. Counts and chapter numbers only, so it stays true for any run."""
    on = [(TITLES[m], _found(run, CLAIM_ROWS, m)) for m in models]
    on = [(title, found) for title, found in on if found]
    first = ("On the pretrained models, the papers' claims came out " + "; ".join(
        f"{_tally(found, {})} of {len(found)} verdicts on {title}" for title, found in on) + ".") if on else (
        "No pretrained model ran in this build, so only the embedded models speak below.")
    own = _found(run, CLAIM_ROWS, None)
    second = (f"On the project's small embedded models, the {len(own)} verdicts on the papers' claims came out "
              f"{_tally(own, {})}.") if own else "No chapter's own verdict was found in this build."
    answers = {"shown": "yes", "not shown": "no", "mixed": "undecided"}
    asked = [(title, _found(run, REVIEW_ROWS, m)) for title, m in (("the embedded models", None),
                                                                    *((TITLES[m], m) for m in models))]
    asked = [(title, found) for title, found in asked if found]
    third = ("P1's reviewers' questions were answered " + "; ".join(
        f"{_tally(found, answers)} on {title}" for title, found in asked) + ".") if asked else ""
    return " ".join(s for s in (first, second, third) if s)


def _replace(lines: list[str], marker: str, text: str, intro: Path) -> list[str]:
    at = [i for i, line in enumerate(lines) if line.startswith(marker)]
    if len(at) != 1:
        raise DepthError(f"{intro} must hold one line starting with {marker!r}, where the overview's text goes.")
    return lines[:at[0]] + [text] + lines[at[0] + 1:]


def write(intro: Path, chapter_dir: Path) -> list[str]:
    """Replace the :data:`SUMMARY` line of the staged ``intro`` with the :func:`summary` and its :data:`MARKER`
    line with the :func:`table` of the chapters executed in ``chapter_dir``; returns the real models they show."""
    run = read_run(chapter_dir)
    models = models_run(run)
    lines = Path(intro).read_text(encoding="utf-8").splitlines()
    lines = _replace(_replace(lines, SUMMARY, summary(run, models), intro), MARKER, table(models, run), intro)
    Path(intro).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return models
