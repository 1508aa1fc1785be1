"""The page "Running on a bigger model" states the cost model's numbers of the build (depthutils.perf.plan_page),
not typed ones: its table is the plan of each chapter, and its sentences follow from the table."""
from __future__ import annotations

import json

import nbformat

from depthutils.book.runner import PAGES, ROOT
from depthutils.perf import plan_page


def test_the_table_is_the_plan_of_each_chapter():
    rows = plan_page.plans("meta-llama/Llama-3.1-70B", chapters=("01", "03"))
    df = plan_page.table(rows)
    assert list(df["chapter"]) == ["01 contributions", "03 logit lens"]
    for (_, gpu, ndif), (_, row) in zip(rows, df.iterrows()):
        assert gpu.device == "cuda" and not gpu.remote and ndif.remote
        assert row["layer-passes"] == f"{gpu.layer_passes:,.0f}" and row["NDIF: requests"] == ndif.requests
        assert row[[c for c in df.columns if c.startswith("fits")][0]] == ("yes" if gpu.fits else "no")
    md = plan_page.markdown(df)
    assert md.count("\n") == len(df) + 1 and md.startswith("| chapter |")


def test_the_sentences_follow_the_plans():
    big = plan_page.facts("meta-llama/Llama-3.1-70B", plan_page.plans("meta-llama/Llama-3.1-70B", chapters=("01",)))
    small = plan_page.facts("meta-llama/Llama-3.1-8B", plan_page.plans("meta-llama/Llama-3.1-8B", chapters=("01",)))
    assert big["fits"] == "0 of 1" and "exceed one H100" in big["sentence"] and big["weights"] in big["sentence"]
    assert small["fits"] == "1 of 1" and "fits every chapter" in small["sentence"]


def test_the_page_is_a_notebook_the_book_runs_and_types_no_table():
    assert "bigger_models.ipynb" in PAGES
    nb = nbformat.read(ROOT / "bigger_models.ipynb", as_version=4)
    text = json.dumps([c.source for c in nb.cells if c.cell_type == "markdown"])
    assert "|---" not in text and "GB |" not in text  # the tables are outputs of the build, not typed
    assert any("plan_page.show" in c.source for c in nb.cells if c.cell_type == "code")
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code")  # the build fills them
