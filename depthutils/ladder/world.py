"""The multi-hop world of the ladder's training data: invented people, songs, cities and countries, the
relations between them, and the 1–3-hop questions over them (see :mod:`.tasks` for the held-out rule)."""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from depthutils.ladder.examples import HELDOUT_MOD, Example, stable_hash

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
