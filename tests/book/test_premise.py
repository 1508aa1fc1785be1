"""Chapter 10's premise (``depthutils.book.claims.objectives.premise``): the frontier against a plain loop; on
made-up sweep tables whose answer is known, every outcome; the table read back as written; the figure and table
drawn from any table."""
from __future__ import annotations

import csv
import random

import matplotlib.pyplot as plt
import pytest

from depthutils.book.claims.objectives import premise
from depthutils.ladder.registry import SWEEP_EVAL, SWEEP_LAYERS, SWEEP_LONGEST, SWEEP_SEEDS, SWEEP_SNAPSHOTS

HARD, CONTROL = "s5m", "c10m"


def _plain_frontier(acc: dict) -> int:
    """The longest trained k with every length 2..k at or above 0.9, by checking each k from scratch."""
    best = 1
    for k in range(2, SWEEP_LONGEST + 1):
        if all(acc[j] >= 0.9 for j in range(2, k + 1)):
            best = k
    return best


def test_the_frontier_is_the_longest_run_of_learned_lengths_from_two():
    rng = random.Random(0)
    for _ in range(2000):
        cut = rng.randint(1, SWEEP_LONGEST + 2)
        acc = {k: (rng.uniform(0.9, 1.0) if k < cut else rng.uniform(0.0, 1.0)) for k in SWEEP_EVAL}
        assert premise.frontier(acc) == _plain_frontier(acc), acc
    ones = {k: 1.0 for k in SWEEP_EVAL}
    assert premise.frontier(ones) == SWEEP_LONGEST  # the longer, untrained lengths never count
    assert premise.frontier({**ones, 1: 0.0}) == SWEEP_LONGEST  # nor does one operation, a lookup
    assert premise.frontier({**ones, 2: 0.89}) == 1 and premise.frontier({**ones, 5: 0.5}) == 4


def _table(path, front: dict, seeds=SWEEP_SEEDS, without=(), early: dict | None = None):
    """A sweep table as :func:`depthutils.ladder.sweep.write_table` writes it: every snapshot of each run has
    accuracy 1.0 up to its frontier ``front[(task, layers)]`` (or ``front[(task, layers, seed)]``) and 0.5 beyond;
    ``early[(task, layers, seed)]``: the frontier of the snapshots before the last two (default the same); the runs
    ``without`` (task, layers, seed) left out."""
    fields = ["task", "layers", "seed", "step", "loss", "converged", *(f"acc_{k}" for k in SWEEP_EVAL)]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for task in (HARD, CONTROL):
            for n in SWEEP_LAYERS:
                for s in [s for s in seeds if (task, n, s) not in without]:
                    last = front.get((task, n, s), front[(task, n)])
                    for i, step in enumerate(SWEEP_SNAPSHOTS):
                        k = last if i >= len(SWEEP_SNAPSHOTS) - 2 else (early or {}).get((task, n, s), last)
                        w.writerow(dict(task=task, layers=n, seed=s, step=step, loss=0.1, converged=True,
                                        **{f"acc_{j}": 1.0 if j <= k else 0.5 for j in SWEEP_EVAL}))
    return path


# S5 learns 3 operations at 2 layers, 10 at 4, 12 at 8; C10 12 at 2: the premise's lengths are 2-12
NEEDS_DEPTH = {(HARD, 2): 3, (HARD, 4): 10, (HARD, 8): 12, (CONTROL, 2): 12, (CONTROL, 4): 12, (CONTROL, 8): 12}


def test_the_table_reads_back_as_written(tmp_path):
    runs = premise.load(_table(tmp_path / "rows.csv", NEEDS_DEPTH, early={(HARD, 2, 1): 2}))
    assert len(runs) == 2 * len(SWEEP_LAYERS) * len(SWEEP_SEEDS)
    r = next(r for r in runs if (r.task, r.layers, r.seed) == (HARD, 2, 1))
    assert r.steps == SWEEP_SNAPSHOTS[-2:] and r.acc[3] == 1.0 and r.acc[4] == 0.5 and r.frontier == 3
    assert [f for _, f in r.curve] == [2] * (len(SWEEP_SNAPSHOTS) - 2) + [3, 3]
    assert premise.cell_frontier(runs, HARD, 4) == 10 and premise.premise_length(runs) == 12
    assert premise.load(tmp_path / "missing.csv") == []


def test_accuracy_is_the_mean_of_the_last_two_snapshots(tmp_path):
    """A length learned at the last snapshot only (1.0 then 0.5: mean 0.75) is not learned."""
    path = tmp_path / "rows.csv"
    rows = list(csv.DictReader(open(_table(path, NEEDS_DEPTH))))
    for r in rows:
        if (r["task"], r["layers"], r["seed"], r["step"]) == (HARD, "2", "1", str(SWEEP_SNAPSHOTS[-1])):
            r["acc_4"] = "1.0"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    r = next(r for r in premise.load(path) if (r.task, r.layers, r.seed) == (HARD, 2, 1))
    assert r.acc[4] == 0.75 and r.frontier == 3 and r.curve[-1] == (SWEEP_SNAPSHOTS[-1], 4)


@pytest.mark.parametrize("change,outcome,K", [
    ({}, "shown", 12),
    ({(CONTROL, 2): 8}, "shown", 8),                     # the control's frontier bounds the premise's lengths
    ({(HARD, 4): 5, (HARD, 8): 6}, "shown", 6),          # ... and so does the deepest S5's
    ({(HARD, 2): 12}, "not shown", 12),                  # S5 learned at 2 layers as far as C10
    ({(HARD, 2): 7, (CONTROL, 2): 7}, "not shown", 7),   # S5 at 2 layers reaches every premise length
    ({(HARD, 2, 3): 12}, "mixed", 12),                   # one S5 seed at 2 layers reaches them
    ({(CONTROL, 2): 1}, "not tested", 1),                # the control not learned at 2 layers
    ({(CONTROL, 2, 2): 1}, "not tested", 1),             # ... by one seed
    ({(HARD, 4): 1, (HARD, 8): 1}, "not tested", 1),     # S5 learned at no larger layer count
])
def test_the_premise_comes_out_every_way(tmp_path, change, outcome, K):
    runs = premise.load(_table(tmp_path / "rows.csv", {**NEEDS_DEPTH, **change}))
    v = premise.verdict(runs)
    assert premise.premise_length(runs) == K
    assert v.outcome == outcome, v.numbers
    assert v.criterion == premise.CRITERION and "Frontiers" in v.numbers


def test_a_frontier_still_lengthening_is_said(tmp_path):
    v = premise.verdict(premise.load(_table(tmp_path / "rows.csv", NEEDS_DEPTH, early={(HARD, 2, 2): 1})))
    assert v.outcome == "shown" and "still lengthening its frontier at the last snapshots (seed 2)" in v.numbers
    assert "still lengthening" not in premise.verdict(premise.load(_table(tmp_path / "r.csv", NEEDS_DEPTH))).numbers


@pytest.mark.parametrize("change,without,outcome", [
    ({}, {(HARD, 8, 3), (CONTROL, 8, 3)}, "shown"),              # more S5 runs can only lengthen the lengths
    ({(HARD, 2): 12}, {(HARD, 8, 3)}, "not tested"),             # ... so not shown waits for them
    ({(HARD, 2, 3): 12}, {(HARD, 4, 3)}, "not tested"),          # ... and so does mixed
    ({}, {(HARD, 2, 3)}, "not tested"),                          # a third S5 seed at 2 layers could reach them
    ({}, {(CONTROL, 2, 3)}, "not tested"),                       # a third C10 seed could fall short
    ({}, {(HARD, 4, 3), (HARD, 8, 3)}, "not tested"),            # no complete deeper S5 cell: no length
])
def test_missing_runs_are_graded_only_when_they_cannot_change_the_outcome(tmp_path, change, without, outcome):
    runs = premise.load(_table(tmp_path / "rows.csv", {**NEEDS_DEPTH, **change}, without=without))
    v = premise.verdict(runs)
    assert v.outcome == outcome, v.numbers
    assert f"{len(runs)} of the sweep's 18 runs are in its table" in v.numbers
    assert premise.verdict([]).outcome == "not tested"


def test_the_figure_and_table_draw_any_table(tmp_path):
    runs = premise.load(_table(tmp_path / "rows.csv", NEEDS_DEPTH))
    fig = premise.figure(runs)
    assert len(fig.axes) == 3 and all(ax.get_xlabel() and ax.get_ylabel() for ax in (fig.axes[0], fig.axes[2]))
    plt.close(fig)
    text = premise.table(runs)
    assert text.count("\n") == len(runs) + 1 and "| S5 | 2 | 1 |" in text and "| **3** |" in text
    plt.close(premise.figure([]))
    facts = premise.facts(runs, premise.verdict(runs))
    assert facts["K"] == 12 and facts["lengths"] == "2–12" and facts["s5_L2"] == 3 and facts["c10_L2"] == 12
