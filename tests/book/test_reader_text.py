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


def test_every_paper_is_cited_with_a_link():
    bib = (ROOT / "references.bib").read_text()
    entries = re.findall(r"@\w+\{(\w+),(.*?)\n\}", bib, flags=re.S)
    assert {k for k, _ in entries} == {"csordas2025depth", "hu2025effective"}
    for key, body in entries:
        assert re.search(r"url\s*=\s*\{https://arxiv\.org/abs/\d{4}\.\d{5}\}", body), key
    intro = (ROOT / "intro.md").read_text()
    assert "https://arxiv.org/abs/2505.13898" in intro and "https://arxiv.org/abs/2512.14064" in intro


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
