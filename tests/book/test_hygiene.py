"""The numbers of the rendered book read as prose: every page's visible text, checked for what a reader should never
meet.

:func:`hygiene_problems` reads one rendered page (code, math and the exercises' solutions left out: code may hold
``None`` or ``nan`` rightly) and reports a build machine's path, a negative zero, the words ``nan`` and ``None``, a
Python list of numbers, a number in scientific notation with a non-negative exponent, a count with a decimal point,
and a point that lies outside its own interval.
"""
from __future__ import annotations

import re
from decimal import Decimal
from html.parser import HTMLParser

import pytest
from test_book import HTML, built_book

#: elements whose text is not prose: code, math, scripts, and the exercises' (collapsed) solutions
SKIP_TAGS = {"head", "pre", "code", "script", "style", "math", "svg", "mjx-container", "textarea"}
SKIP_CLASSES = {"highlight", "math", "MathJax", "MathJax_Preview", "solution"}
#: elements that end a line of text (their neighbours' words do not run together)
BLOCKS = {"p", "div", "li", "ul", "ol", "td", "th", "tr", "table", "h1", "h2", "h3", "h4", "h5", "h6", "section",
          "figure", "figcaption", "dt", "dd", "dl", "blockquote", "details", "summary", "nav", "header", "footer",
          "main", "article", "aside", "caption", "label", "button"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}

#: a printed number: sign (ASCII or Unicode minus), digits, decimals, exponent, percent
NUM = r"[−+-]?\d+(?:\.\d+)?(?:e[+−-]?\d+)?%?"
PATH = re.compile(r"/tmp/|/work/|/root/|/home/|_build/|site-packages")
NEGATIVE_ZERO = re.compile(r"(?<![\w.])[−-]0\.0+(?:e[+−-]?\d+)?(?![\d])")
WORD = re.compile(r"\b(?:nan|NaN|NAN|None)\b(?! of\b)")
#: three numbers or more in brackets, or numbers in brackets after "layer" (one alone is also a citation: "[4]")
LIST = re.compile(rf"\[\s*{NUM}(?:\s*,\s*{NUM}){{2,}}\s*\]"
                  rf"|(?<![\w.])(?:layers?|layer\(s\)) \[\s*{NUM}(?:\s*,\s*{NUM})*\s*\]")
EXPONENT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?e\+\d+\b")
COUNT = re.compile(r"(?<![\w.])\d+\.0+ (?:evaluations|prompts|problems|layers|tokens|seeds|steps|times|passes)\b")
#: ``x [lo, hi]`` and ``x (95% bootstrap interval lo–hi)`` / ``… interval over prompts lo to hi``
INTERVALS = [re.compile(rf"(?<![\w.]){'(?P<x>' + NUM + ')'}\s*\[(?P<lo>{NUM}),\s*(?P<hi>{NUM})\]"),
             re.compile(rf"(?<![\w.]){'(?P<x>' + NUM + ')'}\s*[(;,]\s*(?:\d+% )?(?:bootstrap )?interval"
                        rf"(?: over \w+)?:?\s+(?P<lo>{NUM})\s*(?:–|to)\s*(?P<hi>{NUM})")]


class _Visible(HTMLParser):
    """The text of a page a reader sees as prose, one line per block element."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []  # open elements: (tag, inside a skipped element)
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            self.parts.append("\n" if tag == "br" else "")
            return
        classes = set((dict(attrs).get("class") or "").split())
        skip = tag in SKIP_TAGS or bool(classes & SKIP_CLASSES) or (bool(self.stack) and self.stack[-1][1])
        self.stack.append((tag, skip))
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                skipped, outer = self.stack[i][1], i > 0 and self.stack[i - 1][1]
                del self.stack[i:]
                if skipped and not outer:
                    self.parts.append(" ")  # left-out code stands for a word
                break
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not (self.stack and self.stack[-1][1]):
            self.parts.append(data)


def visible_text(page: str) -> str:
    """The prose of one rendered HTML page: no code, math, script, style or exercise solution."""
    parser = _Visible()
    parser.feed(page)
    parser.close()
    lines = (re.sub(r"[ \t\xa0\u202f]+", " ", line).strip() for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def _value(s: str) -> float:
    return float(s.replace("−", "-").rstrip("%"))


def _half_unit(s: str) -> float:
    """Half a unit in the last printed digit of ``s``: how far the printed number may lie from its value."""
    mantissa, _, exponent = s.replace("−", "-").rstrip("%").lower().partition("e")
    return 0.5 * float(Decimal(1).scaleb(Decimal(mantissa).as_tuple().exponent + int(exponent or 0)))


def outside(x: str, lo: str, hi: str) -> bool:
    """Whether the printed point ``x`` lies outside the printed interval ``[lo, hi]``, beyond the rounding of each."""
    if x.endswith("%") != lo.endswith("%"):
        return False
    return (_value(x) + _half_unit(x) < _value(lo) - _half_unit(lo) - 1e-12
            or _value(x) - _half_unit(x) > _value(hi) + _half_unit(hi) + 1e-12)


def _snippet(text: str, m: re.Match) -> str:
    return text[max(0, m.start() - 50): m.end() + 30].replace("\n", " ⏎ ")


def hygiene_problems(text: str) -> list[str]:
    """What a reader of one rendered page (its HTML, ``text``) should not meet in its prose, one entry a problem:
    its kind and the text around it."""
    prose = visible_text(text)
    found = []
    for kind, pattern in [("path", PATH), ("negative zero", NEGATIVE_ZERO), ("nan/None", WORD),
                          ("Python list", LIST), ("exponent", EXPONENT), ("count", COUNT)]:
        found += [f"{kind}: {_snippet(prose, m)}" for m in pattern.finditer(prose)]
    for pattern in INTERVALS:
        found += [f"outside its interval: {_snippet(prose, m)}" for m in pattern.finditer(prose)
                  if outside(m["x"], m["lo"], m["hi"])]
    return found


def _page(body: str) -> str:
    return f"<html><head><title>None</title></head><body><main>{body}</main></body></html>"


#: one page body a defect kind, each with the kind it must be reported as
DEFECTS = [
    ("<p>Built from /tmp/pytest-3/random-olmo2-u58tdcjz in float32.</p>", "path"),
    ("<p>See /work/main/_build/html/index.html.</p>", "path"),
    ("<p>Loaded from .venv/lib/python3.11/site-packages/torch.</p>", "path"),
    ("<p>depth score −0.000 [−0.03, +0.03]</p>", "negative zero"),
    ("<td>overlap -0.00 (P2's Table 1)</td>", "negative zero"),
    ("<p>the mean ratio is nan here</p>", "nan/None"),
    ("<p>(“None”: not among the snapshots)</p>", "nan/None"),
    ("<p>layers [0, 10, 11, 13, 14, 20, 29] hold it</p>", "Python list"),
    ("<p>Left out: layer(s) [7], 0 by construction.</p>", "Python list"),
    ("<p>+0.07 [+0.04, +0.11] layers per layer, mean ED [1.4, 1.4, 1.8, 2.2] (shown)</p>", "Python list"),
    ("<p>raw module outputs: 1e+00</p>", "exponent"),
    ("<p>64.0 evaluations per layer</p>", "count"),
    ("<p>ratio <span class='pasted-text'>0.80</span> [0.61, 0.77]</p>", "outside its interval"),
    ("<p>kl +0.05 [−0.02, −0.01]</p>", "outside its interval"),
    ("<p>a difference of −0.20 (95% bootstrap interval −0.10 to 0.02)</p>", "outside its interval"),
    ("<p>relative depth 0.10; 95% bootstrap interval over prompts 0.20–0.40</p>", "outside its interval"),
]
#: page bodies a reader may meet: math intervals, shapes, citations, English "none", code, math and solutions
CLEAN = [
    "<p>ratio 0.66 [0.61, 0.77] and depth score 0.000 [−0.03, +0.03]; kl +0.00 [−0.02, +0.00]</p>",
    "<p>value 0.449 [0.38, 0.52] and 1.0e-06 [1.0e-06, 1.0e-06]; at most 1e-06 (raw: 1.0)</p>",
    "<p>Gauss–Legendre nodes moved from [−1, 1] to [0, 1], on <code>[-1, 1]</code>.</p>",
    "<p>a tensor [B, T, k] of shape [L, T] (Csordás et al. [2025]); as documented by Sun et al. [4]; per layer [L]."
    "</p>",
    "<p>None of the five seeds; none of the prompts; a nanosecond; Nonetheless.</p>",
    "<p>layers 0, 10, 11 and 29; layer 7; 64 evaluations; 27.2 times.</p>",
    "<p>a difference of −0.04 (95% bootstrap interval −0.10 to 0.02); 0.33; 95% bootstrap interval over prompts "
    "0.20–0.40</p>",
    "<pre>x = None  # [0, 1, 2] and -0.00</pre><div class='highlight'>nan</div><span class='math'>\\(-0.0\\)</span>",
    "<details class='solution dropdown'><p>return None when no layer qualifies</p></details>",
    "<script>var x = [1, 2, 3]; const p = '/tmp/';</script><style>.a{width:-0.0px}</style>",
]


def test_the_hygiene_check_can_fail():
    for body, kind in DEFECTS:
        problems = hygiene_problems(_page(body))
        assert [p for p in problems if p.startswith(kind + ":")], (body, problems)
    for body in CLEAN:
        assert hygiene_problems(_page(body)) == [], body


@pytest.mark.book  # it builds the book (once per run, shared with the browser tests)
def test_the_rendered_book_is_clean():
    """Every page of the built book (built once per session, as the browser tests have it) is free of them."""
    built_book()
    pages = sorted(HTML.rglob("*.html"))
    assert pages, f"no page under {HTML}"
    bad = [f"{page.relative_to(HTML)}: {p}" for page in pages for p in hygiene_problems(page.read_text())]
    assert not bad, f"{len(bad)} problems in the rendered book:\n" + "\n".join(bad)
