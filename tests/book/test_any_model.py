"""Every chapter on a model from outside the project: a 128-token or 96-token context, a tokenizer
that adds no BOS, one of two families, alternating from chapter to chapter (each family's adapter is proven for every
measurement by the oracle and family tests, ``tests/measures``; here a chapter runs end to end once). Each chapter
runs through papermill with its default parameters
(only the model changes), as a reader's `python -m depthutils run CHAPTER --model FOLDER` does, with a student's
cell of their own after the model loads (a measurement the chapter's plan does not count): the chapter still runs to
its verdict. Chapter 10 measures the models of its own experiment and takes no model; the runner refuses one in one
sentence."""
from __future__ import annotations

import json

import nbformat
import pytest
from conftest import build_tiny

from depthutils.book import runner
from depthutils.book.runner import chapters, parameters, run_chapter

pytestmark = pytest.mark.slow  # every chapter on an outside model: half a minute to a minute each

#: (family, context): two families, both with a tokenizer that adds no BOS
OUTSIDERS = [("llama", 128), ("gpt2", 96)]
#: the chapters that take a model, each with the outside model it runs on: the families alternate
CASES = [(chapter, OUTSIDERS[i % len(OUTSIDERS)])
         for i, chapter in enumerate(n for n, p in chapters().items() if {"model", "models"} & set(parameters(p)))]


@pytest.fixture(scope="module")
def outsider(tiny_root):
    return lambda spec: build_tiny(spec[0], tiny_root, context=spec[1], add_bos=False)


#: a student's own cell, after the chapter's model is loaded: another chapter's measurement on a prompt of their own
STUDENT_CELL = ("mine = du.{name}(du.load_model(model if 'model' in dir() else models[0]), "
                "[du.Prompt.from_parts('2 + 3 = ', '5', 'mine')], progress_bar=False)\n"
                "print('my own cell:', type(mine).__name__)")


def with_student_cell(chapter: str, folder) -> str:
    """A copy of chapter ``chapter`` in ``folder`` with :data:`STUDENT_CELL` after the cell that starts it."""
    src = chapters()[chapter]
    nb = nbformat.read(src, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "report.start(" in c.source)
    name = "logit_lens" if chapter == "01" else "contributions"
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(STUDENT_CELL.format(name=name)))
    copy = folder / src.name
    nbformat.write(nb, copy)
    return copy


def _outputs(nb) -> str:
    text = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text.append(out.get("text", "") + str(data.get("text/markdown", data.get("text/plain", ""))))
    return "\n".join(text)


def test_both_families_run_chapters():
    assert {spec for _, spec in CASES} == set(OUTSIDERS)


@pytest.mark.parametrize(("chapter", "spec"), CASES, ids=[f"{c}-{s[0]}-ctx{s[1]}" for c, s in CASES])
def test_every_chapter_runs_on_an_outside_model(outsider, tmp_path, chapter, spec, monkeypatch):
    path = outsider(spec)
    (tmp_path / "src").mkdir()
    copy = with_student_cell(chapter, tmp_path / "src")
    monkeypatch.setattr(runner, "find_chapter", lambda _: copy)
    dest = run_chapter(chapter, model=str(path), out=tmp_path, quiet=True)
    nb = nbformat.read(dest, as_version=4)
    text = _outputs(nb)
    assert "my own cell: " in text  # the student's cell ran
    assert "Verdict: " in text  # every chapter ends with its computed verdict, the student's cell notwithstanding
    if chapter in ("04", "05") and "Verdict: not tested" in text:
        # a model outside the ladder is graded only on prompts it answers (known_facts); a random one answers none,
        # so nothing is measured and the verdict says so, with the accuracy
        assert "the model answers 0 of" in text and "0 in the sample" in text
        return
    assert "Prompts: " in text and "BOS prepended by depthutils" in text
    # chapter 6's reviewer's section measures its own ladder pair (deeper_pair), not the chapter's model
    saved = [f for f in (tmp_path / "figures").glob("*.json") if f.stem != "solved_split"]
    assert saved or chapter == "09", "the chapter saved no result"  # chapter 9 keeps its results in its cache
    for f in saved:
        meta = json.loads(f.read_text())["meta"]
        assert meta["bos"] == "prepended" and meta["context"] == spec[1]
        if meta.get("fit"):
            assert meta["fit"]["max_tokens"] == spec[1]
    assert list((tmp_path / "figures").glob("*.png")) and list((tmp_path / "figures").glob("*.pdf"))


def test_a_chapter_of_its_own_models_refuses_a_model(tmp_path):
    from depthutils.core.errors import DepthError

    with pytest.raises(DepthError, match="runs models of its own and takes no --model"):
        run_chapter("10", model="ladder-4", out=tmp_path, quiet=True)
