"""The book's one answer rule (:mod:`depthutils.core.answers`): what gives an answer, and that a greedy
decoding stopped early by ``may_give`` never changes whether it does."""
from __future__ import annotations

import random

from depthutils.core.answers import answers, given, may_give


def test_the_answer_rule():
    assert answers(" 28\n", "28") and answers("28", " 28") and answers(" Paris.", " Paris") and answers(" paris", "Paris")
    assert answers(" the Eiffel Tower", ["Tour Eiffel", "Eiffel Tower"]) and answers(" $28.", "28")
    assert not answers(" 2", "28") and not answers(" 281", "28") and not answers(" 28.5", "28")
    assert not answers(" 4/5", "4") and not answers(" 1,000", "1") and not answers(" -3", "3")
    assert not answers(" Parisian", " Paris") and not answers("x", "")
    assert given(" Yoko Ono, his wife", ["Yoko Ono"]) == " Yoko Ono"
    assert answers("So 3 + 4 = 7. The answer is 7.", "7", marker="The answer is") and \
        not answers("The answer is 71", "7", marker="The answer is") and not answers("7", "7", marker="The answer is")
    assert answers(" 4.", "4", final="4") and answers("so \\boxed{4} it is", "x", final="4")
    assert not answers(" 4x + 1", "4", final="4")


def test_may_give_never_stops_a_decoding_that_would_give_the_answer():
    """For every prefix of a text that gives the answer, ``may_give`` is True; and it is False somewhere on
    texts that cannot (so the early stop saves decoding)."""
    rng = random.Random(0)
    forms = ["28", " Paris", "Yoko Ono", "Eiffel Tower", "-3"]
    pieces = [" ", "  ", "the ", "The ", "a ", "$", "28", "2", "8", "Par", "is", "paris", "Yoko", " Ono", "Eiffel",
              " Tower", ".", ",", "\n", "-", "3", "x", "ian", "1"]
    stopped = 0
    for _ in range(4000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        for form in forms:
            if answers(text, form):
                assert all(may_give(text[:i], form) for i in range(len(text) + 1)), (text, form)
            elif not may_give(text, form):
                stopped += 1
    assert stopped > 1000
    assert may_give(" the Eif", ["Tour Eiffel", "Eiffel Tower"]) and not may_give(" 3", "28")
    assert may_give(" Z\ufffd", "Zurich")  # a character cut between two tokens: kept open


def test_the_fact_check_s_forms_aliases_case_articles_and_word_boundaries():
    assert given(" the Beatles, who", ["The Beatles", "Beatles"]) == " the Beatles"
    assert given(" Beatles.", ["The Beatles", "Beatles"]) == " Beatles"
    assert given(" united kingdom", ["United Kingdom"]) == " united kingdom"
    assert given(" Indiana", ["India"]) is None  # a longer word is another answer
    assert given("28\n", ["28"]) == "28"
    assert given("281", ["28"]) is None
    assert given(" a 2019", ["Yoko Ono", "Ono"]) is None
    assert given(" a goalkeeper.", ["goalkeeper"]) == " a goalkeeper"
    assert given(" another goalkeeper", ["goalkeeper"]) is None
