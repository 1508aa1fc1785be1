"""A real model's start token is read on the page, not swallowed: Gemma's ``<bos>`` printed into Markdown or HTML
unescaped is taken by the browser for a tag and dropped ("Position 0 holds , the start token").

:func:`vanished_start_tokens` reads one rendered page as a browser does (tags dropped, entities decoded) and reports
every sentence that names the start token with nothing before it, and every expected token the text lacks.
"""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt
from test_book import HTML, built_book

from depthutils.book import overview, realruns
from depthutils.book.runner import ROOT, chapters
from depthutils.core.numbers import literal
from depthutils.models import start_token

#: elements whose text a reader never reads
SKIP = {"head", "script", "style", "svg", "math"}
#: elements that end a line of text (their neighbours' words do not run together)
BLOCKS = {"p", "div", "pre", "li", "td", "th", "br", "summary", "details", "figcaption", "h1", "h2", "h3", "h4"}
#: the sentence that names the start token (:func:`depthutils.models.start_token.describe`)
NAMED = re.compile(r"holds(.{0,60}?), the start token")


class _Text(HTMLParser):
    """A page's text as the browser has it: a tag it does not know (``<bos>``) is dropped with the other tags,
    entities (``&lt;bos&gt;``) are decoded; text in a collapsed ``<details>`` counts (one click shows it)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.skipping, self.parts = 0, []

    def handle_starttag(self, tag, attrs):
        if tag in SKIP:
            self.skipping += 1
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in SKIP and self.skipping:
            self.skipping -= 1

    def handle_data(self, data):
        if not self.skipping:
            self.parts.append(data)


def page_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    parser.close()
    return re.sub(r"\s+", " ", "".join(parser.parts)).strip()


def vanished_start_tokens(html: str, tokens=()) -> list[str]:
    """What a reader cannot read: each "holds …, the start token" with no token before the comma, and each of
    ``tokens`` (the start tokens of the real models the page ran) missing from the page's text."""
    text = page_text(html)
    bad = [f"a vanished start token: {text[max(0, m.start() - 30):m.end()]!r}" for m in NAMED.finditer(text)
           if not m.group(1).strip()]
    return bad + [f"the start token {t!r} is not on the page" for t in tokens if t not in text]


def test_the_check_catches_a_token_taken_for_a_tag():
    raw = "<p>Position 0 holds <bos>, the start token, which no measurement intervenes on.</p>"
    assert page_text(raw) == "Position 0 holds , the start token, which no measurement intervenes on."
    assert vanished_start_tokens(raw)[0].startswith("a vanished start token")
    assert vanished_start_tokens(raw, ["<bos>"])[1] == "the start token '<bos>' is not on the page"
    # the section's collapsed details, which escape it (depthutils.core.numbers.literal), pass
    shown = realruns.details("Position 0 holds <bos>, the start token (prepend_bos auto: measured).", []).data
    assert vanished_start_tokens(shown, ["<bos>"]) == [] and "&lt;bos&gt;" in shown
    # a Markdown output, as myst-nb renders it (GFM: raw HTML passes through): unescaped it vanishes, escaped it reads
    sentence = "Position 0 holds {}, the start token, which no measurement intervenes on."
    gfm = MarkdownIt("gfm-like")
    assert vanished_start_tokens(gfm.render(sentence.format("<bos>")), ["<bos>"])
    assert vanished_start_tokens(gfm.render(sentence.format(literal("<bos>"))), ["<bos>"]) == []
    # SmolLM2's tokens open with "<|", which no browser takes for a tag; escaped or not, they are read
    assert vanished_start_tokens("<p>Position 0 holds <|endoftext|>, the start token.</p>", ["<|endoftext|>"]) == []


def _start_of(name: str) -> str | None:
    """The token that position 0 holds on real model ``name``, as measured on this machine (None: not measured, or
    no start token)."""
    doc = start_token.recorded(name)
    if doc is None:
        return None
    value = doc["values"][doc["choice"]]
    return doc["tokens"]["bos"] if value is True else value or None


@pytest.mark.book  # it builds the book (once per run, shared with the browser tests)
def test_every_start_token_is_read_on_the_rendered_pages():
    """Every page of the built book: no sentence names a start token that is not there; every chapter with a
    real-model section shows the start token of each real model it ran."""
    built_book()
    ran = overview.read_run(ROOT / "_build" / "src" / "chapters")
    bad = []
    for page in sorted(HTML.rglob("*.html")):
        tokens = []
        num = page.stem[:2]
        if page.parent.name == "chapters" and num in chapters() and num in realruns.runs():
            tokens = [_start_of(name) for name in realruns.TITLES
                      if ran.get(num, {}).get(f"verdict_{realruns.slug(name)}", "not run") != "not run"]
        bad += [f"{page.relative_to(HTML)}: {p}" for p in vanished_start_tokens(page.read_text(), filter(None, tokens))]
    assert not bad, "\n".join(bad)
