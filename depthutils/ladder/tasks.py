"""Generated tasks, their text formats and the held-out rules.

Three task families, each with a *direct* format (the answer follows the
prompt) and a *cot* format (steps written out, then ``The answer is N``):

* **Addition chains** of single digits (0-9), 2 to 6 operands::

      prompt  "5 + 7 + 5 + 3 + 1 + 7 = "       answer "28"
      cot     "5 + 7 + 5 = 5 + 7 = 12 , 12 + 5 = 17 . The answer is 17"

  The prompt ends with ``"= "``; the tokenizer splits that trailing space into
  its own token, so the *last prompt token* (the space) predicts the first
  answer digit, and ``tokenize(prompt) + tokenize(answer) ==
  tokenize(prompt + answer)``.  Held out: chains with 3-6 operands whose
  prompt hashes to 0 mod 5 (about 20 %); all 100 two-operand chains are seen.

* **Word problems** (GSM8K style, small numbers, templated) with a worked
  rationale ending in ``The final answer is N``.  Held out: questions whose
  text hashes to 0 mod 5.  Held-out questions only reuse arithmetic facts,
  names and items that also appear in training questions.

* **Multi-hop questions** over a generated world of invented people, songs,
  cities and countries::

      "The spouse of the performer of Silver Rain is" -> " Mara Voss"

  All 1-hop facts are trained.  A 2- or 3-hop composition is held out when
  ``(chain, subject)`` hashes to 0 mod 5; its single facts are still trained.

Everything here is deterministic (``random.Random`` with fixed seeds, SHA-256
hashes), so any module can recompute whether an instance was held out.
"""

from __future__ import annotations

import random
import re

from depthutils.ladder.examples import HELDOUT_MOD, Example, stable_hash  # noqa: F401 (callers read them here)
from depthutils.ladder.world import (
    CHAINS,
    RELATIONS,
    build_world,
    multihop_example,
    multihop_instances,
    multihop_is_heldout,
    multihop_prompt,
    sample_multihop,
)

MIN_OPERANDS, MAX_OPERANDS = 2, 6

# --------------------------------------------------------------------------

def addition_prompt(operands) -> str:
    """``[5, 7, 5]`` -> ``"5 + 7 + 5 = "``."""
    return " + ".join(str(x) for x in operands) + " = "


def addition_is_heldout(operands) -> bool:
    """Held-out rule for addition chains (3-6 operands, ~20 %)."""
    return len(operands) >= 3 and stable_hash("add:" + addition_prompt(operands)) % HELDOUT_MOD == 0


def addition_cot(operands) -> str:
    """Running sum spelled out: ``"5 + 7 = 12 , 12 + 5 = 17 . The answer is 17"``."""
    steps, acc = [], operands[0]
    for x in operands[1:]:
        steps.append(f"{acc} + {x} = {acc + x}")
        acc += x
    return " , ".join(steps) + f" . The answer is {acc}"


def addition_example(operands, style: str = "direct") -> Example:
    """Build the addition example in ``direct`` or ``cot`` style."""
    operands = list(operands)
    total = str(sum(operands))
    cont = total if style == "direct" else addition_cot(operands)
    return Example("addition", addition_prompt(operands), cont, total,
                   dict(n=len(operands), operands=operands,
                        heldout=addition_is_heldout(operands)))


#: Sampling weights of the operand count in training.
OPERAND_WEIGHTS = {2: 0.12, 3: 0.22, 4: 0.22, 5: 0.22, 6: 0.22}


def sample_addition(rng: random.Random, style: str = "direct", heldout: bool = False) -> Example:
    """Sample a training (``heldout=False``) or held-out addition chain."""
    ns = list(OPERAND_WEIGHTS)
    if heldout:
        ns = [n for n in ns if n >= 3]
    weights = [OPERAND_WEIGHTS[n] for n in ns]
    while True:
        n = rng.choices(ns, weights)[0]
        ops = [rng.randrange(10) for _ in range(n)]
        if addition_is_heldout(ops) == heldout:
            return addition_example(ops, style)


# --------------------------------------------------------------------------
# Word problems (GSM8K style)
# --------------------------------------------------------------------------

GSM_FRAME = ('Given the following problem, reason and give a final answer to the problem.\n'
             'Problem: {question}\n'
             'Your response should end with "The final answer is [answer]" where [answer] '
             'is the response to the problem.\n\n')
PLAIN_FRAME = "Problem: {question}\nAnswer: "

_WP_NAMES = [("Tom", "he"), ("Anna", "she"), ("Ben", "he"), ("Lucy", "she"), ("Sam", "he"),
             ("Emma", "she"), ("Jack", "he"), ("Mia", "she"), ("Leo", "he"), ("Nora", "she"),
             ("Max", "he"), ("Ella", "she"), ("Paul", "he"), ("Rosa", "she")]
_WP_ITEMS = ["apples", "pencils", "marbles", "cookies", "books", "stickers", "cards", "eggs",
             "shells", "coins"]

_WP_TEMPLATES = {
    "add": ("{N} has {a} {i}. {P} buys {b} more. How many {i} does {p} have now?",
            "{N} has {a} + {b} = {r} {i}. "),
    "sub": ("{N} has {a} {i}. {P} gives {b} {i} to {M}. How many {i} does {N} have left?",
            "{N} has {a} - {b} = {r} {i} left. "),
    "together": ("{N} has {a} {i} and {M} has {b} {i}. How many {i} do they have together?",
                 "Together they have {a} + {b} = {r} {i}. "),
    "two_step": ("{N} has {a} {i}. {P} buys {b} more and then gives {c} to {M}. "
                 "How many {i} does {N} have now?",
                 "{N} has {a} + {b} = {s} {i}. Then {p} gives away {c}, so {p} has "
                 "{s} - {c} = {r} {i}. "),
    "mul": ("{N} buys {a} bags of {i}. Each bag has {b} {i}. How many {i} does {N} buy?",
            "{N} buys {a} * {b} = {r} {i}. "),
}


def _wp_numbers(kind: str, rng: random.Random) -> dict:
    if kind in ("add", "together"):
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        return dict(a=a, b=b, r=a + b)
    if kind == "sub":
        a = rng.randint(2, 18)
        b = rng.randint(1, min(a - 1, 9))
        return dict(a=a, b=b, r=a - b)
    if kind == "two_step":
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        c = rng.randint(1, min(a + b - 1, 9))
        return dict(a=a, b=b, c=c, s=a + b, r=a + b - c)
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    return dict(a=a, b=b, r=a * b)


def word_problem_is_heldout(question: str) -> bool:
    """Held-out rule for word problems (~20 % of question texts)."""
    return stable_hash("wp:" + question) % HELDOUT_MOD == 0


def _sample_word_problem_raw(rng: random.Random):
    kind = rng.choice(list(_WP_TEMPLATES))
    (name, pron), (other, _) = rng.sample(_WP_NAMES, 2)
    item = rng.choice(_WP_ITEMS)
    nums = _wp_numbers(kind, rng)
    fields = dict(N=name, M=other, P=pron.capitalize(), p=pron, i=item, **nums)
    q_tpl, r_tpl = _WP_TEMPLATES[kind]
    return kind, q_tpl.format(**fields), r_tpl.format(**fields), str(nums["r"])


def sample_word_problem(rng: random.Random, heldout: bool = False,
                        framed: bool | None = None) -> Example:
    """Sample a word problem; ``framed`` picks the GSM8K frame (random if None).

    The continuation is ``"{rationale}The final answer is {answer}"`` in both
    styles (the rationale already spells out the steps).
    """
    while True:
        kind, question, rationale, answer = _sample_word_problem_raw(rng)
        if word_problem_is_heldout(question) == heldout:
            break
    if framed is None:
        framed = rng.random() < 0.5
    frame = GSM_FRAME if framed else PLAIN_FRAME
    return Example("word_problem", frame.format(question=question),
                   f"{rationale}The final answer is {answer}", answer,
                   dict(kind=kind, question=question, framed=framed,
                        heldout=word_problem_is_heldout(question)))


#: what stands before the answer a word problem's rationale (either style) and a chain of thought end with
FINAL_MARKER = "The final answer is"
COT_MARKER = "The answer is"


def sample_task(rng: random.Random, kind: str, style: str = "direct") -> Example:
    """Sample one trained example of ``kind`` (addition/word_problem/multihop)."""
    if kind == "addition":
        return sample_addition(rng, style)
    if kind == "word_problem":
        return sample_word_problem(rng)
    if kind == "multihop":
        return sample_multihop(rng, style)
    raise ValueError(kind)


# --------------------------------------------------------------------------
# Evaluation sets
# --------------------------------------------------------------------------

def _dedup_sample(rng, sampler, k, key):
    seen, out = set(), []
    for _ in range(50 * k):
        ex = sampler(rng)
        if key(ex) not in seen:
            seen.add(key(ex))
            out.append(ex)
        if len(out) == k:
            break
    return out


def build_eval_sets(per_group: int = 100, seed: int = 7) -> dict[str, list[dict]]:
    """Deterministic evaluation sets (stored as JSONL under ``data/prompts``).

    * ``addition``: for each operand count 2-6 up to ``per_group`` chains;
      n=2 is all 100 (seen) chains, n>=3 only held-out chains.
    * ``word_problems``: ``per_group`` held-out framed word problems.
    * ``multihop``: every held-out composition, plus up to ``per_group``
      trained ones for each hop count.
    """
    rng = random.Random(seed)
    add = [addition_example([a, b]) for a in range(10) for b in range(10)]
    for n in range(3, MAX_OPERANDS + 1):
        def sampler(r, n=n):
            while True:
                ops = [r.randrange(10) for _ in range(n)]
                if addition_is_heldout(ops):
                    return addition_example(ops)
        add += _dedup_sample(rng, sampler, per_group, key=lambda e: e.prompt)
    wps = _dedup_sample(rng, lambda r: sample_word_problem(r, heldout=True, framed=True),
                        per_group, key=lambda e: e.prompt)
    mh = []
    inst = multihop_instances()
    for hops in sorted(CHAINS):
        train = list(inst[(hops, "train")])
        rng.shuffle(train)
        mh += [multihop_example(c, s) for c, s in train[:per_group]]
        mh += [multihop_example(c, s) for c, s in inst.get((hops, "heldout"), [])]

    def rows(exs):
        return [dict(task=e.task, prompt=e.prompt, answer=e.answer, **e.meta) for e in exs]
    return dict(addition=rows(add), word_problems=rows(wps), multihop=rows(mh))


def heldout_check(task: str, prompt: str) -> bool:
    """Recompute from the prompt text whether an instance was held out of training."""
    if task == "addition":
        ops = [int(x) for x in prompt.replace("=", "").split("+")]
        return addition_is_heldout(ops)
    if task == "multihop":
        for chains in CHAINS.values():
            for chain in chains:
                head = multihop_prompt(chain, "\0").split("\0")[0]
                if prompt.startswith(head) and prompt.endswith(" is"):
                    subject = prompt[len(head):-3]
                    if subject in build_world().entities[RELATIONS[chain[-1]][0]]:
                        return multihop_is_heldout(chain, subject)
        raise ValueError(f"not a multi-hop prompt: {prompt!r}")
    if task == "word_problem":
        m = re.search(r"Problem: (.*)\n", prompt)
        return word_problem_is_heldout(m.group(1))
    raise ValueError(task)
