"""The intro's overview (depthutils.book.overview): one row per verdict, one column per model that ran, each cell
glued from its chapter, and the models that ran read from what the executed chapters glued."""
from __future__ import annotations

import importlib
import pkgutil
import re

import nbformat
import pytest

from depthutils.book import overview, realruns, report, reviews
from depthutils.book.claim_table import CLAIMS
from depthutils.book.grading import Verdict
from depthutils.book.runner import ROOT, chapters
from depthutils.core.errors import DepthError
from depthutils.models.real.catalog import REAL_MODELS

ALL = list(REAL_MODELS)
SMOL = "smollm2-135m"


def _tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """The header and rows of each of the overview's Markdown tables (the claims', then the reviewers')."""
    split = lambda line: [c.strip() for c in line.strip("|").split(" | ")]  # noqa: E731
    out = []
    for block in text.split("```{table}")[1:]:
        lines = [line for line in block.split("```")[0].splitlines() if line.startswith("| ")]
        out.append((split(lines[0]), [split(line) for line in lines[1:]]))
    return out


def _glue(row: overview.Row, name: str) -> str:
    return f"{{glue:text}}`chapters/{chapters()[row.chapter].stem}.ipynb::{name}:s`"


@pytest.mark.parametrize("models", [[], [SMOL], ALL], ids=["embedded only", "with SmolLM2", "both real models"])
def test_a_column_per_model_that_ran_and_a_row_per_verdict(models):
    text = overview.table(models)
    (head, rows), (rhead, rrows) = _tables(text)
    titles = [overview.TITLES[m] for m in models]
    assert head == ["ch.", "the claim", "statistic", "the paper's value", "embedded", *titles]
    assert rhead == ["ch.", "the reviewer's question", "statistic", "embedded", *titles]
    assert len(rows) + len(rrows) == len(overview.ROWS) and all(len(r) == len(head) for r in rows)
    assert all(len(r) == len(rhead) for r in rrows)
    for table_rows, cells_rows, first in ((overview.CLAIM_ROWS, rows, 4), (overview.REVIEW_ROWS, rrows, 3)):
        for row, cells in zip(table_rows, cells_rows):
            assert cells[0] == f"[{int(row.chapter)}](chapters/{chapters()[row.chapter].stem})"
            assert cells[2] == CLAIMS[row.claim].short and cells[2]  # the statistic the row grades
            assert cells[first] == _glue(row, f"{row.prefix}_cell")
            for m, cell in zip(models, cells[first + 1:]):
                assert cell == (_glue(row, f"{row.prefix}_{realruns.slug(m)}_cell") if row.real else "—")
    for row, cells in zip(overview.CLAIM_ROWS, rows):
        assert cells[1] == row.words and cells[3] and "**" not in cells[3] and len(cells[3]) <= 60  # plain and short
    for row, cells in zip(overview.REVIEW_ROWS, rrows):
        assert cells[1] == row.question
    # a note per column, from the catalog; a line on how to add each model left out
    for m in models:
        spec = REAL_MODELS[m]
        assert f"- **{overview.TITLES[m]}**: {spec.title}, {spec.quantization.split()[-1]} GGUF, dequantized" in text
    for m in set(ALL) - set(models):
        terms = " --accept-terms" if REAL_MODELS[m].terms_url else ""
        assert f"`python -m depthutils fetch {m}{terms}`, then `python -m depthutils book`" in text
        assert f"**{overview.TITLES[m]}**" not in text
    assert "- **embedded**:" in text
    for word, _ in overview.OUTCOME_WORDS:
        assert f"*{word}*:" in text.split("```")[0]  # defined once, above the table
    between = text.split("```{table}")[1].rsplit("```", 1)[1]
    assert f"[OpenReview]({overview.FORUM})" in between  # the reviewers' table is introduced with the forum's link


def test_the_reviewers_questions_stand_apart_each_a_question_that_shown_answers_yes():
    """A row whose claim is a reviewer's question reads as that question, with what *shown* and *not shown* answer,
    in the second table; no paper's claim is in it, and no reviewer's question is among the papers' claims."""
    reviewers = {key for key, c in CLAIMS.items() if "reviewer" in c.where}
    # three questions; chapter 1 grades the one on massive activations twice (norm growth, and the clamp)
    assert {r.claim for r in overview.REVIEW_ROWS} == reviewers and len(reviewers) == 4
    assert not {r.claim for r in overview.CLAIM_ROWS} & reviewers
    assert not any(r.words.startswith("Reviewer") for r in overview.ROWS)  # a reviewer asked; the statement is ours
    assert all(r.words.startswith("Ours, on a reviewer's question: ") for r in overview.REVIEW_ROWS)
    where = overview._where(list(dict.fromkeys(str(int(r.chapter)) for r in overview.REVIEW_ROWS)))
    assert f"{where} also grade a\nquestion P1's reviewers asked" in (ROOT / "intro.md").read_text()
    for r in overview.REVIEW_ROWS:
        asked, answers = r.question.split("? (", 1)
        assert asked[0].isupper() and "?" not in asked, r.question
        assert answers.startswith("*shown*: yes") and "; *not shown*: no" in answers and answers.endswith(")"), r


def test_every_claim_has_a_row_and_every_row_names_a_verdict_its_chapter_glues():
    assert {r.claim for r in overview.ROWS} == set(CLAIMS)
    assert [r.chapter for r in overview.ROWS] == sorted(r.chapter for r in overview.ROWS)
    assert {r.chapter for r in overview.ROWS} == set(chapters())
    for r in overview.ROWS:
        assert CLAIMS[r.claim].chapter == r.chapter or r.claim == "context", r  # chapter 5 grades chapter 4's claim
        glued = overview.glued(chapters()[r.chapter])  # the source keeps the verdict cell's outputs
        assert r.prefix in glued, (r, sorted(n for n in glued if n.startswith("verdict")))


def test_the_rows_the_real_models_run_are_the_sections_realruns_has():
    keys = set(realruns.runs())
    for info in pkgutil.iter_modules(reviews.__path__):
        run = getattr(importlib.import_module(f"{reviews.__name__}.{info.name}"), "REAL_RUN", None)
        keys |= {run["key"]} if run else set()
    have = {(k[:2], realruns.glue_name(k)) for k in keys}
    assert {(r.chapter, r.prefix) for r in overview.ROWS if r.real} == have


def _nb(glues: dict) -> nbformat.NotebookNode:
    """A notebook whose one cell glued ``glues`` as myst-nb stores them."""
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("display_data", {"application/papermill.record/text/plain": repr(v)},
                                           metadata={"scrapbook": {"name": n, "mime_prefix": "application/papermill.record/"}})
                    for n, v in glues.items()]
    return nbformat.v4.new_notebook(cells=[cell])


def _run(tmp_path, smol: bool) -> dict:
    """An executed build in ``tmp_path``: SmolLM2 in bfloat16 (float32 in chapters 0, 4, 5 and the early exit) when
    ``smol``, Gemma not run."""
    for num, path in chapters().items():
        glues = {"ran_dtype": "float32"}
        for r in (r for r in overview.ROWS if r.chapter == num):
            glues[r.prefix], glues[f"{r.prefix}_cell"] = "shown", "shown · 0.30"
            if r.real:
                dtype = "float32" if num in ("00", "04", "05") or r.prefix == "verdict_exit" else "bfloat16"
                glues[f"{r.prefix}_smollm2"] = f"mixed: 0.6 [0.4, 0.8] ({dtype})" if smol else "not run"
                glues[f"{r.prefix}_smollm2_dtype"] = dtype if smol else "not run"
                glues[f"{r.prefix}_gemma3"] = glues[f"{r.prefix}_gemma3_dtype"] = "not run"
        nbformat.write(_nb(glues), tmp_path / path.name)
    return overview.read_run(tmp_path)


def test_the_models_that_ran_and_their_dtypes_are_read_from_the_glued_values(tmp_path):
    run = _run(tmp_path, smol=True)
    assert run["03"]["verdict_exit_smollm2_dtype"] == "float32" and overview.models_run(run) == [SMOL]
    text = overview.table([SMOL], run)
    smol = next(line for line in text.splitlines() if line.startswith("- **SmolLM2-135M**"))
    refs = re.findall(r"\{glue:text\}`chapters/(\d\d)_\w+\.ipynb::(\w+):s`", smol)
    assert refs == [("00", "verdict_smollm2_dtype"), ("01", "verdict_smollm2_dtype")]  # one glue per dtype
    assert "in chapters 0, 3 (exit), 4 and 5" in smol and "in chapters 1, 1 (norms), 1 (clamp), 2, 3 and 6" in smol
    embedded = next(line for line in text.splitlines() if line.startswith("- **embedded**"))
    assert embedded.endswith("computed in {glue:text}`chapters/00_residual_stream.ipynb::ran_dtype:s`.")
    assert overview.models_run(_run(tmp_path, smol=False)) == []


def test_the_staged_intro_gets_the_summary_and_the_tables_in_place_of_their_markers(tmp_path):
    _run(tmp_path, smol=True)
    intro = tmp_path / "intro.md"
    source = (ROOT / "intro.md").read_text()
    for marker in (overview.SUMMARY, overview.MARKER):
        assert sum(line.startswith(marker) for line in source.splitlines()) == 1
    assert source.index(overview.SUMMARY) < source.index("## The two papers") < source.index(overview.MARKER)
    intro.write_text(source)
    assert overview.write(intro, tmp_path) == [SMOL]
    text = intro.read_text()
    assert overview.MARKER not in text and overview.SUMMARY not in text
    assert "| SmolLM2-135M |" in text and "fetch gemma3-270m --accept-terms" in text
    assert overview.summary(overview.read_run(tmp_path), [SMOL]) in text
    assert text.startswith(source.split(overview.SUMMARY)[0]) and text.endswith(source.split("\n## The default")[1])
    with pytest.raises(DepthError, match="must hold one line starting with"):
        overview.write(intro, tmp_path)


def test_the_summary_counts_the_glued_outcomes(tmp_path):
    """What held, in three sentences: the papers' claims on each pretrained model that ran, on the embedded models,
    and the reviewers' questions answered yes or no, each counted from what the chapters glued."""
    run = _run(tmp_path, smol=True)  # every embedded verdict "shown · 0.30"; SmolLM2 "mixed" wherever it ran
    text = overview.summary(run, [SMOL])
    claims, real = len(overview.CLAIM_ROWS), [r for r in overview.CLAIM_ROWS if r.real]
    assert f"came out {len(real)} mixed (chapters 0, 1, 2, 3, 4, 5 and 6) of {len(real)} verdicts on SmolLM2-135M." \
        in text
    assert f"the {claims} verdicts on the papers' claims came out {claims} shown (chapters 0, 1, 2, 3, 4, 5, 6, 7, " \
           "8, 9 and 10)." in text  # a chapter named once however many of its verdicts share the outcome
    asked = len(overview.REVIEW_ROWS)
    real_asked = sum(r.real for r in overview.REVIEW_ROWS)
    assert f"answered {asked} yes (chapters 1, 3 and 6) on the embedded models; {real_asked} undecided (chapters 1 " \
           "and 3) on SmolLM2-135M." in text
    assert text.count(". ") == 2 and text.endswith(".")  # three sentences
    # a verdict the run did not glue is not counted; a build without real models says so
    del run["01"]["verdict"]
    assert f"the {claims - 1} verdicts on the papers' claims came out {claims - 1} shown" in overview.summary(run, [])
    assert overview.summary(run, []).startswith("No pretrained model ran in this build")
    # the outcome read from a glued value, whatever follows it
    assert [overview.outcome(v) for v in ("not shown · 1.39", "mixed: 0.6 [0.4, 0.8] (bfloat16)", "shown",
                                          "not tested", "not run", None)] == \
        ["not shown", "mixed", "shown", "not tested", None, None]


def test_a_cell_is_the_outcome_and_the_first_graded_number():
    v = lambda outcome, value: Verdict("c", "k", outcome, "", value=value)  # noqa: E731
    assert report.cell(v("not shown", "1.39 [1.37, 1.41]")) == "not shown · 1.39"
    assert report.cell(v("shown", "1.2e-06 [1.0e-06, 1.4e-06]")) == "shown · 1.2e-06"
    assert report.cell(v("mixed", "later layers 0.42 [0.3, 0.5]; output 1.10 [0.9, 1.3]")) == "mixed · 0.42"
    assert report.cell(v("mixed", "KL halves: at no layer; overlap passes 0.3: 0.72 [0.6, 0.8]")) == "mixed · 0.72"
    assert report.cell(v("shown", "arithmetic: not tested (3 prompts counted); two-hop: mean 0.45 [0.4, 0.5] over "
                                  "10 prompts")) == "shown · 0.45"
    assert report.cell(v("shown", "arithmetic: 0.50 (one prompt: no interval)")) == "shown · 0.50"
    assert report.cell(v("not shown", "later layers 0.40 (interval of zero width); output 0.8")) == "not shown · 0.40"
    assert report.cell(v("not tested", "a: not tested (8 against 16: not beyond noise; difference +0.005 [-0.01, "
                                       "+0.02], not graded)")) == "not tested"  # no number beside it
    assert report.cell(v("shown", "addition: +0.010 [-0.002, +0.020] (not counted); multihop: -0.004 [-0.01, "
                                  "+0.003]")) == "shown · -0.004"
    assert report.cell(v("mixed", "ED slope: cos +0.12 [0.0, 0.2], kl +0.30 [0.1, 0.5]; ratio spread: cos +0.05"))\
        == "mixed · +0.12"
    assert report.cell(v("shown", "S5: A − Q+A shown, Q+A − LM shown")) == "shown"  # graded by a vote: no number
    assert report.cell(v("not tested", "")) == "not tested"


def test_ran_in_tells_the_chapters_own_time_from_the_real_models(monkeypatch):
    glued = {}
    monkeypatch.setattr(report, "_glue", lambda name, value, display: glued.update({name: value}))
    monkeypatch.setattr(report, "loaded_dtypes", lambda: {"ladder-8": "float32", SMOL: "bfloat16"})
    report.start()
    report.count_real(5.0)
    report.count_real(2.0)
    report.ran_in()
    assert glued["ran_in_real"] == "7" and int(glued["ran_in"]) == int(glued["ran_in_own"]) + 7
    assert glued["ran_dtype"] == "float32" and "smollm2-135m in bfloat16" in glued["ran_on"]
    report.start()  # a new chapter's clock counts no real time
    report.ran_in()
    assert glued["ran_in_real"] == "0"
