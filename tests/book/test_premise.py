"""Chapter 10's premise (``depthutils.book.claims.objectives.premise``): on made-up sweep tables whose answer is
known, every outcome; the table read back as written; the figure and table drawn from the shipped table."""
from __future__ import annotations

import csv

import matplotlib.pyplot as plt
import pytest

from depthutils.book.claims.objectives import premise
from depthutils.ladder.objectives import EVAL_STEPS
from depthutils.ladder.registry import SWEEP_LAYERS, SWEEP_SEEDS, SWEEP_STEPS

HARD, CONTROL = "s5m", "z10m"


def _table(path, worst: dict, converged: dict | None = None, seeds=SWEEP_SEEDS, without=()):
    """A sweep table as :func:`depthutils.ladder.sweep.write_table` writes it: two snapshots per run, the last one
    at ``worst[(task, layers)]`` (or ``worst[(task, layers, seed)]``) on 4 operations and 1.0 elsewhere; the runs
    ``without`` (task, layers, seed) left out."""
    fields = ["task", "layers", "seed", "step", "loss", "converged", *(f"acc_{k}" for k in EVAL_STEPS)]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for task in (HARD, CONTROL):
            for n in SWEEP_LAYERS:
                for s in [s for s in seeds if (task, n, s) not in without]:
                    last = worst.get((task, n, s), worst[(task, n)])
                    done = (converged or {}).get((task, n, s), True)
                    for step, acc4 in ((SWEEP_STEPS // 2, last / 2), (SWEEP_STEPS, last)):
                        w.writerow(dict(task=task, layers=n, seed=s, step=step, loss=0.1, converged=done,
                                        **{f"acc_{k}": acc4 if k == 4 else 1.0 for k in EVAL_STEPS}))
    return path


# S5 learned from 4 layers, Z10 from 2: the premise as the chapter wants it
NEEDS_DEPTH = {(HARD, 2): 0.5, (HARD, 4): 0.95, (HARD, 8): 1.0, (CONTROL, 2): 0.95, (CONTROL, 4): 1.0,
               (CONTROL, 8): 1.0}


def test_the_table_reads_back_as_written(tmp_path):
    runs = premise.load(_table(tmp_path / "rows.csv", NEEDS_DEPTH))
    assert len(runs) == 2 * len(SWEEP_LAYERS) * len(SWEEP_SEEDS)
    r = next(r for r in runs if (r.task, r.layers, r.seed) == (HARD, 2, 1))
    assert r.step == SWEEP_STEPS and r.acc[4] == 0.5 and r.worst == 0.5 and not r.learned and r.converged
    assert r.curve == ((SWEEP_STEPS // 2, 0.25), (SWEEP_STEPS, 0.5))
    assert premise.layers_needed(runs, HARD) == 4 and premise.layers_needed(runs, CONTROL) == 2
    assert premise.load(tmp_path / "missing.csv") == []


def test_one_operation_is_not_graded(tmp_path):
    """Accuracy on one operation (a lookup) does not decide whether a run learned the task."""
    assert 1 not in premise.GRADED_LENGTHS and premise.GRADED_LENGTHS == (2, 3, 4, 5, 6)


@pytest.mark.parametrize("change,converged,outcome", [
    ({}, None, "shown"),
    ({(HARD, 2): 0.95}, None, "not shown"),                        # S5 learned at 2 layers too
    ({(HARD, 2, 3): 0.95}, None, "mixed"),                         # one S5 seed learns it at 2 layers
    ({}, {(HARD, 2, 1): False}, "mixed"),                          # a failing S5 run was still learning
    ({(CONTROL, 2): 0.5, (CONTROL, 4): 0.5, (CONTROL, 8): 0.5}, None, "not shown"),  # the control is harder
    ({(CONTROL, 2): 0.5, (CONTROL, 4): 0.5, (CONTROL, 8): 0.5}, {(CONTROL, 4, 2): False}, "mixed"),  # ... or slower
    ({(CONTROL, 2): 0.5, (CONTROL, 4): 0.5, (CONTROL, 8): 0.5, (HARD, 4): 0.5, (HARD, 8): 0.5}, None,
     "not tested"),                                                # neither task learned at any layer count
    ({(CONTROL, 2): 0.5}, None, "not shown"),                      # both need 4 layers
])
def test_the_premise_comes_out_every_way(tmp_path, change, converged, outcome):
    v = premise.verdict(premise.load(_table(tmp_path / "rows.csv", {**NEEDS_DEPTH, **change}, converged)))
    assert v.outcome == outcome, v.numbers


def test_an_incomplete_sweep_is_not_tested(tmp_path):
    v = premise.verdict(premise.load(_table(tmp_path / "rows.csv", NEEDS_DEPTH, seeds=SWEEP_SEEDS[:2])))
    assert v.outcome == "not tested" and "have fewer than 3 seeds" in v.numbers and v.criterion == premise.CRITERION
    assert premise.verdict([]).outcome == "not tested"


@pytest.mark.parametrize("without,outcome", [
    ({(HARD, 8, 3), (CONTROL, 8, 3)}, "shown"),       # the layers that decide it are complete
    ({(CONTROL, 4, 3), (CONTROL, 8, 2)}, "shown"),    # Z10 learned at 2 layers by every seed already
    ({(HARD, 2, 3)}, "not tested"),                    # a third S5 seed at 2 layers could learn it: mixed
    ({(CONTROL, 2, 3)}, "not tested"),                 # a third Z10 seed at 2 layers could fail: Z10 would need 4
])
def test_missing_runs_are_graded_only_when_they_cannot_change_the_outcome(tmp_path, without, outcome):
    """Before the sweep is complete, the premise is graded only if every table it could end with gives the same
    outcome (each missing run learned, failed for good, or failed still learning)."""
    runs = premise.load(_table(tmp_path / "rows.csv", NEEDS_DEPTH, without=without))
    v = premise.verdict(runs)
    assert v.outcome == outcome, v.numbers
    assert f"{len(runs)} of its 18 runs" in v.numbers
    assert ("whatever the" in v.numbers) == (outcome != "not tested")
    outcomes = {premise.verdict(table).outcome for table in premise.completions(runs)}
    assert (outcomes == {outcome}) == (outcome != "not tested")
    assert all(len(table) == 18 for table in premise.completions(runs))


def test_the_figure_and_table_draw_any_table(tmp_path):
    runs = premise.load(_table(tmp_path / "rows.csv", NEEDS_DEPTH))
    fig = premise.figure(runs)
    assert len(fig.axes) == 3 and all(ax.get_xlabel() for ax in fig.axes)
    plt.close(fig)
    text = premise.table(runs)
    assert text.count("\n") == len(runs) + 1 and "| S5 | 2 | 1 |" in text
    plt.close(premise.figure([]))
