"""The objectives experiment's task, batches, trainer and shipped runs (``depthutils.ladder.objectives``)."""
from __future__ import annotations

import json

import pytest
import torch

from depthutils.ladder import registry
from depthutils.ladder.objectives import (
    EVAL_STEPS,
    GEOMETRIES,
    IGNORE,
    NULL,
    OBJECTIVES,
    TRAIN_STEPS,
    ObjectiveBatches,
    accuracy,
)
from depthutils.ladder.tokenizer import load_tokenizer
from depthutils.ladder.word_problems import TASKS

RUNS = [n for n in registry.SHIPPED_OBJECTIVE_RUNS if (registry.MODELS_DIR / n / "card.json").is_file()]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(registry.TOKENIZER_DIR)


def _parse(task, text: str):
    """``"3 a c = 2"`` -> ``(3, ["a", "c"])``: a chain's start and operations from its decoded text."""
    start, *ops = text[:text.index("=")].split()
    return int(start), ops


@pytest.mark.parametrize("task", list(TASKS))
def test_held_out_chains_are_never_trained(tok, task):
    """No training batch holds a held-out chain, and every evaluation chain of 2+ operations is one."""
    t = TASKS[task]
    batches = ObjectiveBatches(tok, "qa", seed=1, task=t)
    for step in (0, 400, 1500):
        ids, answer, real = batches.task_rows(step)
        for row, r in zip(ids, real):
            text = tok.decode(row[r][1:-1].tolist())  # without BOS and EOS
            assert not t.is_heldout(*_parse(t, text)), text
    for k in EVAL_STEPS[1:]:
        assert all(e.meta["heldout"] for e in t.eval_chains(20, k))


@pytest.mark.parametrize("task", list(TASKS))
def test_the_curriculum_adds_one_length_every_stage(tok, task):
    batches = ObjectiveBatches(tok, "a", seed=2, task=TASKS[task])
    per_op = 2 if task[0] in "zc" else 1  # "+3" is two tokens (Z10, C10), "a" one
    steps = lambda s: {int((r.sum() - 6) // per_op) for r in batches.task_rows(s)[2]}  # noqa: E731  BOS x = ␣ a EOS
    assert steps(0) == {1}
    assert max(steps(1500)) == TRAIN_STEPS[-1] and min(steps(1500)) == 1


@pytest.mark.parametrize("task", list(TASKS))
@pytest.mark.parametrize("objective", ["a", "qa", "lm"])
def test_targets_of_each_objective(tok, objective, task):
    """The objectives share their task rows (per task, seed and step) and differ in the loss only: A counts the
    answer digit, Q+A every token after BOS, LM adds English rows counted whole."""
    t = TASKS[task]
    batches = ObjectiveBatches(tok, objective, seed=1, corpus_dir=registry.DEFAULT_CORPUS_DIR, task=t)
    ids, answer, real = batches.task_rows(700)
    ref_ids, _, _ = ObjectiveBatches(tok, "a", seed=1, task=t).task_rows(700)
    assert torch.equal(ids, ref_ids)
    assert not torch.equal(ids, ObjectiveBatches(tok, "a", seed=2, task=t).task_rows(700)[0])
    pairs = batches.pairs(700)
    assert len(pairs) == (2 if objective == "lm" else 1)
    x, y, w = pairs[0]
    assert torch.equal(x, ids[:, :-1]) and len(x) == GEOMETRIES[task].examples
    counted = y != IGNORE
    # one mean per modelled part: the answer weighs 1 under every objective, the rest of the chains 1 more
    assert float(w[answer[:, 1:]].sum()) == pytest.approx(1.0)
    assert float(w.sum()) == pytest.approx(1.0 if objective == "a" else 2.0)
    assert bool((w[~counted] == 0).all())
    if objective == "a":
        assert counted.sum(1).tolist() == [1] * len(ids)  # one answer digit per chain
        for row, target in zip(ids, y):
            want = t.apply(*_parse(t, tok.decode(row[1:].tolist())))
            assert tok.decode([int(target[target != IGNORE][0])]) == str(want)
            assert tok.decode(row[:int(torch.nonzero(target != IGNORE)[0]) + 1].tolist()).endswith("= ")
    else:
        assert torch.equal(counted, real[:, 1:])
    if objective == "lm":
        tx, ty, tw = pairs[1]
        assert tx.shape == (GEOMETRIES[task].text_rows, GEOMETRIES[task].text_len) and bool((ty != IGNORE).all())
        assert float(tw.sum()) == pytest.approx(1.0)
        assert torch.equal(tx[:, 1:], ty[:, :-1])
    again = ObjectiveBatches(tok, objective, seed=1, corpus_dir=registry.DEFAULT_CORPUS_DIR, task=t).pairs(700)
    assert all(torch.equal(a, b) for p, q in zip(pairs, again) for a, b in zip(p, q))  # a resume sees the same


def test_the_loss_is_one_mean_per_part():
    """An independent route to the trainer's loss: the answer tokens' mean cross-entropy plus the other tokens'
    mean, computed position by position; A's is the answer mean alone, which is also the plain token mean."""
    from depthutils.ladder.train import loss_of

    tok = load_tokenizer(registry.TOKENIZER_DIR)
    torch.manual_seed(0)
    from transformers import LlamaConfig, LlamaForCausalLM
    model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                         num_attention_heads=2, num_key_value_heads=2, vocab_size=2048)).eval()
    for objective in ("a", "qa"):
        ids, answer, real = ObjectiveBatches(tok, objective, seed=3).task_rows(900)
        with torch.no_grad():
            log_p = model(input_ids=ids[:, :-1]).logits.log_softmax(-1)
            ce = -log_p.gather(-1, ids[:, 1:, None])[..., 0]
            want = ce[answer[:, 1:]].mean()
            if objective == "qa":
                want = want + ce[real[:, 1:] & ~answer[:, 1:]].mean()
            got = loss_of(model, ObjectiveBatches(tok, objective, seed=3).pairs(900))
        assert float(got) == pytest.approx(float(want), rel=1e-5)
        if objective == "a":
            (x, y, _), = ObjectiveBatches(tok, objective, seed=3).pairs(900)
            with torch.no_grad():
                assert float(loss_of(model, [(x, y, None)])) == pytest.approx(float(want), rel=1e-5)
        # the gradients too: the trainer unembeds the counted positions only, the reference every position
        grads = []
        for route in ("reference", "trainer"):
            model.zero_grad()
            if route == "reference":
                ce = -model(input_ids=ids[:, :-1]).logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]
                loss = ce[answer[:, 1:]].mean() + (ce[real[:, 1:] & ~answer[:, 1:]].mean() if objective == "qa" else 0)
            else:
                loss = loss_of(model, ObjectiveBatches(tok, objective, seed=3).pairs(900))
            loss.backward()
            grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
        torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-6)


def test_training_keeps_snapshots_exports_float16_and_resumes(tmp_path, monkeypatch):
    """The trainer on an objective spec: the log-spaced snapshots, the float16 export, the token counts in
    training.json, and a resume that continues the run."""
    from safetensors import safe_open

    from depthutils.ladder.train import train

    spec = dict(registry.SPECS["objective-s5-qa-1"], steps=4, snapshots=(2, 4), layers=2, warmup=2)
    monkeypatch.setitem(registry.SPECS, "objective-test", spec)
    out = train("objective-test", ckpt_root=tmp_path / "ckpt", steps=2, out_dir=tmp_path / "m1", threads=1)
    assert [p.name for p in sorted((tmp_path / "ckpt" / "objective-test" / "snapshots").iterdir())] == ["step-000002"]
    info = json.loads((out / "training.json").read_text())
    assert info["steps"] == 2 and (info["task"], info["objective"]) == ("s5", "qa") and info["text_tokens"] == 0
    assert 0 < info["loss_targets"] <= info["task_tokens"] == info["tokens"]
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}
    out = train("objective-test", ckpt_root=tmp_path / "ckpt", steps=4, out_dir=tmp_path / "m2", threads=1)
    log = (out / "train_log.csv").read_text().splitlines()
    assert log[0].startswith("step,loss") and json.loads((out / "training.json").read_text())["steps"] == 4
    assert json.loads((out / "training.json").read_text())["task_tokens"] > info["task_tokens"]
    assert [p.name for p in sorted((tmp_path / "ckpt" / "objective-test" / "snapshots").iterdir())] == \
        ["step-000002", "step-000004"]


@pytest.mark.parametrize("name", RUNS)
def test_shipped_run_matches_its_card_and_spec(name, tok):
    """Each shipped run: its card's accuracy re-measured (the float16 weights, upcast), its spec's recipe, its
    card the experiment's table holds, and the task tokens every run of a task and seed shares."""
    from transformers import AutoModelForCausalLM

    from depthutils.analysis.objectives_tables import read_tables

    folder = registry.MODELS_DIR / name
    card = json.loads((folder / "card.json").read_text())
    info = json.loads((folder / "training.json").read_text())
    spec = registry.SPECS[name]
    assert (info["steps"], info["lr"], info["task"], info["objective"], info["seed"]) == \
        (spec["steps"], spec["lr"], spec["task"], spec["objective"], spec["seed"])
    assert info["stored_dtype"] == "float16" and card["shipped"]
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    assert card["params"] == info["params_total"] == sum(p.numel() for p in model.parameters())
    got = accuracy(model, tok, steps=(1, 3, 6), task=TASKS[spec["task"]])
    assert all(abs(got[k] - card["accuracy"][str(k)]) < 1e-9 for k in got), (got, card["accuracy"])
    tables = read_tables()
    assert tables is not None and tables["cards"][name] == card
    seed = [c for c in tables["cards"].values() if (c["task"], c["seed"]) == (spec["task"], spec["seed"])]
    same = [c["task_tokens"] for c in seed if c["objective"] in OBJECTIVES]
    assert len(same) == 3 and len(set(same)) == 1
    # the null control's A′ trains on another draw of the examples: as many chains, other tokens
    assert all(c["task_tokens"] != same[0] for c in seed if c["objective"] == NULL)


def test_shipped_runs_and_tables_fit_their_budget():
    """The shipped runs and the experiment's tables add at most 30 MB to the repository."""
    from depthutils.analysis.objectives_tables import TABLES_DIR

    if len(RUNS) < len(registry.SHIPPED_OBJECTIVE_RUNS):
        pytest.skip(f"{len(RUNS)} of {len(registry.SHIPPED_OBJECTIVE_RUNS)} runs shipped")
    files = [f for n in RUNS for f in (registry.MODELS_DIR / n).iterdir()] + list(TABLES_DIR.iterdir())
    size = sum(f.stat().st_size for f in files)
    assert size <= 30 * 2**20, f"{size / 2**20:.1f} MiB"


def test_a_run_on_another_recipe_is_trained_again(tmp_path):
    """A finished run counts as trained only on the recipe its spec has now (Z10's chains a step, the text rows
    of LM), so a run trained on an earlier recipe is trained again (and leaves the tables)."""
    import json

    from depthutils.ladder.objectives import current_recipe
    from depthutils.ladder.runs import is_trained, out_dir

    name = "objective-z10-lm-2"
    geo = GEOMETRIES["z10"]
    info = dict(name=name, task="z10", objective="lm", steps=registry.SPECS[name]["steps"],
                batch_size=geo.examples, text_rows=geo.text_rows)
    folder = out_dir(name, tmp_path)
    folder.mkdir(parents=True)
    assert not is_trained(name, tmp_path)
    (folder / "training.json").write_text(json.dumps(info))
    assert current_recipe(info) and is_trained(name, tmp_path)
    for change in (dict(batch_size=64), dict(text_rows=4), dict(steps=1200)):
        (folder / "training.json").write_text(json.dumps({**info, **change}))
        assert not is_trained(name, tmp_path), change


def test_the_sweeps_loss_is_flat_only_when_its_last_quarter_stops_falling():
    from depthutils.ladder.sweep import converged

    falling = [(s, 2.0 - s / 100) for s in range(10, 101, 10)]
    assert not converged(falling, 100)
    assert converged([(s, 1.0) for s in range(10, 101, 10)], 100)
    assert converged([(s, 0.004 - s * 1e-5) for s in range(10, 101, 10)], 100)  # near 0: flat within 0.01 nats
    assert not converged([(10, 1.0)], 100)  # a log that stops early says nothing of the last quarter


def test_a_sweep_run_trains_at_its_own_chains_a_step_and_gives_a_row_per_snapshot(tmp_path, monkeypatch):
    """A run of the depth-necessity sweep: its spec's chains a step (not its task's), its recipe recognised, and one
    row of the table per snapshot with the accuracy at every length and the loss logged there."""
    from depthutils.ladder import sweep
    from depthutils.ladder.runs import is_trained, out_dir
    from depthutils.ladder.train import train

    name = registry.SWEEP_RUNS[0]
    assert registry.SPECS[name]["examples"] == registry.SWEEP_EXAMPLES != GEOMETRIES["s5"].examples
    spec = dict(registry.SPECS[name], steps=4, snapshots=(2, 4), layers=1, warmup=2, examples=6)
    monkeypatch.setitem(registry.SPECS, name, spec)
    monkeypatch.setattr("depthutils.ladder.train.LOG_EVERY", 2)
    train(name, ckpt_root=tmp_path, out_dir=out_dir(name, tmp_path), threads=1)
    info = json.loads((out_dir(name, tmp_path) / "training.json").read_text())
    assert info["batch_size"] == 6 and is_trained(name, tmp_path)
    assert (info["schedule"], info["longest"]) == ("constant", registry.SWEEP_LONGEST)
    for change in (dict(schedule="cosine"), dict(longest=6)):  # another recipe is not this run
        (out_dir(name, tmp_path) / "training.json").write_text(json.dumps({**info, **change}))
        assert not is_trained(name, tmp_path), change
    (out_dir(name, tmp_path) / "training.json").write_text(json.dumps(info))
    rows = sweep.rows(tmp_path, names=[name])
    assert [r["step"] for r in rows] == [2, 4] and all(r["loss"] is not None for r in rows)
    assert [k for k in registry.SWEEP_EVAL] == list(range(1, 17))
    assert {f"acc_{k}" for k in registry.SWEEP_EVAL} <= set(rows[0]) and all(0 <= r["acc_16"] <= 1 for r in rows)
    table = sweep.write_table(tmp_path, tmp_path / "rows.csv").read_text().splitlines()
    assert table[0].startswith("task,layers,seed,step,loss,converged,acc_1") and len(table) == 3
    # the table is the sweep's record: a run with rows is not trained again, and a rewrite keeps the rows of runs
    # whose checkpoints are gone
    other, small = tmp_path / "rows.csv", registry.sweep_name(spec["task"], spec["layers"], spec["seed"])
    assert sweep.tabled(other) == {small} and sweep.missing(other) == registry.SWEEP_RUNS  # one layer: not the sweep's
    gone = registry.SWEEP_RUNS[1]
    task, layers, seed = registry.SPECS[gone]["task"], registry.SPECS[gone]["layers"], registry.SPECS[gone]["seed"]
    with open(other, "a") as f:
        f.write(f"{task},{layers},{seed},500,0.5,False" + ",0.5" * len(registry.SWEEP_EVAL) + "\n")
    sweep.write_table(tmp_path, other)
    again = other.read_text().splitlines()
    assert len(again) == 4 and again[2:] == table[1:3] and again[1].startswith(f"{task},{layers},{seed},500,")
    assert sweep.tabled(other) == {small, gone} and sweep.missing(other) == [n for n in registry.SWEEP_RUNS if n != gone]


def test_the_sweep_trains_longer_chains_at_a_constant_rate():
    """The sweep's runs: chains of 1 to SWEEP_LONGEST operations once the curriculum reaches them (an objectives run:
    1-6), the learning rate flat after the warm-up (the objectives' decays by cosine to a tenth)."""
    from depthutils.ladder.train import lr_lambda

    tok = load_tokenizer(registry.TOKENIZER_DIR)

    def lengths(batches, step):
        ids, _, real = batches.task_rows(step)
        prompts = tok.batch_decode([row[1:n] for row, n in zip(ids, real.sum(1))])
        return {p.split(" = ")[0].count(" ") for p in prompts}  # "x op op ... = y": one space per operation

    t = TASKS["s5m"]
    assert lengths(ObjectiveBatches(tok, "a", seed=1, task=t, longest=12), 5000) == set(range(1, 13))
    assert lengths(ObjectiveBatches(tok, "a", seed=1, task=t, longest=12), 300) == {1, 2}  # the curriculum
    assert lengths(ObjectiveBatches(tok, "a", seed=1, task=t), 5000) == set(range(1, 7))
    assert [lr_lambda(s, 50, 6000, schedule="constant") for s in (0, 49, 50, 3000, 5999)] == [0.02, 1.0, 1.0, 1.0, 1.0]
    assert lr_lambda(5999, 50, 6000) == pytest.approx(0.1, abs=1e-6)
    with pytest.raises(ValueError, match="schedule must be"):
        lr_lambda(0, 50, 6000, schedule="linear")
