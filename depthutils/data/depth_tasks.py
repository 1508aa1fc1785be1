"""Few-shot task families for chapter 6's depth score on real pretrained models, and the calibrated choice
of families and levels per model (:func:`tasks_for`).

The ladder's zero-shot families (``"addition"``, ``"multihop"``) are the embedded models' own training
format; a pretrained model needs to be shown the format first. Each prompt here starts with
:data:`SHOTS` solved examples of its own level, one per line, then the question; the answer follows
with a leading space (``"… = 57\\n23 + 4 ="`` then ``" 27"``), as it would in running text.
"""
from __future__ import annotations

import random

from depthutils import data
from depthutils.core.errors import DepthError
from depthutils.core.prompts import Prompt
from depthutils.ladder.registry import is_embedded

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
        own = {h["question"] for h in r["single_hops"]}
        ex = []
        while len(ex) < shots:  # single hops of other cases that are none of this case's hops (cases share hops)
            h = rows[rng.randrange(len(rows))]["single_hops"][rng.randrange(4)]
            if h["question"] not in own and h not in ex:
                ex.append(h)
        context = "".join(f"Question: {h['question']}\nAnswer: {h['answer']}\n\n" for h in ex)
        out.append(Prompt.from_parts(context + f"Question: {q}\nAnswer:", " " + a, "mquake_qa", hops=hops))
    if len(out) < n:
        raise DepthError(f"MQuAKE has {len(out)} {hops}-hop questions; ask for at most that many (n={n}).")
    return out


#: the embedded (ladder) models' families (chapter 6's default): addition chains at every level, the multi-hop compositions
#: held out of their training (2 and 3 hops), MQuAKE and MATH
LADDER_TASKS = ("addition", "multihop_heldout", "mquake", "math")

#: per real model, the families and levels of :func:`tasks_for` (see its docstring for the measurements)
CALIBRATED = {
    "smollm2-135m": {"sums": (1, 2)},
    "gemma3-270m": {"sums": (1, 2)},
}

#: any other pretrained model (a hub id, a local folder): the few-shot families at every level they have, not
#: calibrated for it; the verdict counts only the levels it solves often enough (the accuracy floor)
PRETRAINED_TASKS = {"sums": tuple(SUM_LEVELS), "mquake_qa": (1, 4)}


def tasks_for(model) -> dict | tuple:
    """The depth score's task families and levels for ``model`` (a handle or a name): the calibrated
    ``{family: levels}`` of :data:`CALIBRATED` for the book's real models, :data:`LADDER_TASKS` for an
    embedded (ladder) model, whose facts are the ladder's own, and :data:`PRETRAINED_TASKS` for any other
    model, which knows real facts only.

    Chosen by measurement, so that at least two levels of a family are solved often enough to count
    (greedy accuracy at or above :data:`depthutils.book.claim_table.ACCURACY_FLOOR`, 25%, at 20 problems per
    level). Greedy accuracy with :func:`depthutils.measures.depth_score.accuracies` (the score's own judge),
    4 examples before each problem, 40 problems per level and seed (seeds 0 and 1 for SmolLM2, 0 for
    Gemma; 2 CPU threads, fp32 dequantized weights, the tokenizer's start token prepended):

    ======================  ==========  ==========  ==========  ============  ============
    model                   sums 1      sums 2      sums 3      mquake_qa 1   mquake_qa 4
                            (d + d)     (dd + d)    (dd + dd)   (1 hop)       (4 hops)
    ======================  ==========  ==========  ==========  ============  ============
    SmolLM2-135M (seed 0)   75%         35%         35%         20%           12%
    SmolLM2-135M (seed 1)   65%         38%         25%         22%           10%
    Gemma 3 270M (seed 0)   78%         48%         0%          32%           10%
    ======================  ==========  ==========  ==========  ============  ============

    The chapter's own run (seed 123, 20 problems per level, :func:`depthutils.measures.depth_score.depth_score` with
    these levels) solved sums 1 / sums 2 at 60% / 20% on SmolLM2 and 65% / 35% on Gemma: SmolLM2's level 2
    lies near the floor (20–38% over three samples), so its verdict can read "not tested" at N = 20, with
    the accuracies in the note.

    Two-digit plus two-digit sums swing with the sample (SmolLM2 6/12 and 1/12 solved on two seeds of 12,
    Gemma 0% here and 2.5% on another sample of 40), so level 3 would often drop the family below the
    floor; levels 1 and 2 are solved on both models. MQuAKE is not counted on either: its 4-hop questions
    are solved at about chance for a guessed continent (10–12%), and SmolLM2's single hops at ~21%; pass
    ``{"mquake_qa": (1, 4)}`` to see its accuracy table and its "not counted" line in the verdict. The
    ladder's zero-shot families give a pretrained model no format to follow, and P1's MATH levels are far
    beyond a 135M/270M model.
    """
    name = model if isinstance(model, str) else getattr(model, "name", "")
    if name in CALIBRATED:
        return dict(CALIBRATED[name])
    return LADDER_TASKS if is_embedded(model) else dict(PRETRAINED_TASKS)
