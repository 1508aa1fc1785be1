"""Few-shot task families for chapter 6's depth score on real pretrained models, and the calibrated choice
of families and levels per model (:func:`tasks_for`).

The ladder's zero-shot families (``"addition"``, ``"multihop"``) are the embedded models' own training
format; a pretrained model needs to be shown the format first. Each prompt here starts with
:data:`SHOTS` solved examples of its own level, one per line, then the question; the answer follows
with a leading space (``"… = 57\\n23 + 4 ="`` then ``" 27"``), as it would in running text.
"""
from __future__ import annotations

import random

from . import data
from .errors import DepthError
from .prompts import Prompt

#: solved examples before each question
SHOTS = 4

#: ``"sums"`` levels: (digits of the first operand, digits of the second)
SUM_LEVELS = {1: (1, 1), 2: (2, 1), 3: (2, 2)}


def _operand(rng: random.Random, digits: int) -> int:
    return rng.randint(0, 9) if digits == 1 else rng.randint(10 ** (digits - 1), 10 ** digits - 1)


def sums(level: int, n: int, seed: int = 0, shots: int = SHOTS) -> list[Prompt]:
    """``n`` few-shot additions of level 1 (one digit + one digit), 2 (two digits + one) or 3 (two + two),
    each after ``shots`` solved ones of the same level; answer ``" 27"``. Seeded per level."""
    if level not in SUM_LEVELS:
        raise DepthError(f"sums has levels {sorted(SUM_LEVELS)} (digits {SUM_LEVELS}), got level={level!r}.")
    data.check_n(n)
    rng = random.Random(f"sums-{seed}-{level}")
    da, db = SUM_LEVELS[level]
    out = []
    for _ in range(n):
        pairs = [(_operand(rng, da), _operand(rng, db)) for _ in range(shots + 1)]
        context = "".join(f"{a} + {b} = {a + b}\n" for a, b in pairs[:-1]) + f"{pairs[-1][0]} + {pairs[-1][1]} ="
        out.append(Prompt.from_parts(context, f" {sum(pairs[-1])}", "sums", level=level))
    return out


def mquake_qa(hops: int, n: int, seed: int = 0, shots: int = SHOTS) -> list[Prompt]:
    """``n`` MQuAKE questions with 1 or 4 hops as P1's ``"Question: …\\nAnswer:"``, each after ``shots``
    solved single-hop questions (``"Question: …\\nAnswer: …\\n\\n"``) drawn from the other cases, so no
    example answers a hop of its own question."""
    if hops not in (1, 4):
        raise DepthError(f"The local MQuAKE subset has 1- and 4-hop questions; hops={hops!r} is not available.")
    data.check_n(n)
    rows = data.load_rows("MQuAKE-hard.json")
    rng = random.Random(f"mquake_qa-{seed}-{hops}")
    order = list(range(len(rows)))
    rng.shuffle(order)
    out = []
    for k, i in enumerate(order):
        if len(out) >= n:
            break
        r = rows[i]
        q, a = ((r["single_hops"][k % len(r["single_hops"])]["question"], r["single_hops"][k % len(r["single_hops"])]
                 ["answer"]) if hops == 1 else (r["questions"][0], r["answer"]))
        others = [j for j in rng.sample(range(len(rows)), shots + 1) if j != i][:shots]
        ex = [rows[j]["single_hops"][rng.randrange(len(rows[j]["single_hops"]))] for j in others]
        context = "".join(f"Question: {h['question']}\nAnswer: {h['answer']}\n\n" for h in ex)
        out.append(Prompt.from_parts(context + f"Question: {q}\nAnswer:", " " + a, "mquake_qa", hops=hops))
    if len(out) < n:
        raise DepthError(f"MQuAKE has {len(out)} {hops}-hop questions; ask for at most that many (n={n}).")
    return out
