"""The objectives experiment's two tasks: word problems of a group acting on a few digits (ours).

An example is a start point ``x`` and ``k`` operations ``g_1 … g_k``, each a map of the points named by one
operation token, applied left to right; the answer is the point ``g_k(… g_1(x))``, one digit::

    S5:      "3 a c b = "    ->  "2"
    Z10:     "7 +3 *9 +2 = " ->  "2"          ((7 + 3) * 9 + 2) mod 10

**S5, the task that needs depth.** The operations are eight permutations of the points 0–4 that generate the
symmetric group S5 (:data:`S5_OPS`). S5 is not solvable: its derived series S5 > A5 > A5 stops at the
alternating group A5, never at the identity (:func:`derived_series`). Barrington (1989) showed that the word
problem of A5 (is a product of ``k`` elements the identity?) is complete for NC¹ under constant-depth
reductions, and it reduces to this task: a product that is either the identity or one fixed 5-cycle is told
apart by the image of one point, and every element of S5 is a word of bounded length in the eight operations.
So a transformer of constant depth (whose problems lie in TC⁰) can solve it for every ``k`` only if TC⁰ = NC¹,
which is not believed; the known constructions need depth that grows with ``log k`` (composing the
permutations pairwise, a parallel scan), and trained transformers track S5 only as far as their depth allows
(Liu et al., "Transformers Learn Shortcuts to Automata", ICLR 2023; Merrill, Petty & Sabharwal, "The Illusion of
State in State-Space Models", ICML 2024). No constant-depth shortcut is known.

**Questions with structure** (``s5m``, ``z10m``). In ``s5`` and ``z10`` each operation is drawn independently and
uniformly, so a question has nothing to learn: modelling it (the Q+A and LM objectives) meets a loss floor of
``ln 8`` or ``ln 12`` per operation. P1's authors' hypothesis is about what learning the question does to depth,
so the structured tasks draw a question's operations from a fixed Markov chain (:func:`markov_chain`): the first
uniformly, each next one from three successors of the one before, with probabilities 0.6, 0.3 and 0.1 (about
0.90 nats an operation to learn). The successors never undo the operation before (no inverse, no repeat), and the
chain visits every operation, so the products of a question still range over the whole group.

**Z10, the control with a shortcut.** The operations ``+d`` (``d`` in 1–9) and ``*d`` (``d`` in 3, 7, 9) are
affine maps ``x ↦ a·x + b`` of the digits mod 10 with ``a`` a unit, and a chain of them is again one affine
map (:func:`affine_form`): the answer is ``P_k·x + Σ_i b_i·(P_k / P_i)``, where ``P_i`` is the product of the
multipliers up to operation ``i``. Products in the cyclic group of units and a sum mod 10 are each pooled by
one attention layer whatever ``k`` is: the task has a constant-depth shortcut, as every word problem of a
solvable group does (Liu et al. 2023). The chapter asks whether the late layers stay idle on it, whatever the
objective.

**C10, the premise's control** (``c10m``). The cyclic group alone: the operations ``+1`` … ``+9`` (Z10's
additions), questions drawn as in ``z10m`` (:func:`markov_chain`). The group is abelian and the answer is a sum,
``(x + Σ_i b_i) mod 10``: the added constants pooled by one attention layer and read mod 10 by an MLP, whatever
``k`` is. Chapter 10's depth sweep measures S5 against it, the simplest shortcut there is; Z10's affine chains
need the product of the multipliers beside the sum.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property

from depthutils.ladder.examples import HELDOUT_MOD, Example, stable_hash

Perm = tuple  # a map of the points: ``p[i]`` is the image of point ``i``


def compose(*maps: Perm) -> Perm:
    """The map that applies ``maps`` left to right: ``compose(f, g)(x) = g(f(x))``."""
    out = tuple(range(len(maps[0])))
    for m in maps:
        out = tuple(m[i] for i in out)
    return out


def generated(gens) -> set:
    """The group the maps ``gens`` (permutations of the same points) generate, by closure."""
    e = tuple(range(len(next(iter(gens)))))
    group, frontier = {e}, [e]
    while frontier:
        new = [compose(g, s) for g in frontier for s in gens]
        frontier = [g for g in set(new) if g not in group]
        group.update(frontier)
    return group


def inverse(p: Perm) -> Perm:
    out = [0] * len(p)
    for i, j in enumerate(p):
        out[j] = i
    return tuple(out)


def derived_series(group: set) -> list[int]:
    """The orders of ``G ⊇ G' ⊇ G'' ⊇ …`` until the series stops; it ends at 1 exactly when ``G`` is solvable."""
    orders = [len(group)]
    while True:
        commutators = {compose(inverse(a), inverse(b), a, b) for a in group for b in group}
        group = generated(commutators)
        if len(group) == orders[-1]:
            return orders
        orders.append(len(group))


@dataclass(frozen=True)
class WordTask:
    """A word problem: ``points`` digits, operations named by the tokens ``ops`` (name -> map of the points,
    in a fixed order), and the key that seeds its examples and its held-out split."""

    name: str
    label: str
    points: int
    ops: tuple  # ((name, map), …)
    key: str
    #: a fixed Markov chain over the operations (row ``i``: the weights of the operation after operation ``i``,
    #: :func:`markov_chain`), or None: every operation drawn independently and uniformly
    chain: tuple | None = None

    @cached_property
    def table(self) -> dict:
        return dict(self.ops)

    @property
    def op_names(self) -> list[str]:
        return [n for n, _ in self.ops]

    @property
    def chance(self) -> float:
        return 1 / self.points

    def apply(self, start: int, ops) -> int:
        """The answer: the operations ``ops`` (names) applied to ``start`` left to right."""
        x = start
        for o in ops:
            x = self.table[o][x]
        return x

    def prompt(self, start: int, ops) -> str:
        """``3, ["a", "c"]`` -> ``"3 a c = "`` (the last prompt token, the space, predicts the answer)."""
        return f"{start} " + " ".join(ops) + " = "

    def is_heldout(self, start: int, ops) -> bool:
        """Chains of 2 or more operations whose prompt hashes to 0 mod 5 (about 20 %) are never trained on."""
        return len(ops) >= 2 and stable_hash(f"{self.key}:" + self.prompt(start, ops)) % HELDOUT_MOD == 0

    def example(self, start: int, ops) -> Example:
        ops = list(ops)
        ans = str(self.apply(start, ops))
        return Example(self.key, self.prompt(start, ops), ans, ans,
                       dict(steps=len(ops), heldout=self.is_heldout(start, ops)))

    def draw(self, rng: random.Random, steps: int) -> list[str]:
        """The operations of one question: independent uniform draws, or a walk of :attr:`chain` from a uniform
        first operation."""
        names = self.op_names
        if self.chain is None:
            return [rng.choice(names) for _ in range(steps)]
        ops = [rng.choice(names)]
        for _ in range(steps - 1):
            ops.append(rng.choices(names, weights=self.chain[names.index(ops[-1])])[0])
        return ops

    def sample(self, rng: random.Random, steps: int, heldout: bool = False) -> Example:
        """One chain of ``steps`` operations, from the training split or the held-out one."""
        if heldout and steps < 2:
            raise ValueError("1-step chains are all trained; held-out chains have 2 or more steps")
        while True:
            start, ops = rng.randrange(self.points), self.draw(rng, steps)
            if self.is_heldout(start, ops) == heldout:
                return self.example(start, ops)

    def eval_chains(self, n: int, steps: int, seed: int = 0) -> list[Example]:
        """``n`` distinct held-out chains of ``steps`` operations (1-step chains: trained ones, at most all of
        them), the same for every call with the same arguments."""
        rng, seen, out = random.Random(f"{self.key}-eval:{seed}:{steps}"), set(), []
        for _ in range(200 * n):
            ex = self.sample(rng, steps, heldout=steps >= 2)
            if ex.prompt not in seen:
                seen.add(ex.prompt)
                out.append(ex)
            if len(out) == n:
                break
        return out

    def group(self) -> set:
        """The group the operations generate."""
        return generated([m for _, m in self.ops])


def _cycles(*cycles, n: int = 5) -> Perm:
    """A permutation of ``0 … n−1`` from its cycles: ``_cycles((0, 1), (2, 3, 4))``."""
    p = list(range(n))
    for c in cycles:
        for i, x in enumerate(c):
            p[x] = c[(i + 1) % len(c)]
    return tuple(p)


#: S5's eight operations: two transpositions, two 5-cycles (inverse of each other), a 3-cycle, a 4-cycle and
#: two products of disjoint cycles; together they generate S5 (order 120)
S5_OPS = (("a", _cycles((0, 1))), ("b", _cycles((0, 1, 2, 3, 4))), ("c", _cycles((0, 4, 3, 2, 1))),
          ("d", _cycles((1, 2), (3, 4))), ("e", _cycles((0, 2, 4))), ("f", _cycles((1, 3, 4, 2))),
          ("g", _cycles((0, 4), (1, 2, 3))), ("h", _cycles((2, 3))))
#: Z10's twelve operations, in the order the original chains draw them
Z10_OPS = tuple((f"+{d}", tuple((x + d) % 10 for x in range(10))) for d in range(1, 10)) + \
    tuple((f"*{d}", tuple((x * d) % 10 for x in range(10))) for d in (3, 7, 9))

#: C10's nine operations: Z10's additions, the cyclic group alone
C10_OPS = Z10_OPS[:9]

#: the successors' probabilities in :func:`markov_chain`
SUCCESSOR_WEIGHTS = (0.6, 0.3, 0.1)


def markov_chain(ops, key: str) -> tuple:
    """A fixed Markov chain over the operations ``ops`` ((name, map), …): row ``i`` gives operation ``i``'s three
    successors the weights :data:`SUCCESSOR_WEIGHTS` (every other operation 0). The first successor is the next
    operation in a random cycle through all of them (so the chain reaches every operation); the other two are drawn
    (seeded by ``key``) from the rest. None is operation ``i`` itself or its inverse, so a question never undoes
    its last step."""
    rng = random.Random(f"{key}:markov")
    n = len(ops)
    order = list(range(n))
    rng.shuffle(order)
    # each operation's successor in the cycle; a cycle step that would undo an operation is swapped away
    while any(ops[order[(j + 1) % n]][1] in (ops[order[j]][1], inverse(ops[order[j]][1])) for j in range(n)):
        rng.shuffle(order)
    nxt = {order[j]: order[(j + 1) % n] for j in range(n)}
    rows = []
    for i, (_, m) in enumerate(ops):
        banned = {j for j, (_, other) in enumerate(ops) if other in (m, inverse(m))} | {nxt[i]}
        rest = rng.sample([j for j in range(n) if j not in banned], len(SUCCESSOR_WEIGHTS) - 1)
        row = [0.0] * n
        for j, w in zip([nxt[i], *rest], SUCCESSOR_WEIGHTS):
            row[j] = w
        rows.append(tuple(row))
    return tuple(rows)


S5 = WordTask("s5", "S5 (permutations of 5 points)", 5, S5_OPS, "s5")
#: the key "opchain" keeps the chains, their held-out split and the training examples those of the first runs
Z10 = WordTask("z10", "Z10 (affine chains mod 10)", 10, Z10_OPS, "opchain")
#: the same groups, each question's operations a walk of a fixed Markov chain: a question with structure to learn
S5M = WordTask("s5m", "S5 (permutations of 5 points), structured questions", 5, S5_OPS, "s5m",
               markov_chain(S5_OPS, "s5m"))
Z10M = WordTask("z10m", "Z10 (affine chains mod 10), structured questions", 10, Z10_OPS, "z10m",
                markov_chain(Z10_OPS, "z10m"))
C10M = WordTask("c10m", "C10 (additions mod 10), structured questions", 10, C10_OPS, "c10m",
                markov_chain(C10_OPS, "c10m"))
#: the tasks by name, the one that needs depth first
TASKS = {"s5": S5, "z10": Z10, "s5m": S5M, "z10m": Z10M, "c10m": C10M}


def affine_form(ops) -> tuple[int, int]:
    """``(a, b)`` with ``Z10.apply(x, ops) == (a·x + b) mod 10`` for every ``x``: the Z10 chain's one-map
    shortcut, computed as its closed form ``a = P_k``, ``b = Σ_i b_i·(P_k / P_i)`` (``P_i`` the product of
    the multipliers up to operation ``i``, ``b_i`` its added constant)."""
    mults = [int(o[1:]) if o[0] == "*" else 1 for o in ops]
    adds = [int(o[1:]) if o[0] == "+" else 0 for o in ops]
    a, b = 1, 0
    for i in range(len(ops)):
        tail = 1
        for m in mults[i + 1:]:
            tail *= m
        b += adds[i] * tail  # b_i·(P_k / P_i): the multipliers after operation i
        a *= mults[i]
    return a % 10, b % 10


