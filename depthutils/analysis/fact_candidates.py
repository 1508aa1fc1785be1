"""The prompts chapters 4 and 5 try on a model (:mod:`depthutils.analysis.known_facts` checks which it answers).

On a real model: P1's two prompts, generated sums of one-digit numbers, the book's well-known two-hop facts and
MQuAKE's compositions (:func:`candidates`). On an embedded (ladder) model: the chapter's own two prompts, then
addition chains and two-hop compositions held out of its training (:func:`ladder_candidates`); a composition's
single facts are all trained, so a model that answers a held-out composition and both of its facts composed it.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from depthutils import data
from depthutils.core.prompts import P1_ARITHMETIC
from depthutils.ladder.registry import PROMPTS_DIR
from depthutils.ladder.world import build_world, multihop_prompt

#: P1's two prompts (Fig. 6), with the single hops of the two-hop one written as MQuAKE's clozes
P1_MULTIHOP = {"prompt": "The spouse of the performer of Imagine is", "answer": "Yoko Ono", "aliases": ["Ono"],
               "hops": [("Imagine was performed by", "John Lennon", ["Lennon", "John Winston Ono Lennon"]),
                        ("John Lennon is married to", "Yoko Ono", ["Ono"])]}

#: the inner hop of a composition as a noun phrase, by Wikidata relation (every relation of MQuAKE-hard)
NOUN_PHRASES = {
    "P36": "the capital of {}", "P27": "the country of citizenship of {}", "P495": "the country of origin of {}",
    "P641": "the sport of {}", "P30": "the continent of {}", "P413": "the position played by {}",
    "P1037": "the director of {}", "P175": "the performer of {}", "P178": "the developer of {}",
    "P26": "the spouse of {}", "P169": "the chief executive officer of {}", "P112": "the founder of {}",
    "P37": "the official language of {}", "P170": "the creator of {}", "P19": "the city where {} was born",
    "P176": "the manufacturer of {}", "P286": "the head coach of {}", "P449": "the original broadcaster of {}",
    "P50": "the author of {}", "P40": "the child of {}", "P108": "the employer of {}",
    "P800": "the notable work of {}", "P20": "the city where {} died", "P488": "the chairperson of {}",
    "P69": "the university where {} was educated", "P159": "the headquarters of {}", "P136": "the genre of {}",
    "P6": "the head of government of {}", "P106": "the occupation of {}", "P140": "the religion of {}",
}
#: the book's well-known two-hop facts (see :func:`curated_pairs`)
CURATED = PROMPTS_DIR / "two_hop_facts.json"
#: MQuAKE's clozes as written, with their two typos fixed
TYPOS = {"origianl": "original", "univeristy": "university"}
#: the source of an embedded model's candidates beyond the chapter's own
HELDOUT = "held out of its training"


@dataclass
class Candidate:
    """One prompt tried: its kind, context, answer forms, and (two-hop) its single hops as candidates."""

    kind: str                      # "arithmetic" or "multihop"
    context: str
    forms: list                    # the answer, then its aliases
    source: str                    # "P1", "MQuAKE case N, hops i-j", "generated"
    hops: list = field(default_factory=list)
    answer: str | None = None      # the matched answer text, as the model wrote it
    continuation: str = ""         # the greedy continuation
    greedy: bool = False
    forced: bool | None = None
    graded: bool = False
    checked: bool = False          # its greedy continuation was decoded

    @property
    def answered(self) -> bool:
        return self.greedy and bool(self.forced)

    @property
    def knows_hops(self) -> bool | None:
        """True if the model answers both single hops; None where they were not checked (no hops, or the
        prompt itself is not answered: its hops cannot make it gradable)."""
        if not self.hops or not all(h.checked for h in self.hops):
            return None
        return all(h.answered for h in self.hops)

    @property
    def gradable(self) -> bool:
        return self.answered and self.knows_hops is not False



def _fix(text: str) -> str:
    for bad, good in TYPOS.items():
        text = text.replace(bad, good)
    return text


def _forms(answer: str, aliases) -> list:
    return list(dict.fromkeys([answer] + [a for a in aliases if a and a.strip()]))


def mquake_pairs(rows=None) -> list[Candidate]:
    """Every distinct two-hop composition of consecutive MQuAKE hops, in file order."""
    rows = data.load_rows("MQuAKE-hard.json") if rows is None else rows
    seen, out = set(), []
    for r in rows:
        triples, labels, hops = r["orig"]["triples"], r["orig"]["triples_labeled"], r["single_hops"]
        for i in range(len(hops) - 1):
            subject, rel1 = labels[i][0], triples[i][1]
            outer = _fix(hops[i + 1]["cloze"]).replace(labels[i + 1][0], "{}", 1)
            if rel1 not in NOUN_PHRASES or "{}" not in outer:
                continue
            text = outer.format(NOUN_PHRASES[rel1].format(subject))
            text = text[0].upper() + text[1:]
            if text in seen:
                continue
            seen.add(text)
            single = [Candidate("hop", _fix(h["cloze"]), _forms(h["answer"], h["answer_alias"]), f"case {r['case_id']}")
                      for h in hops[i:i + 2]]
            out.append(Candidate("multihop", text, _forms(hops[i + 1]["answer"], hops[i + 1]["answer_alias"]),
                                 f"MQuAKE case {r['case_id']}, hops {i + 1}–{i + 2}", single))
    return out


def curated_pairs(path=CURATED) -> list[Candidate]:
    """The book's well-known two-hop facts (``path``, a JSON file whose ``facts`` each give the composed
    ``prompt``, its ``answer`` and ``aliases``, and its two ``hops`` as ``[cloze, answer, aliases]``), in file
    order; the composed answer is the second hop's."""
    with open(path, encoding="utf-8") as f:
        facts = json.load(f)["facts"]
    return [Candidate("multihop", x["prompt"], _forms(x["answer"], x["aliases"]), "well-known fact",
                      [Candidate("hop", c, _forms(a, al), "well-known fact") for c, a, al in x["hops"]])
            for x in facts]


def candidates(*, tried: int, seed: int, n_arithmetic: int = 20, operands: int = 6, chain_operands: int | None = None,
               curated: bool = False) -> list[Candidate]:
    """P1's two prompts first, then ``n_arithmetic - 1`` generated sums of ``operands`` one-digit numbers
    (``"arithmetic"``), ``n_arithmetic`` sums of ``chain_operands`` (``"chains"``; None: none) and, for two hops,
    the well-known facts (``curated``: :func:`curated_pairs`) and ``tried - 1`` MQuAKE compositions drawn with
    ``seed``; a context drawn twice is tried once."""
    p1 = P1_MULTIHOP
    out = [Candidate("arithmetic", P1_ARITHMETIC[0], [P1_ARITHMETIC[1]], "P1")]
    out += [Candidate("arithmetic", p.context, [p.answer], "generated")
            for p in data.arithmetic(n_arithmetic - 1, operands=operands, seed=seed)] if n_arithmetic > 1 else []
    out += [Candidate("chains", p.context, [p.answer], "generated")
            for p in data.arithmetic(n_arithmetic, operands=chain_operands, seed=seed)] if chain_operands else []
    out.append(Candidate("multihop", p1["prompt"], _forms(p1["answer"], p1["aliases"]), "P1",
                         [Candidate("hop", c, _forms(a, al), "P1") for c, a, al in p1["hops"]]))
    out += curated_pairs() if curated else []
    pool = mquake_pairs()
    random.Random(seed).shuffle(pool)
    return _unique(out + pool[:max(tried - 1, 0)])


def _unique(cands: list) -> list:
    """``cands`` with each context once (its first)."""
    seen, out = set(), []
    for c in cands:
        if c.context not in seen:
            seen.add(c.context)
            out.append(c)
    return out


def _world_hops(chain, subject) -> list[Candidate]:
    """The single facts a ladder composition chains, innermost first, as the ladder writes them (all trained)."""
    path = build_world().follow(chain, subject)
    heads = [subject] + path[:-1]
    return [Candidate("hop", multihop_prompt((rel,), head), [answer], "the ladder's fact")
            for rel, head, answer in zip(reversed(chain), heads, path)]


def ladder_candidates(own: dict, *, tried: int, tried_arithmetic: int, seed: int) -> list[Candidate]:
    """An embedded (ladder) model's candidates: the chapter's own prompts (``own``: kind → ``(context, answer)``)
    first, then ``tried_arithmetic - 1`` addition chains of 3–6 operands and ``tried - 1`` two-hop compositions,
    all held out of the ladder's training (its evaluation files, drawn with ``seed``); each composition with its
    two single facts (:data:`HELDOUT` names their source)."""
    chains = [p for p in data.project_task("addition", None, heldout=True, seed=seed) if len(p.meta["operands"]) >= 3]
    hops = data.project_task("multihop", None, hops=2, heldout=True, seed=seed)
    known = {p.context: p for p in hops}
    out = [Candidate(kind, context, [answer.strip()], "the chapter's",
                     _world_hops(known[context].meta["chain"], known[context].meta["subject"])
                     if kind == "multihop" and context in known else [])
           for kind, (context, answer) in own.items()]
    out += [Candidate("arithmetic", p.context, [p.answer], HELDOUT) for p in chains[:max(tried_arithmetic - 1, 0)]]
    out += [Candidate("multihop", p.context, [p.answer.strip()], HELDOUT, _world_hops(p.meta["chain"], p.meta["subject"]))
            for p in hops[:max(tried - 1, 0)]]
    return _unique(out)
