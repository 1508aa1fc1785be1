"""Chapter 10's comparisons (``depthutils.analysis.objectives``) and grading (``depthutils.book.claims.objectives``):
on made-up tables whose answer is known, against independent formulas, every outcome; and the shipped runs'
live measurement against their stored rows."""
from __future__ import annotations

import numpy as np
import pytest

from depthutils.analysis.at_answer import ARRAYS
from depthutils.analysis.objectives import LIVE_RTOL, ObjectivesResult, live_gap, objectives
from depthutils.analysis.objectives_measure import write_tables
from depthutils.analysis.objectives_tables import TABLES_DIR, read_tables
from depthutils.book.claims import objectives as oc
from depthutils.ladder.objectives import EVAL_STEPS, NULL, TRAIN_STEPS

SEEDS = (1, 2, 3, 4, 5)
STEPS = (100, 200, 400)
N = 4  # prompts per step count


def _made_up(shift: dict, acc: dict | None = None, noise: float = 0.02, flip_seed: int | None = None,
             null: float | None = None):
    """A result for task s5: every objective's measures on the same base arrays, ``depth`` and ``on_later`` moved
    by ``shift[objective]`` (``flip_seed``: that seed's shifts reversed); accuracy ``acc[(objective, step)]``
    (default 0.9 on every step count; ``acc[(run, k)]``: that run's on k operations at every step). With ``null``,
    the null control's A′ runs too, shifted by ``null``."""
    rng = np.random.default_rng(0)
    base = {a: rng.uniform(0.2, 1.0, (len(TRAIN_STEPS) * N, 8)) for a in ARRAYS}
    base["kl"] = np.sort(base["kl"], 1)[:, ::-1].copy()
    base["on_later"][:, -1] = np.nan
    ks = np.repeat(TRAIN_STEPS, N)
    cards, snaps, rows = {}, {}, {}
    if null is not None:
        shift = {**shift, NULL: shift["a"] + null}
    for o in shift:
        for s in SEEDS:
            name = f"objective-s5-{o}-{s}"
            cards[name] = {"name": name, "task": "s5", "objective": o, "seed": s, "steps": STEPS[-1], "layers": 8,
                           "task_label": "S5 (permutations of 5 points)"}
            given = acc or {}
            snaps[name] = {st: {k: given.get((name, k), given.get((o, st, k), given.get((o, st), 0.9)))
                                for k in EVAL_STEPS}
                           for st in STEPS}
            sign = -1 if s == flip_seed else 1
            for st in STEPS:
                arr = {a: v + rng.normal(0, noise, v.shape) for a, v in base.items()}
                late = np.zeros(8)
                late[4:] = sign * shift[o]
                arr["on_later"] = arr["on_later"] + late
                arr["output"] = arr["output"] + late
                arr["depth"] = rng.uniform(0.3, 0.5, len(ks)) + sign * shift[o]
                arr["k"] = ks
                rows[(name, st)] = arr
    return ObjectivesResult(cards, snaps, rows, n_boot=300)


def test_a_comparison_matches_independent_formulas():
    """The point difference is the mean over seeds of each seed's own difference, each from the mean curves of
    the chosen step counts' prompts; the interval holds it; the seeds are counted by sign."""
    r = _made_up({"a": 0.2, "qa": 0.1, "lm": 0.0})
    steps, levels = r.final_steps("s5"), (2, 3, 5)
    c = r.compare("s5", steps, "later", "a", "qa", levels)

    def later(name):
        arr = r.rows[(name, STEPS[-1])]
        curve = np.nanmean(arr["on_later"][np.isin(arr["k"], levels)], 0)
        return np.nanmean(curve[4:]) / np.mean(curve[:4])

    own = [later(f"objective-s5-a-{s}") - later(f"objective-s5-qa-{s}") for s in SEEDS]
    assert c.diff == pytest.approx(np.mean(own))
    assert [c.seed_diffs[s] for s in SEEDS] == pytest.approx(own)
    assert c.lo < c.diff < c.hi and c.agree == 5 and c.n_seeds == 5
    d = r.compare("s5", steps, "depth", "qa", "lm", levels)
    want = np.mean([r.rows[(f"objective-s5-qa-{s}", 400)]["depth"][np.isin(np.repeat(TRAIN_STEPS, N), levels)].mean()
                    - r.rows[(f"objective-s5-lm-{s}", 400)]["depth"][np.isin(np.repeat(TRAIN_STEPS, N), levels)].mean()
                    for s in SEEDS])
    assert d.diff == pytest.approx(want)


@pytest.mark.parametrize("shift,flip,outcome", [
    ({"a": 0.3, "qa": 0.15, "lm": 0.0}, None, "shown"),
    ({"a": 0.0, "qa": 0.15, "lm": 0.3}, None, "not shown"),
    ({"a": 0.0, "qa": 0.0, "lm": 0.0}, None, "mixed"),
])
def test_the_verdict_comes_out_every_way(shift, flip, outcome):
    g = oc.grading(_made_up(shift, noise=0.01 if outcome != "mixed" else 0.05, flip_seed=flip, null=0.0))
    assert g.calibrated() and g.outcome("s5", "matched") == outcome
    assert oc.verdict(g, "s5").outcome == outcome


def _cmp(diffs, a: str = "a", b: str = "qa"):
    """A comparison with the given per-seed differences (the means and bootstrap bands play no part in a grade)."""
    from depthutils.analysis.objectives import Comparison

    d = dict(zip(SEEDS, diffs))
    return Comparison("s5", "depth", a, b, (2,), 0.0, 0.0, (None, None), (None, None), float(np.mean(diffs)),
                      None, None, d, {s: 0.0 for s in d}, {s: 0.0 for s in d})


def test_a_difference_is_graded_over_seeds_against_the_null():
    """The band is mean ± t95(4) · max(own sd, A − A′'s sd) / √5 (numpy's own sd): a difference clear of 0 on its
    own spread is mixed once A − A′ spreads wider; without A′ it is not tested; a tie (|d| < TIE) agrees with
    neither direction; the null is graded by the same rule on its own spread."""
    d, quiet, loud = [0.10, 0.12, 0.11, 0.09, 0.13], [0.01, -0.01, 0.0, 0.02, -0.02], [0.3, -0.3, 0.2, -0.25, 0.1]
    lo, hi = oc.seed_band(_cmp(d), _cmp(quiet, "a", NULL))
    half = 2.7764 * max(np.std(d, ddof=1), np.std(quiet, ddof=1)) / np.sqrt(5)
    assert (lo, hi) == pytest.approx((np.mean(d) - half, np.mean(d) + half))
    assert oc.grade(_cmp(d), _cmp(quiet, "a", NULL)) == "shown"
    assert oc.grade(_cmp(d), _cmp(loud, "a", NULL)) == "mixed"
    assert oc.grade(_cmp(d), None) == "not tested" and oc.seed_band(_cmp(d), None) == (None, None)
    assert oc.grade(_cmp([-x for x in d]), _cmp(quiet, "a", NULL)) == "not shown"
    tied = _cmp([0.10, 0.12, 0.11, 0.0004, 0.13])
    assert oc.signs(tied) == (4, 0, 1) and oc.grade(tied, _cmp(quiet, "a", NULL)) == "mixed"
    assert oc.grade(_cmp(quiet, "a", NULL), _cmp(quiet, "a", NULL)) == "mixed"
    assert oc.grade(_cmp(d, "a", NULL), _cmp(d, "a", NULL)) == "shown"  # a null this far off is a false shown


def test_the_null_control_can_fail():
    """A′ (A on other examples) drawn like A leaves the rule calibrated and a shown claim shown; an A′ that differs
    from A on every graded measure is graded shown by the rule, its false-shown rate exceeds 5%, and the same
    shown claim is reported as mixed; without A′ nothing is graded."""
    shift = {"a": 0.3, "qa": 0.15, "lm": 0.0}
    none = oc.grading(_made_up(shift, noise=0.01))
    assert none.false_shown() == (0, 0) and not none.calibrated()
    assert none.conditions[("s5", "matched")].raw_outcome() == "not tested"
    assert "null control (A′) was not run" in oc.verdict(none, "s5").numbers
    same = oc.grading(_made_up(shift, noise=0.01, null=0.0))
    false, n = same.false_shown()
    assert n == 2 * len(oc.GRADED) * len(oc.CONDITIONS) and false <= 0.05 * n and same.outcome("s5", "matched") == "shown"
    off = oc.grading(_made_up(shift, noise=0.01, null=-0.15))
    # A′ is shifted on the later-layer, output and depth measures (the lens's arrays are not): all three shown
    assert set(off.conditions[("s5", "matched")].null_grades().values()) == {"shown"}
    assert off.false_shown() == (6, 12) and not off.calibrated()
    assert off.conditions[("s5", "matched")].raw_outcome() == "shown" and off.outcome("s5", "matched") == "mixed"
    assert any("reported as mixed" in n for n in oc.verdict(off, "s5").notes)


def test_every_seed_must_agree_and_no_grade_depends_on_the_draws():
    """A seed whose difference has the other sign keeps a comparison from being shown, even where the interval
    over seeds and prompts lies above 0; the grades are the same at 300 bootstrap draws as at 500."""
    r = _made_up({"a": 0.3, "qa": 0.15, "lm": 0.0}, noise=0.01, flip_seed=3, null=0.0)
    c = oc.grading(r).conditions[("s5", "final")]
    assert c.comparisons[(("a", "qa"), "depth")].agree == 4 and c.grade(("a", "qa"), "depth") != "shown"
    more = _made_up({"a": 0.3, "qa": 0.15, "lm": 0.0}, noise=0.01, flip_seed=3, null=0.0)
    more.n_boot = 500
    assert oc.grading(more).conditions[("s5", "final")].grades() == c.grades()


def test_every_run_must_learn_a_graded_count_and_matched_is_a_match():
    """A step count counts only where every run (not the seed mean) reaches LEARNED, and never one operation; matched
    accuracy falls back to the hardest step count every run learns, reads each run at its first snapshot that
    reaches the level, and is not tested where a run's snapshot lies more than MATCH_TOL above it."""
    assert oc.LEARNED == 0.9 and oc.MIN_COMPOSED == 2
    acc = {("qa", 100): 0.5, ("qa", 200): 0.92, ("qa", 400): 0.95, ("lm", 100): 0.91, ("lm", 200): 0.91,
           ("lm", 400): 0.91, ("a", 100): 0.9, ("a", 200): 0.95, ("a", 400): 0.97}
    acc.update({("qa", st, 6): 0.95 if st == 400 else 0.5 for st in STEPS})  # Q+A's best on 6 operations: 0.95 ...
    acc[("objective-s5-qa-2", 6)] = 0.89  # ... but seed 2 never learns 6 operations (the mean of Q+A does)
    r = _made_up({"a": 0.3, "qa": 0.15, "lm": 0.0}, acc=acc, noise=0.01)
    g = oc.grading(r)
    m, f = g.conditions[("s5", "matched")], g.conditions[("s5", "final")]
    assert m.match_k == 5 and m.match_level == pytest.approx(0.91)
    assert {n: s for n, s in m.steps.items() if "-qa-" in n} == {f"objective-s5-qa-{s}": 200 for s in SEEDS}
    assert {n: s for n, s in m.steps.items() if "-a-" in n} == {f"objective-s5-a-{s}": 200 for s in SEEDS}
    assert {n: s for n, s in m.steps.items() if "-lm-" in n} == {f"objective-s5-lm-{s}": 100 for s in SEEDS}
    assert m.why is None and f.why is None
    assert f.levels == m.levels == (2, 3, 4, 5) and f.dropped[6] == {"objective-s5-qa-2": pytest.approx(0.89)}
    assert 1 not in f.levels  # one operation is a lookup: never graded, however well learned
    sparse = {**acc, ("a", 200): 0.99}  # A jumps from 0.90 to 0.99 between snapshots: no match at 0.91
    assert "too sparse" in oc.grading(_made_up({"a": 0.3, "qa": 0.15, "lm": 0.0}, acc=sparse, noise=0.01)
                                      ).conditions[("s5", "matched")].why
    nothing = oc.grading(_made_up({"a": 0, "qa": 0, "lm": 0}, acc={("lm", st): 0.89 for st in STEPS}))
    assert nothing.conditions[("s5", "matched")].why and oc.verdict(nothing, "s5").outcome == "not tested"
    lookup = {("lm", st, k): 0.1 for st in STEPS for k in EVAL_STEPS if k >= 2}  # LM learns one operation only
    only_one = oc.grading(_made_up({"a": 0.3, "qa": 0.15, "lm": 0.0}, acc=lookup, noise=0.01))
    for name in oc.CONDITIONS:
        assert "2 or more operations" in only_one.conditions[("s5", name)].why
    assert oc.verdict(only_one, "s5").outcome == "not tested"


def test_no_objective_is_graded_without_the_premise(monkeypatch):
    """A comparison that would be shown is not tested where the premise (S5 needs more layers than C10) is not
    shown, and the verdict says why; nor where it is shown but the runs were trained on other tasks than the
    premise's (the shipped runs: S5 and Z10 with operations drawn independently); on the premise's tasks it stands."""
    from depthutils.book.grading import Verdict

    g = oc.grading(_made_up({"a": 0.3, "qa": 0.15, "lm": 0.0}, noise=0.01, null=0.0))
    held = Verdict("premise", "rule", "shown", "S5 4 layers, C10 2 layers.")
    failed = Verdict("premise", "rule", "not shown", "Layers needed: S5 4 layers, C10 4 layers.",
                     value="S5 4 layers, C10 4 layers")
    assert oc.PREMISE_TASKS == ("s5m", "c10m") and not oc.on_premise_tasks()
    elsewhere = g.verdicts(held)["s5"]
    assert elsewhere.outcome == "not tested" and "but these runs were trained on S5 and Z10" in elsewhere.numbers
    v = g.verdicts(failed)["s5"]
    assert v.outcome == "not tested" and "is not shown (S5 4 layers, C10 4 layers)" in v.numbers
    monkeypatch.setattr(oc, "on_premise_tasks", lambda: True)  # runs trained on the premise's tasks
    assert g.verdicts(held)["s5"].outcome == oc.verdict(g, "s5").outcome == "shown"


def test_the_conclusion_says_what_is_graded_and_what_the_rule_alone_would_say(monkeypatch):
    """Without the premise, or on runs trained on other tasks than the premise's, the conclusion grades nothing and
    gives the rule's own outcome; with both, the outcome; the null control's size beside the objectives' and the
    rule's false-shown rate are stated either way."""
    from depthutils.book.claims.objectives import reading
    from depthutils.book.grading import Verdict

    g = oc.grading(_made_up({"a": 0.3, "qa": 0.15, "lm": 0.0}, noise=0.01, null=0.0))
    shown = Verdict("premise", "rule", "shown", "S5 4 layers, C10 2 layers.")
    elsewhere = reading.conclusion(g, shown)
    assert ". The premise was measured on S5 and C10" in elsewhere and "So no objective is graded" in elsewhere
    monkeypatch.setattr(reading, "on_premise_tasks", lambda: True)  # runs trained on the premise's tasks
    held = reading.conclusion(g, shown)
    failed = reading.conclusion(g, Verdict("premise", "rule", "not shown", "…", value="S5 4 layers, C10 4 layers"))
    assert "at matched accuracy *shown*" in held and "no objective is graded" not in held
    assert "*not shown* (S5 4 layers, C10 4 layers). At the lengths trained, S5 does not need more layers" in failed
    assert "the design has to change" in failed and "before an objective can be graded. So no objective is graded" \
        in failed
    unsettled = reading.conclusion(g, Verdict("premise", "rule", "mixed", "…", value="S5 4 layers, C10 at no layer count of the sweep"))
    assert "The sweep does not settle whether S5 needs more layers" in unsettled and "the design" not in unsettled
    assert "by the rule alone, it would be *shown* at matched accuracy" in failed
    for text in (held, failed):
        assert "the size of A − A′ over that of A − Q+A" in text and f"grades {g.false_shown_words()} null" in text
        assert "**Z10**: not run." in text and "20 runs of 8 layers trained for 400 steps on S5" in text


def _measured_run(root, name: str, seed: int, values, batch_size: int = 64) -> None:
    """A run's measurement folder as :func:`measure_run` writes it, with made-up numbers (S5's recipe unless
    ``batch_size`` says otherwise)."""
    import json

    from depthutils.analysis.objectives_measure import write_csv
    from depthutils.analysis.objectives_tables import ROW_FIELDS, SNAPSHOT_FIELDS

    folder = root / name / "measured"
    folder.mkdir(parents=True)
    card = {"name": name, "task": "s5", "objective": "a", "seed": seed, "steps": 2400, "batch_size": batch_size,
            "text_rows": 0, "shipped": False}
    (folder / "card.json").write_text(json.dumps(card))
    write_csv(folder / "snapshots.csv", SNAPSHOT_FIELDS,
               [{"run": name, "task": "s5", "objective": "a", "seed": seed, "step": 19,
                 **{f"accuracy_{k}": 0.125 * k for k in EVAL_STEPS}}])
    write_csv(folder / "rows.csv", ROW_FIELDS, [dict(zip(ROW_FIELDS, [name, 19, k, 0, *map(float, v)]))
                                                 for k, v in zip((1, 2), values)])


def test_the_tables_round_trip_and_grow_run_by_run(tmp_path):
    """What :func:`write_tables` writes, :func:`read_tables` reads back (6 significant digits); a run measured
    elsewhere (not under this checkpoint root) keeps its rows when another run is added."""
    from depthutils.analysis.objectives_tables import ROW_FIELDS

    rng = np.random.default_rng(1)
    values = rng.uniform(0, 3, (2, len(ROW_FIELDS) - 4))
    first, second = "objective-s5-a-1", "objective-s5-a-2"
    _measured_run(tmp_path / "here", first, 1, values)
    assert write_tables(tmp_path / "here", tmp_path / "out", runs=[first]) == {"runs": 1, "snapshots": 1, "rows": 2}
    t = read_tables(tmp_path / "out")
    assert t["cards"][first]["seed"] == 1 and t["snapshots"][first][19][8] == 1.0
    got = t["rows"][(first, 19)]
    assert got["k"].tolist() == [1, 2]
    np.testing.assert_allclose(np.concatenate([got[a] for a in ARRAYS], 1), values[:, :-1], rtol=1e-5)
    _measured_run(tmp_path / "there", second, 2, values + 1)
    assert write_tables(tmp_path / "there", tmp_path / "out") == {"runs": 2, "snapshots": 2, "rows": 4}
    t = read_tables(tmp_path / "out")
    assert set(t["cards"]) == {first, second}
    np.testing.assert_allclose(t["rows"][(first, 19)]["depth"], values[:, -1], rtol=1e-5)
    np.testing.assert_allclose(t["rows"][(second, 19)]["depth"], values[:, -1] + 1, rtol=1e-5)
    # a run trained on another recipe (here 128 chains a step, where S5 trains on 64) leaves the tables
    third = "objective-s5-a-3"
    _measured_run(tmp_path / "old", second, 2, values, batch_size=128)
    _measured_run(tmp_path / "new", third, 3, values)
    write_tables(tmp_path / "old", tmp_path / "out")
    assert write_tables(tmp_path / "new", tmp_path / "out") == {"runs": 2, "snapshots": 2, "rows": 4}
    assert set(read_tables(tmp_path / "out")["cards"]) == {first, third}


def test_the_shipped_runs_measured_live_equal_their_rows():
    """Each shipped run, measured now, equals the rows the training command stored for its last snapshot."""
    if read_tables(TABLES_DIR) is None:
        pytest.skip("the experiment's tables are not written")
    r = objectives(n_boot=10, progress_bar=False)
    assert len(r.live) == 6
    assert max(r.live_gap.values()) < LIVE_RTOL, r.live_gap
    a, qa = "objective-s5-a-1", "objective-s5-qa-1"  # another run's rows are far outside the bound
    assert live_gap(r.live[a], r.rows[(qa, r.cards[qa]["steps"])]) > 100 * LIVE_RTOL
