"""Numbers as the book's prose prints them: no negative zero, an interval that holds its point, counts without a
decimal point, and lists of layers in words.

Every interval the book prints goes through :func:`interval`, whose ends are :func:`enclose`'s: a percentile
bootstrap interval of a statistic that takes few values (a difference of layer indices, a max over prompts) can
leave out its own point estimate, and the book then reports the smallest interval that holds both. An interval
whose ends print alike (every resample gave one value) is printed once, with the words "zero width".

A model's own strings (its start token ``<bos>``, a prompt) go into a page's Markdown or HTML through :func:`literal`,
so that a browser shows them instead of taking them for tags.
"""
from __future__ import annotations

import html
import math
import re

__all__ = ["number", "enclose", "span", "interval", "plain", "rounded", "significant", "listing", "numbered", "as_shown",
           "literal"]

#: a formatted number whose every digit is 0 behind a minus sign: ``-0.00``, ``-0.0e+00``, ``-0%``
_NEGATIVE_ZERO = re.compile(r"\s*-[0.]+(e[+-]?\d+)?%?\s*")


def _missing(x) -> bool:
    """None or NaN (of any numeric type)."""
    try:
        return x is None or math.isnan(x)
    except TypeError:
        return False


def number(x, fmt=".2f", missing: str = "undefined") -> str:
    """``x`` formatted with ``fmt``, a format spec or a function of the number (:func:`significant`), never as a
    negative zero (``-0.001`` reads ``0.00``, or ``+0.00`` with a sign in ``fmt``); ``missing`` for None or NaN."""
    if _missing(x):
        return missing
    show = fmt if callable(fmt) else (lambda v: format(v, fmt))
    text = show(x)
    return show(0.0) if _NEGATIVE_ZERO.fullmatch(text) else text


def enclose(value, lo, hi) -> tuple:
    """``(lo, hi)`` widened to hold ``value``: the smallest interval that contains both the bootstrap interval and
    its point estimate. Ends that are None or NaN, or a missing ``value``, come back unchanged."""
    if _missing(value) or _missing(lo) or _missing(hi):
        return lo, hi
    return min(lo, value), max(hi, value)


def span(lo, hi, fmt=".2f", sep: str = ", ") -> str:
    """``"[0.61, 0.77]"``: an interval's ends formatted with ``fmt`` (as :func:`number` takes) and joined by ``sep``;
    ``"[0.25] (zero width)"`` where both ends print alike, never ``"[0.25, 0.25]"``."""
    a, b = number(lo, fmt), number(hi, fmt)
    return f"[{a}] (zero width)" if a == b else f"[{a}{sep}{b}]"


def interval(value, lo=None, hi=None, fmt=".2f", ends=None, missing: str = "undefined") -> str:
    """``"0.66 [0.61, 0.77]"``: ``value`` formatted with ``fmt`` and its interval's ends with ``ends`` (default
    ``fmt``; each a format spec or a function, as :func:`number` takes), the interval widened to hold the value (:func:`enclose`), no negative zero anywhere; ``"0.66"`` without
    an interval (an end None or NaN), ``"0.25 (interval of zero width)"`` where both ends print as the value does
    (else the ends by :func:`span`), and ``missing`` for a missing value."""
    if _missing(value):
        return missing
    text = number(value, fmt)
    if _missing(lo) or _missing(hi):
        return text
    lo, hi = enclose(value, lo, hi)
    if number(lo, ends or fmt) == number(hi, ends or fmt) == text:
        return f"{text} (interval of zero width)"
    return f"{text} {span(lo, hi, ends or fmt)}"


def plain(x, digits: int = 1, missing: str = "undefined") -> str:
    """``x`` rounded to ``digits`` decimals with no trailing zero: ``64.0`` reads ``64``, ``37.50`` reads ``37.5``;
    a count stays an integer."""
    if _missing(x):
        return missing
    text = number(float(x), f".{digits}f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def rounded(x, digits: int = 1):
    """``x`` rounded to ``digits`` decimals, an ``int`` where that is whole (``64.0`` is ``64``: a count prints
    without a decimal point), never a negative zero; None for None or NaN."""
    if _missing(x):
        return None
    r = round(float(x), digits) + 0.0
    return int(r) if r.is_integer() else r


def significant(x, digits: int = 1) -> str:
    """``x`` to ``digits`` significant digits as a reader reads it: decimals from 0.001 up (``1``, ``0.3``, ``20``),
    scientific notation below (``1e-06``), never ``1e+00``."""
    if _missing(x):
        return "undefined"
    if x == 0 or abs(x) >= 1e-3:
        return plain(float(f"{x:.{digits}g}"), max(0, digits - 1 - math.floor(math.log10(abs(x)))) if x else 0)
    return number(x, f".{digits - 1}e")


def listing(items, conjunction: str = "and") -> str:
    """``"0, 10, 11 and 29"``: the items in words, the last two joined by ``conjunction``; "" for none."""
    items = [str(i) for i in items]
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


def numbered(word: str, items, plural: str | None = None) -> str:
    """``"layer 7"``, ``"layers 0, 10 and 29"``: ``word`` (or ``plural``, default ``word + "s"``) before the
    :func:`listing` of the items; "" for none."""
    items = list(items)
    if not items:
        return ""
    return f"{word if len(items) == 1 else plural or word + 's'} {listing(items)}"


def as_shown(value, missing: str = "undefined"):
    """A fact as prose shows it: None or NaN as the word ``missing``, a negative zero as ``0.0``, a list or tuple as
    the :func:`listing` of its items so shown ("none" when empty); any other value as it is."""
    if _missing(value):
        return missing
    if isinstance(value, (list, tuple)):
        return listing(as_shown(v, missing) for v in value) or "none"
    if isinstance(value, float) and value == 0:
        return 0.0
    return value


def literal(text) -> str:
    """``text`` as a Markdown or HTML output shows it, character for character: ``<bos>`` reads ``&lt;bos&gt;`` in the
    source, so that the browser shows the token instead of taking it for a tag and dropping it. Markdown keeps an
    entity as the character it stands for, so one escaping serves both; text/plain (a print, a ``{glue:text}``) is
    escaped by the page and needs none."""
    return html.escape(str(text))
