"""What a claim of the claim table is (:mod:`depthutils.book.claim_table` holds the claims themselves): its
thresholds with their sources, its rows in the intro's overview, and the claim with its statistic and grading rule
in words."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["LEVEL", "Threshold", "Headline", "Claim"]

#: the bootstrap's level
LEVEL = 0.95


@dataclass(frozen=True)
class Threshold:
    """A threshold and where its number comes from (``value`` None: computed from the run, as ``source`` says)."""

    value: float | None
    source: str


@dataclass(frozen=True)
class Headline:
    """A claim's row in the intro's overview: the claim and the paper's value in a few words, the glue name of the
    verdict's outcome (``"verdict"``, or ``"verdict_<tag>"`` for a chapter's second verdict), whether the real models
    run it, its chapter where that is not the claim's (chapter 5 grades chapter 4's claim), and, for a reviewer's
    question, the question as the overview's second table asks it."""

    words: str
    paper: str | Callable[[], str]
    glue: str = "verdict"
    real: bool = False
    chapter: str = ""
    question: str = ""  # a reviewer's row: the question, worded so that *shown* answers it yes, with both answers


@dataclass(frozen=True)
class Claim:
    """One claim of a paper, the statistic that tests it and the thresholds that grade it."""

    key: str
    chapter: str
    paper: str
    where: str
    sentence: str   # the paper's words in quotes, or "in our words:" where the paper gives none to quote
    statistic: str  # what is computed, in words
    shown: Threshold
    against: Threshold
    fact: str = ""             # the statistic's key in the result's facts() ("{task}": one per task family)
    below: bool = True         # smaller favours the claim
    whole_layer: bool = False  # a statistic in whole-layer steps (see WHOLE_LAYER)
    paper_facts: tuple = ()    # (row, what the paper gives) for the chapter's "paper vs this run" table
    short: str = ""            # the statistic in a few words: the label of its row in that table
    #: the paper's value of the same statistic, with where it is read ("read off Fig. N" from a plot, or P2's
    #: Table 1); where no paper gives a number it says so and gives our reading, labelled "ours"; a callable
    #: computes it from P2's published table
    paper_value: str | Callable[[], str] = "—"
    #: what the claim is about, in a few words, where a chapter grades several claims (chapter 9's three
    #: questions): it names the claim's row in the chapter's "paper vs this run" table
    question: str = ""
    #: its rows in the intro's overview (:mod:`depthutils.book.overview`), in book order within their chapter
    overview: tuple[Headline, ...] = ()

    def paper_says(self) -> str:
        """:attr:`paper_value`, computed if it is computed from the paper's table."""
        return self.paper_value() if callable(self.paper_value) else self.paper_value

    def criterion(self, shown: float | None = None, against: float | None = None, fmt: str = ".2f") -> str:
        """The grading rule in words, with this run's threshold values."""
        s = self.shown.value if shown is None else shown
        a = self.against.value if against is None else against
        side, past = ("at or below", "wholly above") if self.below else ("at or above", "wholly below")
        return (f"{self.statistic}, with its {100 * LEVEL:.0f}% bootstrap interval over prompts: shown if the interval "
                f"lies {side} {s:{fmt}} ({self.shown.source}); not shown if it lies {past} {a:{fmt}} "
                f"({self.against.source}); mixed otherwise.")
