"""Every quotation verbatim, and nothing given to a paper that the papers' own words do not hold.

The papers' words are ``../shared/reference/paper_quotes.md`` beside the repository (the only source of
quotations); a statement may also rest on the project's specification or on P2's Table 1 there. The texts
checked: every field of every claim (:mod:`depthutils.book.claim_table`, its paper values computed), every string
literal of the package (verdict texts, captions, tables), every cell of the chapters and of
``bigger_models.ipynb``, and ``intro.md``, ``instructors.md``, ``using_depthutils.md``, ``README.md`` and
``CONTRIBUTING.md``. Who said what: a reviewer of P1 asked questions, so no statement is theirs; the notebook
that reproduces P1 with nnsight is NDIF's, not P1's; and every "The paper's claim" of a chapter quotes a paper or
says it is in our words.
"""
from __future__ import annotations

import ast
import csv
import json
import re
from pathlib import Path

import pytest

from depthutils.book.claim_table import CLAIMS

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
QUOTES = SHARED / "reference" / "paper_quotes.md"
SPEC = SHARED / "spec" / "measurements.md"
TABLE1 = SHARED / "reference" / "effective_depth_table1.csv"

pytestmark = pytest.mark.skipif(not QUOTES.exists(), reason="no ../shared/reference beside the repository")

#: a quotation: curly quotes only (straight quotes and backticks are code, prompts and names)
QUOTATION = re.compile(r"“([^“”]*)”")
#: a sentence that gives a paper (or its authors) a finding or a statement
ATTRIBUTION = re.compile(r"\b(?:P1|P2|Csordás et al\.|Hu et al\.|the authors|"
                         r"NDIF's\s+(?:reproduction\s+)?notebook(?:\s+of\s+P1)?)"
                         r"(?:'s\s+(?:abstract|notebook|text|appendix))?"
                         r"\s+(?:also\s+)?(?:found|finds|find|notes|note|noted|says|said|say|reports|reported|report|"
                         r"shows|showed|show|calls|called|call|reads|read)\b")
#: attributions without a quotation (by how the sentence starts), each with the sentences of paper_quotes.md or
#: of the spec that support it
SUPPORTED = {
    "P1 found no such rise for multi-hop questions":
        ("for multihop tasks, we are unable to find evidence that models are using increased depth to compose "
         "subresults in examples involving many hops",),
    "P1 calls this preliminary": ("P1 calls this preliminary: no large shared-layer model exists.",),
    "Hu et al. find that across Qwen2.5 1.5B → 32B the effective depth grows with the number of layers but its ratio":
        ("while the number of effective layers grows with model size, the effective depth ratio remains stable",
         "comparisons between base and corresponding long-CoT models show no increase in effective depth",
         "models do not dynamically use more layers for harder problems",
         "model size: the Qwen2.5 family, 1.5B to 32B;"),
    "P2 found it roughly constant across Qwen2.5 sizes":
        ("while the number of effective layers grows with model size, the effective depth ratio remains stable",),
    # the scale threshold's source: P2's words hold of the cosine ratio (its words on KL and overlap differ)
    "P2 reads as stable": ("The results show that the effective depth ratio remains remarkably stable.",),
}


#: a notebook given to P1 or its authors: the nnsight notebook that reproduces P1 is NDIF's
P1_NOTEBOOK = re.compile(r"\b(?:P1|the authors)['’]s?\s+(?:own\s+|NDIF\s+)?notebook", re.IGNORECASE)
#: a chapter's statement of the paper's claim: its first sentence, bold header included
PAPERS_CLAIM = re.compile(r"\*\*The paper['’]s claim")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _sources() -> str:
    return _norm(QUOTES.read_text(encoding="utf-8")) + "\n" + _norm(SPEC.read_text(encoding="utf-8"))


def _strings(source: str) -> list[str]:
    """Every string literal of a module's source; an f-string with each formatted value as ``{…}``."""
    out, parts = [], set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "{…}" for v in node.values))
            parts.update(id(v) for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            out.append(node.value)
    return out


def _cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]


def texts() -> list[tuple[str, str]]:
    """(where, text) for everything a reader can be shown."""
    out = []
    for c in CLAIMS.values():
        fields = [c.where, c.sentence, c.statistic, c.short, c.question, c.shown.source, c.against.source,
                  c.paper_says(), *(x for row in c.paper_facts for x in row)]
        out += [(f"claim {c.key}", t) for t in fields if t]
    for path in sorted((ROOT / "depthutils").rglob("*.py")):
        out += [(str(path.relative_to(ROOT)), s) for s in _strings(path.read_text(encoding="utf-8"))]
    for path in [*sorted((ROOT / "chapters").glob("*.ipynb")), ROOT / "bigger_models.ipynb"]:
        out += [(path.name, s) for s in _cells(path)]
    for name in ("intro.md", "instructors.md", "using_depthutils.md", "README.md", "CONTRIBUTING.md"):
        out.append((name, (ROOT / name).read_text(encoding="utf-8")))
    return out


def test_the_checks_can_fail():
    assert QUOTATION.findall("P1 says “much less”, not “about the middle”.") == ["much less", "about the middle"]
    ref = _sources()
    assert _norm("layers in the second half\n  contribute much less") in ref and "about the middle" not in ref
    assert ATTRIBUTION.search("P1 notes that the last layer or two sharpen the output")
    assert ATTRIBUTION.search("P1's notebook reads its plots as")
    assert ATTRIBUTION.search("NDIF's reproduction notebook of P1 reads its plots as")
    assert P1_NOTEBOOK.search("as P1's notebook and") and P1_NOTEBOOK.search("(P1’s NDIF notebook:")
    assert P1_NOTEBOOK.search("the authors' notebook") and not P1_NOTEBOOK.search("NDIF's reproduction notebook of P1")
    assert _reviewer_said("Reviewer: that fall is only the norm")
    assert not _reviewer_said("Ours, on a reviewer's question: x")
    claim = "**The paper's claim.** On Llama 3.1, the operand positions matter. NDIF's notebook reads “a”."
    assert _claim_sentence(claim, 0) == "**The paper's claim.** On Llama 3.1, the operand positions matter"
    assert not _quotes_a_paper_or_says_ours(_claim_sentence(claim, 0))
    ndif = "**The paper's claim.** NDIF's notebook: “all tokens are important until halfway through the network”."
    assert not _quotes_a_paper_or_says_ours(ndif)  # NDIF's words are not the paper's
    assert _quotes_a_paper_or_says_ours("**The paper's claim** (P1, Fig. 4; in our words). In Llama 3.1")
    assert not ATTRIBUTION.search("P1's phase transition") and not ATTRIBUTION.search("P2's ED_cos reads")
    assert _strings('x = (f"which {p} notes “a" \n "b”")') == ["which {…} notes “ab”"]


def test_every_quotation_is_the_papers_words_verbatim():
    ref = _norm(QUOTES.read_text(encoding="utf-8"))
    bad, unpaired = [], []
    for where, text in texts():
        if text.count("“") != text.count("”"):
            unpaired.append((where, text[:120]))
        bad += [(where, q) for q in QUOTATION.findall(text) if _norm(q) not in ref]
    assert not unpaired, f"a quotation that does not close: {unpaired}"
    assert not bad, f"quotations that paper_quotes.md does not hold verbatim: {bad}"


def _sentence(text: str, start: int) -> str:
    end = re.search(r"\.(?=\s+[A-Z*(“])|\n|\|", text[start:])
    return text[start:start + end.start()] if end else text[start:]


def test_every_attribution_to_a_paper_quotes_it_or_names_its_support():
    ref, bad = _sources(), []
    for support in (s for lines in SUPPORTED.values() for s in lines):
        assert _norm(support) in ref, support
    for where, text in texts():
        for m in ATTRIBUTION.finditer(text):
            s = _sentence(text, m.start())
            if "“" in s or any(s.startswith(k) for k in SUPPORTED):
                continue
            bad.append((where, s[:160]))
    assert not bad, f"sentences that give a paper words it does not say (quote it, or name its support): {bad}"


def test_the_last_layers_are_ours_and_the_qwen3_32b_reply_is_about_the_future_effect_map():
    said = "Layers >50 have low influence on the future layers (the bottom right triangle tip), except for the last 1-2"
    contributions = " ".join(x for row in CLAIMS["contributions"].paper_facts for x in row)
    assert "Qwen 3 32B" not in contributions and "Qwen3-32B" not in contributions and "notes" not in contributions
    rows = dict(CLAIMS["future_effects"].paper_facts)
    (label,) = [k for k in rows if "32B" in k]
    assert "OpenReview" in label and "18e" in label and said in rows[label]


def test_the_lens_claim_shows_p2s_measurement_of_its_statistic():
    """The lens claim grades the relative depth where the KL halves and the overlap passes 0.3: P2's ED_KL and
    ED_overlap ratio. Its paper value is P2's Table 1, read here with the csv module."""
    with TABLE1.open(newline="") as f:
        rows = list(csv.DictReader(f))
    tasks = ("hellaswag", "gsm8k", "aime24")
    said = CLAIMS["logit_lens"].paper_says()
    assert "P2's Table 1" in said and "P2's measurement" in said and f"{len(rows)} " in said
    for metric, name in (("kl", "KL"), ("overlap", "overlap")):
        cells = sorted((float(r[f"{metric}_{t}_ratio"]), r["model"], t) for r in rows for t in tasks)
        assert f"{name} {cells[0][0]:.2f}–{cells[-1][0]:.2f}" in said
        if round(cells[1][0], 2) != round(cells[0][0], 2):  # KL: the one cell at 0.07, named
            assert f"{cells[1][0]:.2f}–{cells[-1][0]:.2f} without its lowest cell, {cells[0][1]} on {cells[0][2]}" in said
    assert "0.75–0.95" in said and "DS-R1-Qwen-1.5B on gsm8k" in said and "overlap 0.86–0.97" in said
    for t in (CLAIMS["logit_lens"].shown, CLAIMS["logit_lens"].against):
        assert t.source.startswith("ours") and "about the middle" not in t.source, t.source


def test_a_claim_without_a_papers_number_says_so_and_gives_our_reading():
    for c in CLAIMS.values():
        said = c.paper_says()
        if "P2's Table 1" in said:
            continue
        assert ("no number" in said or said.startswith("—")) and "ours" in said, (c.key, said)


def test_chapter_4_says_where_it_departs_from_ndifs_reproduction_notebook_on_position_0():
    from depthutils.book.realruns import run_of

    captions = [s for s in _cells(ROOT / "chapters" / "04_residual_erasure.ipynb") if "{glue:figure} fig_fig6b" in s]
    for text in [*captions, run_of("04").caption]:
        departs = "NDIF's reproduction notebook of P1 erases every position, BOS included"
        assert "Position 0" in text and "never erased" in text and departs in text, text[:200]
    assert "Its erasure loop runs over every position, BOS included" in _sources()


def test_chapter_9_suggests_p2s_own_base_and_long_cot_pairs():
    """P2's appendix B pairs R1-Distill-Qwen-1.5B and -7B with Qwen2.5-Math, and -14B and -32B with Qwen2.5."""
    from depthutils.analysis.p2_table import cot_pairs

    p2 = [("Qwen/Qwen2.5-Math-1.5B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"),
          ("Qwen/Qwen2.5-Math-7B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"),
          ("Qwen/Qwen2.5-14B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"),
          ("Qwen/Qwen2.5-32B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B")]
    assert cot_pairs() == p2
    cells = _cells(ROOT / "chapters" / "09_depth_across_scale.ipynb")
    text = "\n".join(cells)
    assert not re.search(r"Qwen/Qwen2\.5-(1\.5|7)B\b(?!-)", text), "a base P2 does not pair with R1-Distill"
    assert "cot_pairs()" in text and text.count("{glue:md}`p2_pairs") >= 2
    params = next(c for c in cells if c.startswith("models = "))
    assert 'base_model = "ladder-8"' in params and 'cot_model = "ladder-8-cot"' in params  # the embedded run


def _reviewer_said(words: str) -> bool:
    """Words that give a reviewer a statement: ``"Reviewer: …"``."""
    return bool(re.match(r"\W*reviewers?['’]?s?\s*:", words, re.IGNORECASE))


def test_no_overview_row_gives_a_reviewer_a_statement():
    """P1's reviewers asked questions: every row's words say whose statement they are (P1's, P2's or ours)."""
    rows = [(c.key, h.words) for c in CLAIMS.values() for h in c.overview]
    assert not [r for r in rows if _reviewer_said(r[1]) or "Reviewer:" in r[1]], "a reviewer given a statement"
    unowned = [r for r in rows if not (re.match(r"(?:P1|P2|Ours)\b", r[1]) or "(ours)" in r[1])]
    assert not unowned, f"overview words that do not say whose statement they are: {unowned}"
    for c in CLAIMS.values():
        for h in c.overview:
            if h.question:  # a reviewer's question: the statement graded is ours
                assert h.words.startswith("Ours, on a reviewer's question: "), (c.key, h.words)


def _sources_of_text() -> list[tuple[str, str]]:
    """(where, text): every cell's source of the notebooks (their stored outputs come from the package, checked
    here as source), every module of the package whole (docstrings and comments too), and the Markdown files."""
    out = [(f"{p.name} cell {i}", s) for p in [*sorted((ROOT / "chapters").glob("*.ipynb")),
                                               *sorted(ROOT.glob("*.ipynb"))] for i, s in enumerate(_cells(p))]
    out += [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
            for p in sorted((ROOT / "depthutils").rglob("*.py"))]
    out += [(p.name, p.read_text(encoding="utf-8")) for p in sorted(ROOT.glob("*.md"))]
    return out


def test_the_reproduction_notebook_is_ndifs_not_p1s():
    bad = [(where, text[max(m.start() - 60, 0):m.end() + 60]) for where, text in _sources_of_text()
           for m in P1_NOTEBOOK.finditer(text)]
    assert not bad, f"NDIF's reproduction notebook called P1's (or its authors'): {bad}"


def _papers_words() -> str:
    """paper_quotes.md without its section on NDIF's notebook: the words of P1, its authors and reviewers, and P2."""
    text = QUOTES.read_text(encoding="utf-8")
    ndif = re.search(r"^### The NDIF notebook.*?(?=^##)", text, re.MULTILINE | re.DOTALL)
    assert ndif, "paper_quotes.md has no section on NDIF's notebook"
    return _norm(text[:ndif.start()] + text[ndif.end():])


def _claim_sentence(text: str, start: int) -> str:
    """The first sentence of a "The paper's claim" paragraph, from its bold header."""
    head = text.index("**", start + 2) + 2  # past the header's closing **
    return text[start:head] + _sentence(text, head)


def _quotes_a_paper_or_says_ours(sentence: str) -> bool:
    words = _papers_words()
    return (bool(re.search(r"\bour words\b|\bours\b", sentence))
            or any(_norm(q) in words for q in QUOTATION.findall(sentence)))


def test_every_papers_claim_quotes_the_paper_or_says_it_is_ours():
    """A chapter's "The paper's claim" either quotes P1 or P2 (not NDIF's notebook) in its first sentence or says
    that sentence is in our words."""
    found, bad = 0, []
    for path in [*sorted((ROOT / "chapters").glob("*.ipynb")), ROOT / "bigger_models.ipynb"]:
        for text in _cells(path):
            for m in PAPERS_CLAIM.finditer(text):
                found += 1
                sentence = _claim_sentence(text, m.start())
                if not _quotes_a_paper_or_says_ours(sentence):
                    bad.append((path.name, sentence[:200]))
    assert found >= 9, found
    assert not bad, f"a paper's claim that neither quotes the paper nor says it is ours: {bad}"
