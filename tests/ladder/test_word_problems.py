"""Chapter 10's tasks: S5 has no solvable (affine, abelian) shortcut; the controls, Z10's affine chains and C10's
additions, have one."""
from __future__ import annotations

import random
from itertools import permutations

import pytest

from depthutils.ladder import registry
from depthutils.ladder.tokenizer import load_tokenizer
from depthutils.ladder.word_problems import (
    C10M,
    S5,
    S5M,
    SUCCESSOR_WEIGHTS,
    TASKS,
    Z10,
    Z10M,
    affine_form,
    compose,
    derived_series,
    generated,
    inverse,
)


def _commutator_closure(group: set) -> set:
    """An independent derived subgroup: close the commutators a⁻¹b⁻¹ab under products, with plain tuples."""
    inv = {g: tuple(sorted(range(len(g)), key=lambda i: g[i])) for g in group}
    mul = lambda f, g: tuple(g[f[i]] for i in range(len(f)))  # noqa: E731  apply f, then g
    comms = {mul(mul(mul(inv[a], inv[b]), a), b) for a in group for b in group}
    closure = set(comms)
    while True:
        new = {mul(a, b) for a in closure for b in comms} - closure
        if not new:
            return closure
        closure |= new


def test_s5_is_the_whole_symmetric_group_and_not_solvable():
    """The eight operations generate all 120 permutations of 5 points; the derived series stops at A5 (60), so the
    group is not solvable and its word problem has no known constant-depth shortcut (Barrington 1989)."""
    group = S5.group()
    assert group == set(permutations(range(5)))
    assert derived_series(group) == [120, 60]
    a5 = _commutator_closure(group)
    assert len(a5) == 60 and _commutator_closure(a5) == a5  # A5 is perfect: the series never reaches 1
    assert all(sum(p[i] > p[j] for i in range(5) for j in range(i + 1, 5)) % 2 == 0 for p in a5)  # even ones


def test_z10_chains_are_one_affine_map_a_solvable_group():
    """The control's shortcut: every chain is one map x -> a·x + b (mod 10), the closed form checked against the
    chain on every start; the group of such maps is solvable (its derived series reaches the identity)."""
    rng = random.Random(0)
    for _ in range(2000):
        ops = [rng.choice(Z10.op_names) for _ in range(rng.randint(1, 8))]
        a, b = affine_form(ops)
        assert all(Z10.apply(x, ops) == (a * x + b) % 10 for x in range(10))
    assert derived_series(Z10.group())[-1] == 1


def test_c10_chains_are_a_sum_in_an_abelian_group():
    """The premise's control: every chain adds its constants, (x + Σ b_i) mod 10, in any order; the ten maps form
    a cyclic group whose derived series is (10, 1)."""
    rng = random.Random(0)
    for _ in range(2000):
        ops = C10M.draw(rng, rng.randint(1, 8))
        total = sum(int(o[1:]) for o in ops)
        assert all(C10M.apply(x, ops) == (x + total) % 10 for x in range(10))
        assert all(C10M.apply(x, ops[::-1]) == C10M.apply(x, ops) for x in range(10))
    assert C10M.op_names == [f"+{d}" for d in range(1, 10)] and derived_series(C10M.group()) == [10, 1]


def test_s5_chains_are_not_affine():
    """No chain-independent affine rule reproduces S5: the product depends on the order of the operations
    (the group is not abelian) and no map x -> a·x + b mod 5 equals some products."""
    perms = dict(S5.ops)
    assert any(compose(perms[x], perms[y]) != compose(perms[y], perms[x]) for x in perms for y in perms)
    affine = {tuple((a * x + b) % 5 for x in range(5)) for a in range(1, 5) for b in range(5)}
    assert len(S5.group() - affine) == 100


def test_every_operation_is_a_bijection_that_matters():
    for task in TASKS.values():
        for name, m in task.ops:
            assert sorted(m) == list(range(task.points)) and m != tuple(range(task.points)), name
        assert generated([m for _, m in task.ops]) == task.group()


def test_z10_keeps_the_first_runs_chains():
    """The control's examples and its held-out split are those of the original chains: an independent
    re-implementation of their generator gives the same held-out chains."""
    import hashlib

    ops = [("+", d) for d in range(1, 10)] + [("*", d) for d in (3, 7, 9)]

    def prompt(start, chain):
        return f"{start} " + " ".join(f"{o}{d}" for o, d in chain) + " = "

    def heldout(start, chain):
        h = int.from_bytes(hashlib.sha256(("opchain:" + prompt(start, chain)).encode()).digest()[:8], "big")
        return len(chain) >= 2 and h % 5 == 0

    for k in (2, 4, 6):
        rng, seen, want = random.Random(f"opchain-eval:0:{k}"), set(), []
        while len(want) < 5:
            start, chain = rng.randrange(10), [rng.choice(ops) for _ in range(k)]
            if heldout(start, chain) and prompt(start, chain) not in seen:
                seen.add(prompt(start, chain))
                want.append(prompt(start, chain))
        assert [e.prompt for e in Z10.eval_chains(5, k)] == want


@pytest.mark.parametrize("task", list(TASKS))
def test_held_out_split_and_one_token_answers(task):
    """About a fifth of the chains of 2+ operations are held out, every evaluation chain of 2+ is one, and the
    question's tokens are exactly the first tokens of question + answer (the answer's digit is one token after
    them), so the answer-predicting position is the question's last token."""
    t, rng = TASKS[task], random.Random(1)
    share = sum(t.is_heldout(rng.randrange(t.points), [rng.choice(t.op_names) for _ in range(3)])
                for _ in range(4000)) / 4000
    assert 0.15 < share < 0.25
    tok = load_tokenizer(registry.TOKENIZER_DIR)
    for k in (1, 3, 6):
        exs = t.eval_chains(20, k)
        assert len({e.prompt for e in exs}) == len(exs) and all(e.meta["heldout"] == (k >= 2) for e in exs)
        for e in exs:
            q, full = tok(e.prompt)["input_ids"], tok(e.prompt + e.answer)["input_ids"]
            assert full[:len(q)] == q and len(full) == len(q) + 1 and tok.decode(full[-1:]) == e.answer
            assert int(e.answer) == t.apply(int(e.prompt.split()[0]), e.prompt.split()[1:-1])


@pytest.mark.parametrize("task", [S5M, Z10M, C10M], ids=lambda t: t.name)
def test_structured_questions_walk_a_fixed_markov_chain(task):
    """Each operation has three successors with the weights of SUCCESSOR_WEIGHTS, never itself or its inverse; the
    chain reaches every operation; the walks' transition counts match its rows; the products still cover the group."""
    names, n = task.op_names, len(task.ops)
    for i, row in enumerate(task.chain):
        assert sorted(w for w in row if w) == sorted(SUCCESSOR_WEIGHTS) and abs(sum(row) - 1) < 1e-12
        m = task.ops[i][1]
        assert all(row[j] == 0 for j, (_, other) in enumerate(task.ops) if other in (m, inverse(m)))
    reach, frontier = {0}, [0]  # every operation reachable from the first (and so from any, by the cycle)
    while frontier:
        frontier = [j for i in frontier for j in range(n) if task.chain[i][j] and j not in reach]
        reach.update(frontier)
    assert reach == set(range(n))
    rng, counts, maps = random.Random(1), [[0] * n for _ in range(n)], set()
    for _ in range(6000):
        ops = task.draw(rng, 6)
        for a, b in zip(ops, ops[1:]):
            counts[names.index(a)][names.index(b)] += 1
        maps.add(tuple(task.apply(x, ops) for x in range(task.points)))
    for i, row in enumerate(counts):
        total = sum(row)
        assert all(abs(c / total - w) < 0.04 for c, w in zip(row, task.chain[i])), (i, row)
    assert len(maps) == len(task.group())  # 120 maps on S5, 40 on Z10, 10 on C10: the questions need the whole group


def test_the_uniform_tasks_draw_as_before():
    """``s5`` and ``z10`` keep their chains (the shipped runs were trained on them): the draw is the original one,
    a start point and then independent uniform operations, from the same random stream."""
    for task in (S5, Z10):
        a, b = random.Random("x"), random.Random("x")
        for steps in (1, 3, 6):
            got = task.sample(a, steps)
            while True:  # the original sampler, written out
                start, ops = b.randrange(task.points), [b.choice(task.op_names) for _ in range(steps)]
                if not task.is_heldout(start, ops):
                    break
            assert got.prompt == task.prompt(start, ops)
