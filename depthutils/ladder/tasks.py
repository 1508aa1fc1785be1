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

import hashlib
import random
import re
from dataclasses import dataclass
from functools import lru_cache

HELDOUT_MOD = 5  # hash % 5 == 0  ->  about 20 % held out
MIN_OPERANDS, MAX_OPERANDS = 2, 6


def stable_hash(text: str) -> int:
    """A platform-independent 64-bit hash (SHA-256 prefix)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


@dataclass(frozen=True)
class Example:
    """One task instance: ``prompt + continuation`` is the training text.

    ``answer`` is the gold answer *string* (for direct prompts it is exactly
    the continuation text, e.g. ``"28"`` or ``" Mara Voss"``).
    """

    task: str
    prompt: str
    continuation: str
    answer: str
    meta: dict

    @property
    def text(self) -> str:
        return self.prompt + self.continuation


# --------------------------------------------------------------------------
# Addition chains
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


FINAL_ANSWER_RE = re.compile(r"The final answer is (-?\d+)")
COT_ANSWER_RE = re.compile(r"The answer is ([^.\n]+)")


# --------------------------------------------------------------------------
# Multi-hop world
# --------------------------------------------------------------------------

_FIRST = ["Mara", "Tobin", "Elsa", "Corin", "Lena", "Dario", "Ines", "Felix", "Greta", "Hugo",
          "Alma", "Bruno", "Clara", "Emil", "Freya", "Gideon", "Helga", "Ivo", "Jana", "Kasper"]
_LAST = ["Voss", "Reed", "Marlow", "Quill", "Stroud", "Fenn", "Hollis", "Brandt", "Caskey",
         "Dunmore", "Ashby", "Lindqvist", "Orrin", "Pell", "Sorel", "Thorne", "Vance", "Wick"]
_SONG_ADJ = ["Silver", "Broken", "Golden", "Quiet", "Electric", "Paper", "Burning", "Hollow",
             "Velvet", "Midnight", "Crystal", "Wild"]
_SONG_NOUN = ["Rain", "Hearts", "Moon", "River", "Dreams", "Roads", "Sky", "Lanterns",
              "Harbor", "Garden", "Echoes", "Wings"]
_CITIES = ["Aldmoor", "Brinvale", "Carrowick", "Dunhaven", "Eastmere", "Falkreach", "Glenport",
           "Harrowgate", "Ironwell", "Juniper Bay", "Kestrel Ford", "Lowmarsh", "Marrowby",
           "Northwold", "Oakhollow", "Pinecrest", "Queensmoor", "Ravenholt", "Saltmere",
           "Thornbury", "Umberfield", "Valeport", "Westbrook", "Yarrowdale"]
_COUNTRIES = ["Estoria", "Valdenia", "Korvath", "Lunaria", "Meridia", "Ostrava", "Pelmark",
              "Sylvania"]

N_PEOPLE, N_SONGS, N_PERFORMERS = 80, 60, 24

#: relation -> (subject type, object type, English phrase)
RELATIONS = {
    "performer": ("song", "person", "the performer of"),
    "spouse": ("person", "person", "the spouse of"),
    "birth_city": ("person", "city", "the birth city of"),
    "country": ("city", "country", "the country of"),
    "mayor": ("city", "person", "the mayor of"),
}
#: Compositions, outermost relation first (applied right to left).
CHAINS = {
    1: [("performer",), ("spouse",), ("birth_city",), ("country",), ("mayor",)],
    2: [("spouse", "performer"), ("birth_city", "performer"), ("country", "birth_city"),
        ("birth_city", "spouse"), ("spouse", "mayor"), ("birth_city", "mayor")],
    3: [("country", "birth_city", "performer"), ("birth_city", "spouse", "performer"),
        ("country", "birth_city", "spouse"), ("country", "birth_city", "mayor")],
}


@dataclass(frozen=True)
class World:
    """Entities and single facts of the generated world (seeded)."""

    entities: dict  # type -> list of names
    facts: dict     # relation -> {subject: object}

    def follow(self, chain, subject):
        """Apply ``chain`` (outermost first) to ``subject``; returns path of objects."""
        path, x = [], subject
        for rel in reversed(chain):
            x = self.facts[rel][x]
            path.append(x)
        return path


@lru_cache(maxsize=None)
def build_world(seed: int = 20250) -> World:
    """Build the invented world deterministically from ``seed``."""
    rng = random.Random(seed)
    pairs = [f"{f} {l}" for f in _FIRST for l in _LAST]
    people = rng.sample(pairs, N_PEOPLE)
    songs = rng.sample([f"{a} {n}" for a in _SONG_ADJ for n in _SONG_NOUN], N_SONGS)
    cities, countries = list(_CITIES), list(_COUNTRIES)
    order = people[:]
    rng.shuffle(order)
    spouse = {}
    for a, b in zip(order[0::2], order[1::2]):
        spouse[a], spouse[b] = b, a
    performers = rng.sample(people, N_PERFORMERS)
    # every performer sings at least two songs, so every song-side bridge
    # entity appears in several compositions
    song_perf = performers * 2 + [rng.choice(performers) for _ in range(N_SONGS - 2 * N_PERFORMERS)]
    rng.shuffle(song_perf)
    facts = {
        "performer": dict(zip(songs, song_perf)),
        "spouse": spouse,
        "birth_city": {p: rng.choice(cities) for p in people},
        "country": {c: countries[i % len(countries)] for i, c in enumerate(rng.sample(cities, len(cities)))},
        "mayor": dict(zip(cities, rng.sample(people, len(cities)))),
    }
    return World(dict(person=people, song=songs, city=cities, country=countries), facts)


def multihop_prompt(chain, subject) -> str:
    """``("spouse", "performer"), "Silver Rain"`` -> ``"The spouse of the performer of Silver Rain is"``."""
    phrase = " ".join(RELATIONS[r][2] for r in chain)
    return f"{phrase[0].upper()}{phrase[1:]} {subject} is"


def multihop_is_heldout(chain, subject) -> bool:
    """Held-out rule: 2- and 3-hop compositions with ``(chain, subject)`` hash 0 mod 5."""
    return len(chain) >= 2 and stable_hash("mh:" + "/".join(chain) + ":" + subject) % HELDOUT_MOD == 0


def multihop_cot(world: World, chain, subject) -> str:
    """Steps spelled out, innermost hop first, then ``The answer is X``."""
    path = world.follow(chain, subject)
    steps, x = [], subject
    for rel, y in zip(reversed(chain), path):
        steps.append(f"{RELATIONS[rel][2]} {x} is {y}")
        x = y
    return ": " + ", and ".join(steps) + f". The answer is {path[-1]}."


def multihop_example(chain, subject, style: str = "direct", world: World | None = None) -> Example:
    """Build a multi-hop example (direct continuation ``" X."`` or cot)."""
    world = world or build_world()
    answer = world.follow(chain, subject)[-1]
    cont = f" {answer}." if style == "direct" else multihop_cot(world, chain, subject)
    return Example("multihop", multihop_prompt(chain, subject), cont, " " + answer,
                   dict(hops=len(chain), chain=list(chain), subject=subject,
                        heldout=multihop_is_heldout(chain, subject)))


@lru_cache(maxsize=None)
def multihop_instances() -> dict:
    """All multi-hop instances ``(chain, subject)`` grouped by hops and split."""
    world = build_world()
    out = {}
    for hops, chains in CHAINS.items():
        for chain in chains:
            subj_type = RELATIONS[chain[-1]][0]
            for s in world.entities[subj_type]:
                split = "heldout" if multihop_is_heldout(chain, s) else "train"
                out.setdefault((hops, split), []).append((chain, s))
    return out


#: Share of 1/2/3-hop questions among trained multi-hop examples.
HOP_WEIGHTS = {1: 0.45, 2: 0.35, 3: 0.20}


def sample_multihop(rng: random.Random, style: str = "direct") -> Example:
    """Sample a *trained* multi-hop example."""
    inst = multihop_instances()
    hops = rng.choices(list(HOP_WEIGHTS), list(HOP_WEIGHTS.values()))[0]
    chain, subject = rng.choice(inst[(hops, "train")])
    return multihop_example(chain, subject, style)


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
