"""Chapter 10's premise (``depthutils.book.claims.objectives.premise``): on made-up sweep tables whose answer is
known, every outcome; the table read back as written; the figure and table drawn from the shipped table."""
from __future__ import annotations

import csv

import matplotlib.pyplot as plt
import pytest

from depthutils.book.claims.objectives import premise
from depthutils.ladder.objectives import EVAL_STEPS
from depthutils.ladder.registry import SWEEP_LAYERS, SWEEP_SEEDS, SWEEP_STEPS

HARD, CONTROL, FIRST = "s5m", "c10m", "z10m"  # the task that needs depth, the premise's control, the first control


def _table(path, worst: dict, rising: dict | None = None, seeds=SWEEP_SEEDS, without=(), loss_flat: bool = False):
    """A sweep table as :func:`depthutils.ladder.sweep.write_table` writes it: three snapshots per run (half, three
    quarters, all of the steps), the last one at ``worst[(task, layers)]`` (or ``worst[(task, layers, seed)]``) on 4
    operations and 1.0 elsewhere, the one at three quarters the same or, for the runs ``rising`` names, lower by
    4·SETTLED; the first control's runs beside them (never learned); the runs ``without`` (task, layers, seed) left
    out. The training loss is flat only with ``loss_flat``: a memorising run's falls while its accuracy stays."""
    fields = ["task", "layers", "seed", "step", "loss", "converged", *(f"acc_{k}" for k in EVAL_STEPS)]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for task in (HARD, CONTROL, FIRST):
            for n in SWEEP_LAYERS:
                for s in [s for s in seeds if (task, n, s) not in without]:
                    last = worst.get((task, n, s), 0.5 if task == FIRST else worst.get((task, n)))
                    up = 4 * premise.SETTLED if (rising or {}).get((task, n, s)) else 0.0
                    for step, acc4 in ((SWEEP_STEPS // 2, last / 2), (3 * SWEEP_STEPS // 4, last - up),
                                       (SWEEP_STEPS, last)):
                        w.writerow(dict(task=task, layers=n, seed=s, step=step, loss=0.1, converged=loss_flat,
                                        **{f"acc_{k}": acc4 if k == 4 else 1.0 for k in EVAL_STEPS}))
    return path


# S5 learned from 4 layers, C10 from 2: the premise as the chapter wants it
NEEDS_DEPTH = {(HARD, 2): 0.5, (HARD, 4): 0.95, (HARD, 8): 1.0, (CONTROL, 2): 0.95, (CONTROL, 4): 1.0,
               (CONTROL, 8): 1.0}


def test_the_table_reads_back_as_written(tmp_path):
    runs = premise.load(_table(tmp_path / "rows.csv", NEEDS_DEPTH))
    assert len(runs) == 3 * len(SWEEP_LAYERS) * len(SWEEP_SEEDS)
    r = next(r for r in runs if (r.task, r.layers, r.seed) == (HARD, 2, 1))
    assert r.step == SWEEP_STEPS and r.acc[4] == 0.5 and r.worst == 0.5 and not r.learned and not r.converged
    assert r.curve == ((SWEEP_STEPS // 2, 0.25), (3 * SWEEP_STEPS // 4, 0.5), (SWEEP_STEPS, 0.5))
    assert r.settled and r.failed  # its accuracy flat over the last quarter, though its loss was not
    assert premise.layers_needed(runs, HARD) == 4 and premise.layers_needed(runs, CONTROL) == 2
    assert premise.layers_needed(runs, FIRST) is None
    assert premise.load(tmp_path / "missing.csv") == []


def test_one_operation_is_not_graded(tmp_path):
    """Accuracy on one operation (a lookup) does not decide whether a run learned the task."""
    assert 1 not in premise.GRADED_LENGTHS and premise.GRADED_LENGTHS == (2, 3, 4, 5, 6)


@pytest.mark.parametrize("change,rising,outcome", [
    ({}, None, "shown"),
    ({(HARD, 2): 0.95}, None, "not shown"),                        # S5 learned at 2 layers too
    ({(HARD, 2, 3): 0.95}, None, "mixed"),                         # one S5 seed learns it at 2 layers
    ({}, {(HARD, 2, 1): True}, "mixed"),                           # a failing S5 run was still learning
    ({(CONTROL, 2): 0.5, (CONTROL, 4): 0.5, (CONTROL, 8): 0.5}, None, "not shown"),  # the control is harder
    ({(CONTROL, 2): 0.5, (CONTROL, 4): 0.5, (CONTROL, 8): 0.5}, {(CONTROL, 4, 2): True}, "mixed"),  # ... or slower
    ({(CONTROL, 2): 0.5, (CONTROL, 4): 0.5, (CONTROL, 8): 0.5, (HARD, 4): 0.5, (HARD, 8): 0.5}, None,
     "not tested"),                                                # neither task learned at any layer count
    ({(CONTROL, 2): 0.5}, None, "not shown"),                      # both need 4 layers
])
def test_the_premise_comes_out_every_way(tmp_path, change, rising, outcome):
    v = premise.verdict(premise.load(_table(tmp_path / "rows.csv", {**NEEDS_DEPTH, **change}, rising)))
    assert v.outcome == outcome, v.numbers
    flat = premise.verdict(premise.load(_table(tmp_path / "flat.csv", {**NEEDS_DEPTH, **change}, rising, loss_flat=True)))
    assert flat.outcome == outcome, "the training loss does not decide whether a run failed for good"


def test_a_small_rise_over_the_last_quarter_is_settled_and_a_larger_one_is_not():
    def run(first, later):
        return premise.Run(HARD, 2, 1, 6000, False, {k: 0.5 for k in EVAL_STEPS}, ((3000, 0.1), (4500, first), *later))
    assert run(0.50, [(5000, 0.54), (6000, 0.50)]).settled           # +0.04 at best: settled
    assert not run(0.50, [(5000, 0.56), (6000, 0.50)]).settled       # +0.06 on one snapshot: still learning
    assert run(0.50, [(5000, 0.40), (6000, 0.41)]).settled           # falling: settled
    assert not run(0.50, []).settled                                 # one snapshot in the last quarter: unknown


def test_an_incomplete_sweep_is_not_tested(tmp_path):
    v = premise.verdict(premise.load(_table(tmp_path / "rows.csv", NEEDS_DEPTH, seeds=SWEEP_SEEDS[:2])))
    assert v.outcome == "not tested" and "have fewer than 3 seeds" in v.numbers and v.criterion == premise.CRITERION
    assert premise.verdict([]).outcome == "not tested"


@pytest.mark.parametrize("without,outcome", [
    ({(HARD, 8, 3), (CONTROL, 8, 3)}, "shown"),       # the layers that decide it are complete
    ({(CONTROL, 4, 3), (CONTROL, 8, 2)}, "shown"),    # C10 learned at 2 layers by every seed already
    ({(HARD, 2, 3)}, "not tested"),                    # a third S5 seed at 2 layers could learn it: mixed
    ({(CONTROL, 2, 3)}, "not tested"),                 # a third C10 seed at 2 layers could fail: C10 would need 4
    ({(CONTROL, n, s) for n in (4, 8) for s in SWEEP_SEEDS}, "shown"),  # C10 at 2 layers is enough to grade it
])
def test_missing_runs_are_graded_only_when_they_cannot_change_the_outcome(tmp_path, without, outcome):
    """Before the sweep is complete, the premise is graded only if every table it could end with gives the same
    outcome (each missing run learned, failed for good, or failed still learning)."""
    runs = premise.load(_table(tmp_path / "rows.csv", NEEDS_DEPTH, without=without))
    v = premise.verdict(runs)
    assert v.outcome == outcome, v.numbers
    graded = [r for r in runs if r.task != FIRST]  # the first control's runs are in the table, not graded
    assert f"{len(graded)} of its 18 runs" in v.numbers
    assert ("whatever the" in v.numbers) == (outcome != "not tested")
    outcomes = {premise.verdict(table).outcome for table in premise.completions(runs)}
    assert (outcomes == {outcome}) == (outcome != "not tested")
    assert all(len([r for r in table if r.task != FIRST]) == 18 for table in premise.completions(graded))


def test_the_figure_and_table_draw_any_table(tmp_path):
    runs = premise.load(_table(tmp_path / "rows.csv", NEEDS_DEPTH))
    fig = premise.figure(runs)
    assert len(fig.axes) == 4 and all(ax.get_xlabel() for ax in fig.axes)  # S5, C10, Z10, training
    plt.close(fig)
    text = premise.table(runs)
    assert text.count("\n") == len(runs) + 1 and "| S5 | 2 | 1 |" in text and "| C10 | 2 | 1 |" in text
    plt.close(premise.figure([]))
