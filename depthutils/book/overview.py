"""The intro's overview: every chapter's verdicts in one table, one column per model that ran in the build.

``python -m depthutils book`` (:func:`depthutils.book.runner.build_book`) writes it into the staged
``intro.md`` in place of the line that starts with :data:`MARKER`, once every chapter is executed. Each cell
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
#: the table's caption
CAPTION = ("The papers' claims, graded in this build. A cell: the verdict · this run's value of the claim's statistic "
           "(its first graded part; the chapter gives every part with its interval). Reviewer: a question P1's "
           "reviewers asked, in our words. —: not run for that claim.")
OUTCOME_WORDS = (("shown", "the evidence supports the claim"),
                 ("mixed", "the evidence points both ways (one part shown, another not) or is inconclusive (the "
                           "interval does not decide); the chapter's verdict says which"),
                 ("not shown", "nothing supports the claim, or something contradicts it"),
                 ("not tested", "the run cannot speak to it"))


@dataclass(frozen=True)
class Row:
    """One verdict of the table: its chapter, its claim (a key of the claim table), the glue name of its outcome,
    the claim and the paper's value in a few words, and whether the real models run it (from the claim's
    :class:`~depthutils.book.claim_table.Headline`)."""

    chapter: str
    claim: str
    prefix: str
    words: str
    paper: str | Callable[[], str]
    real: bool = False

    @property
    def where(self) -> str:
        """``"1"``, or ``"1 (norms)"`` for a verdict glued under a name of its own: the row in a sentence."""
        tag = self.prefix.removeprefix("verdict").strip("_").replace("_", " ")
        return f"{int(self.chapter)}" + (f" ({tag})" if tag else "")


#: every verdict a chapter glues, in book order: each claim's :class:`~depthutils.book.claim_table.Headline` rows
#: (the claim table's order within a chapter)
ROWS = tuple(sorted((Row(h.chapter or c.chapter, c.key, h.glue, h.words, h.paper, h.real)
                     for c in CLAIMS.values() for h in c.overview), key=lambda r: r.chapter))

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
    head = ["ch.", "the claim", "the paper's value", "embedded", *(TITLES[m] for m in models)]
    rows = []
    for r in ROWS:
        paper = r.paper() if callable(r.paper) else r.paper
        cells = [f"[{int(r.chapter)}](chapters/{stems()[r.chapter]})", r.words, paper,
                 _ref(r.chapter, f"{r.prefix}_cell")]
        cells += [_ref(r.chapter, f"{r.prefix}_{slug(m)}_cell") if r.real else "—" for m in models]
        rows.append("| " + " | ".join(cells) + " |")
    blocks = ["The verdict words: " + "; ".join(f"*{w}*: {what}" for w, what in OUTCOME_WORDS) + ".",
              "\n".join([f"```{{table}} {CAPTION}", ":name: overview", ":class: overview", "",
                         "| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows, "```"]),
              "\n".join([note(None, run), *(note(m, run) for m in models)])]
    for name in REAL_MODELS:
        if name not in models:
            terms = " --accept-terms" if REAL_MODELS[name].terms_url else ""
            blocks.append(f"{TITLES[name]} did not run in this build; to include it, run "
                          f"`python -m depthutils fetch {name}{terms}`, then `python -m depthutils book`.")
    return "\n\n".join(blocks)


def write(intro: Path, chapter_dir: Path) -> list[str]:
    """Replace the :data:`MARKER` line of the staged ``intro`` with the :func:`table` of the chapters executed in
    ``chapter_dir``; returns the real models it shows."""
    run = read_run(chapter_dir)
    models = models_run(run)
    text = Path(intro).read_text(encoding="utf-8")
    lines = text.splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith(MARKER)]
    if len(at) != 1:
        raise DepthError(f"{intro} must hold one line starting with {MARKER!r}, where the overview table goes.")
    lines[at[0]] = table(models, run)
    Path(intro).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return models
