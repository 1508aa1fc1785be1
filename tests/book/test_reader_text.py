"""What a reader is told: the model's name, not an alias; the papers cited
with links; chapter 9 counting layers as chapter 3 does; chapter 5's criterion naming its own measure;
jargon explained where it first appears."""
from __future__ import annotations

import json
import re
from pathlib import Path

from depthutils.book import claims
from depthutils.book.runner import chapters
from depthutils.models.handle import load_model

ROOT = Path(__file__).resolve().parents[2]


def markdown(stem: str) -> str:
    nb = json.loads(chapters()[stem[:2]].read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_an_embedded_alias_is_shown_by_its_models_name():
    lm = load_model("default")
    assert lm.name == "ladder-8" and "default" not in repr(lm)
    assert load_model("shared").name == "ladder-8-shared"


def test_a_random_model_is_named_by_its_family_not_its_temporary_folder():
    """Chapter 0's "ran on … with /tmp/random-olmo2-… in float32": the post-norm model is named by its family."""
    from depthutils.models.handle import loaded_dtypes
    from depthutils.models.random_init import tiny_model

    lm = tiny_model("olmo2")
    assert lm.name == "random-olmo2" and loaded_dtypes()["random-olmo2"] == "float32"


def _cited(text: str) -> set[str]:
    """The keys a page cites with {cite}, {cite:t} or {cite:p}."""
    return {k.strip() for keys in re.findall(r"\{cite(?::[tp])?\}`([^`]+)`", text) for k in keys.split(",")}


def test_every_work_the_book_cites_is_in_the_bibliography_with_a_link():
    """references.bib holds every work a page cites and nothing no page cites; each entry links to the work (its
    arXiv abstract where it has one), or gives its journal, volume and pages; P1 and P2 keep their arXiv links in
    the intro, and the bibliography page is in the table of contents."""
    bib = (ROOT / "references.bib").read_text()
    entries = dict(re.findall(r"@\w+\{(\w+),(.*?)\n\}", bib, flags=re.S))
    assert {"csordas2025depth", "hu2025effective"} <= set(entries)
    for key, body in entries.items():
        eprint = re.search(r"eprint\s*=\s*\{([\d.]+)\}", body)
        if eprint:
            assert re.search(rf"url\s*=\s*\{{https://arxiv\.org/abs/{re.escape(eprint.group(1))}\}}", body), key
        else:
            assert re.search(r"url\s*=\s*\{https://", body) or all(f in body for f in ("journal", "volume", "pages")), key
    pages = [ROOT / "intro.md", ROOT / "using_depthutils.md", ROOT / "instructors.md"]
    text = "\n".join(p.read_text() for p in pages) + "\n".join(markdown(num) for num in chapters())
    text += "\n".join("".join(c["source"]) for c in json.loads((ROOT / "bigger_models.ipynb").read_text())["cells"]
                      if c["cell_type"] == "markdown")
    assert _cited(text) == set(entries), (_cited(text) ^ set(entries))
    for name, key in (("Belrose", "belrose2023tuned"), ("Barrington", "barrington1989bounded"),
                      ("Merrill", "merrill2024illusion"), ("MoEUT", "csordas2024moeut")):
        assert key in _cited(text) and name in entries[key].replace("{MoEUT}", "MoEUT"), name
    intro = (ROOT / "intro.md").read_text()
    assert "https://arxiv.org/abs/2505.13898" in intro and "https://arxiv.org/abs/2512.14064" in intro
    assert "```{bibliography}" in (ROOT / "references.md").read_text() and "```{bibliography}" not in intro
    assert "- file: references" in (ROOT / "_toc.yml").read_text()


def test_chapters_3_and_9_read_the_lens_on_layer_inputs():
    """Index l of the lens curves is h_l, the residual entering layer l (h_0 the embedding), in chapters 3, 8 and 9
    and in the lens's own docstring: no page keeps the old reading of layer outputs."""
    import importlib

    ll = importlib.import_module("depthutils.measures.logit_lens")
    for ch in ("03", "09"):
        text = markdown(ch)
        assert "the output of the first layer" not in text and "is the output of layer" not in text, ch
        assert "h_0" in text and "embedding" in text, ch
    assert "*output* of layer" not in ll.LogitLensResult.__doc__ and "entering" in ll.LogitLensResult.__doc__


class _Prompt:
    def __init__(self, rel):
        self.rel = rel

    def facts(self):
        return {"deepest_rel": self.rel}


def test_chapters_4_and_5_state_their_own_measure_in_the_criterion():
    erasure = claims.context.verdict({"arithmetic": _Prompt(0.5)}, "erasing the residual").criterion
    ig = claims.context.verdict({"arithmetic": _Prompt(0.5)}, "the |attribution|").criterion
    assert "erasing the residual" in erasure and "attribution" not in erasure
    assert "integrated-gradients attribution" in ig and "erasing" not in ig and "intervening" not in ig


def test_jargon_is_explained_where_it_first_appears():
    assert "nnterp, a library" in markdown("00")
    assert "MQuAKE is a benchmark" in markdown("06")
    assert "spec:" not in claims.CLAIMS["residual_stream"].where


def test_claim_texts_write_their_notation_so_a_table_shows_it():
    """The claims' texts appear in Markdown outputs (verdicts, the paper-vs-run tables), which the book
    renders as GFM, without math: their notation is Unicode (hₗ₊₁, ‖Δₗ‖), never raw TeX (h_{l+1}, $…$)."""
    raw = re.compile(r"[\wΔ‖]_\{|[A-Za-zΔ]_[A-Za-z0-9]\b|\$|\\[a-zA-Z]+")
    for c in claims.CLAIMS.values():
        for text in (c.sentence, c.statistic, c.short, c.shown.source, c.against.source, c.paper_says()):
            assert not raw.search(text), (c.key, text)


def test_chapter_6_states_the_grading_order_in_its_prose():
    assert "inside one layer over the levels supports the claim (this is decided first" in markdown("06")


def test_a_verdict_box_names_every_model_and_states_each_claim_once():
    """Chapter 9 shows three verdicts, one row each, each claim and criterion once; a chapter with a real-model
    section names every real model, the pretrained models' outcome first, and never repeats a verdict in full."""
    from dataclasses import replace

    from depthutils.book import report
    from depthutils.book.grading import not_tested
    vs = {k: not_tested(k, "this run has one model.") for k in ("scale", "cot", "difficulty")}
    text = report.verdict(vs).data
    rows = [line for line in text.splitlines() if line.startswith("| ") and "not tested" in line]
    assert len(rows) == 3 and len(set(rows)) == 3, rows
    assert text.count("*Claim (") == 3 and text.count("*Criterion") == 3
    one = replace(not_tested("logit_lens", "x"), outcome="not shown", value="0.25 [0.25, 0.25]", rows={"models": "ladder-8 (8 layers)"})
    real = {"SmolLM2-135M": replace(one, outcome="shown", value="0.70 [0.63, 0.77]")}
    text = report.verdict(one, real=real).data
    assert "**Verdict: shown** on the pretrained SmolLM2-135M; **not shown** on ladder-8 (8 layers)." in text
    assert "| Gemma 3 270M | — | not run in this build" in text and "| SmolLM2-135M |" in text
    assert text.count("*Claim:*") == 1 and text.count("*Criterion:*") == 1 and text.count(one.claim) == 1
    assert "The pretrained models did not run" in report.verdict(one, real={}).data
    assert "SmolLM2" not in report.verdict(one).data  # a chapter with no real-model section names none


def test_the_intros_table_sets_its_notation_as_math():
    intro = (ROOT / "intro.md").read_text()
    for line in intro.splitlines():
        if line.startswith("|"):
            outside = re.sub(r"\$[^$]*\$|`[^`]*`", "", line)
            assert not re.search(r"_\{|[A-Za-zΔ]_[a-z0-9]\b", outside), line


def test_the_instructors_page_rates_and_times_every_exercise_and_starts_with_setup():
    """One row per implement-it exercise (and chapter 5's prose 5.3) with its module's difficulty · importance on
    one line and our estimate of its minutes; the 90-minute plan opens with the setup and its smoke test; the skip
    list names every chapter's real-model and reviewer sections by their headings."""
    from depthutils.teaching import exercises

    text = (ROOT / "instructors.md").read_text()
    rows = {m.group(1): m.groups()[1:] for m in re.finditer(
        r"^\| (\d+\.\d) \| (.*?) \| (\d · \d|—) \| (\d+) \|$", text, flags=re.M)}
    assert set(rows) == {ex.number for ex in exercises.EXERCISES.values()} | {"5.3"}, set(rows)
    for ex in exercises.EXERCISES.values():
        what, rating, minutes = rows[ex.number]
        assert f"`{ex.id}`" in what and rating == f"{ex.difficulty} · {ex.importance}" and int(minutes) > 0, ex.number
    assert "our estimate" in text and "5 is the hardest, or the most important" in text
    plan = text.split("## A 90-minute session")[1]
    first = [line for line in plan.splitlines() if line.startswith("| 0–")][0]
    assert "Setup" in first and "python -m depthutils run 00" in first and "pip install -r requirements.txt" in first
    skip = text.split("## What to skip in class")[1].split("\n## ")[0]
    for num in chapters():
        headings = [h for h in re.findall(r"^## (.*)$", markdown(num), flags=re.M)
                    if h.startswith(("On real pretrained models", "A reviewer's question"))]
        for h in headings:
            assert f"*{h}*" in " ".join(skip.split()), (num, h)
