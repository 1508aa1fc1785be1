"""Numbers as the prose prints them (depthutils.core.numbers), and the formatters of the book that use them: each
case printed a defect a reader met (a negative zero, a point outside its interval, a Python list, ``1e+00``,
``64.0`` evaluations, "never" for an undefined difference) before the formatter went through the module."""
from __future__ import annotations

import math

import numpy as np

from depthutils.core.numbers import as_shown, enclose, interval, listing, number, numbered, plain, rounded, significant


def test_no_negative_zero_in_any_format():
    assert number(-0.001) == "0.00" and number(-0.001, "+.2f") == "+0.00" and number(-0.0004, "+.3f") == "+0.000"
    assert number(np.float32(-1e-5), ".3f") == "0.000" and number(-0.001, ".0%") == "0%"
    assert number(-0.01) == "-0.01" and number(-1e-9, ".1e") == "-1.0e-09"  # a negative number keeps its sign
    assert number(None) == number(float("nan")) == "undefined" and number(None, missing="—") == "—"


def test_an_interval_holds_its_point():
    # chapter 9 printed "kl +0.00 [−0.02, −0.00]": a percentile interval of a discrete statistic left out its point
    assert interval(0.0, -0.02, -0.001, "+.2f") == "+0.00 [-0.02, +0.00]"
    assert interval(0.8, 0.61, 0.77) == "0.80 [0.61, 0.80]" and interval(0.5, 0.6, 0.7) == "0.50 [0.50, 0.70]"
    assert enclose(0.8, 0.61, 0.77) == (0.61, 0.8) and enclose(None, 0.1, 0.2) == (0.1, 0.2)
    assert enclose(0.5, None, None) == (None, None)
    # chapter 10 printed "depth score −0.000 [−0.03, +0.03]"
    assert interval(-0.0004, -0.03, 0.03, "+.3f", "+.2f") == "+0.000 [-0.03, +0.03]"
    assert interval(0.66) == "0.66" and interval(0.66, float("nan"), 0.7) == "0.66" and interval(None) == "undefined"


def test_an_interval_of_zero_width_is_printed_once():
    from depthutils.core.numbers import span

    # chapter 9's table printed "0 (0.25) [0.25–0.25]", a verdict "0.281 [0.281, 0.281]"
    assert interval(0.281, 0.281, 0.281, ".3f") == "0.281 (interval of zero width)"
    assert interval(0.25, 0.2504, 0.2496) == "0.25 (interval of zero width)"  # ends that print alike
    assert interval(0.281, 0.281, 0.281, ".3f", ".2f") == "0.281 [0.28] (zero width)"
    assert span(0.25, 0.25, ".2f", "–") == "[0.25] (zero width)" and span(0.25, 0.38, ".2f", "–") == "[0.25–0.38]"
    assert span(0.5, 0.75) == "[0.50, 0.75]" and interval(0.25, 0.25, 0.26) == "0.25 [0.25, 0.26]"


def test_counts_and_small_numbers_read_as_numbers():
    assert plain(64.0) == "64" and plain(37.5) == "37.5" and plain(27.221) == "27.2" and plain(-0.01) == "0"
    assert rounded(256.0) == 256 and isinstance(rounded(256.0), int) and rounded(37.53) == 37.5
    assert rounded(None) is None and rounded(float("nan")) is None and math.copysign(1, rounded(-0.01)) == 1
    # chapter 0 printed "raw module outputs: 1e+00"
    assert significant(1.0) == "1" and significant(0.3) == "0.3" and significant(20) == "20"
    assert significant(1e-6) == "1e-06" and significant(0.0032, 2) == "0.0032" and significant(0) == "0"
    # chapter 0's verdict printed "with the raw module outputs instead: 6.0e+00": a format may be a function
    two = lambda x: significant(x, 2)  # noqa: E731
    assert interval(6.0, 5.04, 7.5, two) == "6 [5, 7.5]" and interval(1e-6, 1e-6, 2e-6, two) == "1.0e-06 [1.0e-06, 2.0e-06]"
    assert number(-1e-9, lambda x: format(x, ".2f")) == "0.00"
    # chapter 5's table of integration rules printed "0.001000", "0.310000" and "1.5000" in one column
    assert [significant(x, 2) for x in (0.001, 0.31, 7.1e-05, 1.5, 0.0028)] == ["0.001", "0.31", "7.1e-05", "1.5", "0.0028"]


def test_lists_read_as_prose():
    # chapter 2 printed "layer(s) [7]", chapter 7 glued "[0, 10, 11, 13, 14, 20, 29]"
    assert listing([0, 10, 11, 13, 14, 20, 29]) == "0, 10, 11, 13, 14, 20 and 29"
    assert listing([7]) == "7" and listing([]) == "" and listing(["a", "b"], "or") == "a or b"
    assert numbered("layer", [7]) == "layer 7" and numbered("layer", [0, 10, 29]) == "layers 0, 10 and 29"
    assert numbered("match", [1, 2], "matches") == "matches 1 and 2" and numbered("layer", []) == ""


def test_a_glued_fact_reads_as_prose():
    # chapter 6 printed "the difference is never" for an undefined difference
    assert as_shown(None) == "undefined" and as_shown(float("nan")) == "undefined"
    assert as_shown(None, "never") == "never"
    assert as_shown([1, 1, 15]) == "1, 1 and 15" and as_shown([1.4, None]) == "1.4 and undefined"
    assert as_shown([]) == "none"
    assert repr(as_shown(-0.0)) == "0.0"
    assert as_shown(0.25) == 0.25 and as_shown("shown") == "shown" and as_shown(3) == 3


def test_the_books_formatters_use_them(monkeypatch):
    from depthutils.book import report
    from depthutils.book.claim_table import CLAIMS
    from depthutils.book.claims.objectives import cell
    from depthutils.book.grading import grade, interval_text

    glued = {}
    monkeypatch.setattr(report, "_glue", lambda name, value, display: glued.update({name: value}))
    report.glue_facts({"diff": None, "structural": [7], "gap": -0.0}, "od")
    assert glued == {"od_diff": "undefined", "od_structural": "7", "od_gap": 0.0}
    assert math.copysign(1, glued["od_gap"]) == 1  # glued "0.0", not "-0.0"
    assert "-0.00" not in CLAIMS["difficulty"].paper_says()  # P2's Table 1 gave "overlap -0.00"

    assert interval_text(0.0, -0.02, -0.001, "+.2f") == "+0.00 [-0.02, +0.00]"
    assert cell(-0.0004, (-0.03, 0.03), "+.3f") == "+0.000 [−0.03, +0.03]"
    assert cell(0.449, (0.38, 0.52)) == "0.449 [0.38, 0.52]" and cell(None, (None, None)) == "undefined"
    assert cell(-0.25, (-0.25, -0.25), ".2f") == "−0.25 (interval of zero width)"
    assert interval(-0.0001, -0.05, -0.01, "+.3f") == "+0.000 [-0.050, +0.000]"  # the solved split's format
    # the grade reads the interval it prints: a point past the threshold keeps it from "shown"
    assert grade(0.6, 0.2, 0.4, 0.5, 1.0) == "mixed" and grade(0.3, 0.2, 0.4, 0.5, 1.0) == "shown"


def test_the_prose_of_the_measurements_uses_them():
    from depthutils.measures.future_effects_result import FutureEffectsResult
    from depthutils.measures.residual_stream import ResidualStreamResult

    L = 4
    fe = FutureEffectsResult(meta={"params": {"mode": "future"}}, layer_effect=np.triu(np.ones((L, L)), 1),
                             output_effect=np.array([0.4, 0.3, 0.2, 0.0]))
    assert "(left out: layer 3, 0 by construction)" in fe.findings()
    rs = ResidualStreamResult(meta={}, error=np.full(2, 1e-8), raw_error=np.array([0.2, 1.0]),
                              sink=np.array([0.1, 0.1]), uniform=np.array([0.03, 0.03]),
                              norm0=np.array([5.0, 6.0, 7.0]), norm_rest=np.ones(3))
    assert "at most 1e-06 (raw module outputs: 1);" in rs.findings()


def test_the_p2_table_prints_a_zero_width_interval_once():
    from depthutils.analysis.p2_table import table_markdown

    table = table_markdown(["gsm8k"], [("m", 4, [(0, 0.25, (0.25, 0.25)), (1, 0.25, (0.25, 0.38))])])
    assert "| m | 4 | 0 (0.25) [0.25] (zero width) | 1 (0.25) [0.25–0.38] |" in table
