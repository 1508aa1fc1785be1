"""The project's own depth ladder (data/models): loading, tokenizer, cards, book prompts.

CPU only, offline, well under a minute.  Re-measures 50 held-out addition
chains per model and compares them with the figure in the model's card.json.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "data" / "models"
PROMPTS = ROOT / "data" / "prompts"
SHIPPED = sorted(p.parent.name for p in MODELS.glob("*/config.json"))
#: the ladder's models (the objectives experiment's runs have tests of their own: test_objectives.py)
LADDER = [n for n in SHIPPED if not n.startswith("objective-")]

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from depthutils.ladder import evaluate as ev  # noqa: E402
from depthutils.ladder import registry, tasks  # noqa: E402

#: 50 chains, binomial std at most sqrt(0.25 / 50) = 7.1 points; +-15 points is
#: about 2.1 std in the worst case (p = 0.5), so a correct model fails < 4 % of
#: the time even before counting that the sample is part of the card's set.
TOLERANCE = 0.15
MAX_BYTES = 20 * 10**6


@pytest.fixture(scope="module")
def loaded():
    """The shipped checkpoints, loaded once; the module runs on one thread (tiny models, robust when other
    processes hold a core) and gives the process its threads back when it ends."""
    cache = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)

    def get(name):
        if name not in cache:
            cache[name] = ev.load_checkpoint(name)
        return cache[name]
    yield get
    torch.set_num_threads(threads)


def test_every_model_is_shipped():
    """Every ladder model and the objectives experiment's shipped runs (its other runs, and the depth-necessity
    sweep's, live in their tables)."""
    unshipped = set(registry.OBJECTIVE_RUNS) - set(registry.SHIPPED_OBJECTIVE_RUNS) | set(registry.SWEEP_RUNS)
    assert set(registry.SPECS) - unshipped <= set(SHIPPED)
    for name in SHIPPED:
        assert (MODELS / name / "model.safetensors").stat().st_size <= MAX_BYTES
        assert (MODELS / name / "card.json").is_file()
    assert registry.resolve_alias("default") == MODELS / registry.ALIASES["default"]
    assert registry.resolve_alias("no-such-model") is None
    rows = {r["folder"]: r for r in registry.list_models()}
    assert [rows[f"ladder-{d}"]["layers"] for d in (4, 8, 12, 16)] == [4, 8, 12, 16]


@pytest.mark.parametrize("name", SHIPPED)
def test_tokenizer(name):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast.from_pretrained(str(MODELS / name))
    auto = AutoTokenizer.from_pretrained(str(MODELS / name))
    text = "And God said, Let there be light: 5 + 7 + 5 + 3 + 1 + 7 = 28\nThe spouse of X is"
    ids = fast(text)["input_ids"]
    assert ids == auto(text)["input_ids"]
    assert ids[0] == fast.bos_token_id and fast.bos_token == "<|bos|>"
    assert fast.decode(ids, skip_special_tokens=True) == text
    assert len(fast("0123456789", add_special_tokens=False)["input_ids"]) == 10
    prompt, answer = "5 + 7 + 5 = ", "17"
    assert fast(prompt + answer)["input_ids"] == fast(prompt)["input_ids"] + \
        fast(answer, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("name", LADDER)
def test_heldout_addition_matches_card(name, loaded):
    from transformers import LlamaForCausalLM

    model, tok, style = loaded(name)
    assert isinstance(model, LlamaForCausalLM)
    assert model.config.max_position_embeddings >= 1024
    card = json.loads((MODELS / name / "card.json").read_text())
    sample = ev.addition_test_sample()
    assert len(sample) == 50 and all(tasks.heldout_check("addition", r["prompt"]) for r in sample)
    hits = ev.score(model, tok, style, sample)
    measured = sum(hits) / len(hits)
    assert abs(measured - card["addition_heldout_mix"]["acc"]) <= TOLERANCE, (measured, card)


def test_default_model_meets_bars():
    card = json.loads((registry.resolve_alias("default") / "card.json").read_text())
    assert card["addition"]["2"]["acc"] >= 0.95
    assert card["addition"]["3"]["acc"] >= 0.80


def test_book_prompts_are_heldout_and_answered(loaded):
    book = json.loads((PROMPTS / "book_prompts.json").read_text())
    assert tasks.heldout_check("addition", book["arithmetic"]["prompt"])
    assert tasks.heldout_check("multihop", book["multihop"]["prompt"])
    assert book["arithmetic"]["prompt"].endswith("= ")
    model, tok, style = loaded("default")
    for key, task in (("arithmetic", "addition"), ("multihop", "multihop")):
        row = dict(task=task, **book[key])
        assert ev.score(model, tok, style, [row]) == [True], key


def test_training_sampler_never_emits_heldout():
    rng = random.Random(0)
    for _ in range(2000):
        ex = tasks.sample_addition(rng)
        assert not ex.meta["heldout"]
        ex = tasks.sample_multihop(rng)
        assert not ex.meta["heldout"]
        ex = tasks.sample_word_problem(rng)
        assert not ex.meta["heldout"]


# ---------------------------------------------------------------- shared-layer models

SHARED = sorted(n for n, s in registry.SPECS.items() if s.get("shared_blocks"))
LAYER_KEY = re.compile(r"model\.layers\.(\d+)\.(.+)")


def _layer_tensors(path: Path) -> dict[int, dict]:
    """``{layer index: {parameter name inside the layer: tensor}}`` from a safetensors file."""
    from safetensors import safe_open

    layers: dict[int, dict] = {}
    with safe_open(str(path), framework="pt") as fh:
        for key in fh.keys():
            m = LAYER_KEY.fullmatch(key)
            if m:
                layers.setdefault(int(m.group(1)), {})[m.group(2)] = fh.get_tensor(key)
    return layers


def _repeat_violations(path: Path, blocks: int) -> list[str]:
    """What breaks "layer i is bitwise layer i % blocks, and the blocks differ"."""
    layers = _layer_tensors(path)
    bad = []
    for i in sorted(layers):
        src = layers[i % blocks]
        if set(layers[i]) != set(src):
            bad.append(f"layer {i} has other tensors than layer {i % blocks}")
            continue
        bad += [f"layers.{i}.{name} != layers.{i % blocks}.{name}"
                for name, t in layers[i].items() if not torch.equal(t, src[name])]
    for a in range(blocks):
        for b in range(a + 1, blocks):
            same = [n for n, t in layers[a].items() if t.ndim == 2 and torch.equal(t, layers[b][n])]
            if same:
                bad.append(f"blocks {a} and {b} share {same}")
    return bad


@pytest.mark.parametrize("name", SHARED)
def test_shared_layers_repeat_bitwise(name):
    """The exported shared-layer model is an ordinary Llama whose layer i carries
    exactly (bitwise) the weights of layer i % k, for every parameter name, while
    the k distinct blocks differ (every weight matrix of layer 0 != layer 1)."""
    spec = registry.SPECS[name]
    path = MODELS / name / "model.safetensors"
    assert path.is_file(), f"{name} is not shipped"
    layers = _layer_tensors(path)
    assert sorted(layers) == list(range(spec["layers"]))
    assert len(layers[0]) == 9  # 4 attention + 3 MLP matrices + 2 norms
    assert _repeat_violations(path, spec["shared_blocks"]) == []
    cfg = json.loads((MODELS / name / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["num_hidden_layers"] == spec["layers"]


@pytest.mark.parametrize("name", SHARED)
def test_shared_layer_check_can_fail(name, tmp_path):
    """The bitwise check catches a one-ulp change in one repeated layer."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(MODELS / name / "model.safetensors"), framework="pt") as fh:
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    key = "model.layers.4.self_attn.q_proj.weight"
    t = tensors[key].clone()
    t[0, 0] = torch.nextafter(t[0, 0], torch.tensor(float("inf")))
    tensors[key] = t
    save_file(tensors, str(tmp_path / "model.safetensors"))
    bad = _repeat_violations(tmp_path / "model.safetensors", registry.SPECS[name]["shared_blocks"])
    assert bad == ["layers.4.self_attn.q_proj.weight != layers.0.self_attn.q_proj.weight"]


def _tiny_llama(layers: int = 4):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(num_hidden_layers=layers, vocab_size=64, hidden_size=16, intermediate_size=32,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=True)
    return LlamaForCausalLM(cfg)


def test_tie_layers_shares_parameters_and_survives_resume(tmp_path):
    """Tied layers: one tensor per shared weight in parameters() (AdamW steps it
    once), summed gradients, tie kept by a state_dict round trip, and the
    untied export equals the tied model."""
    from transformers import AutoModelForCausalLM

    from depthutils.ladder.train import count_params, make_optimizer, tie_layers, untie_layers

    model = _tiny_llama(4)
    per_layer = sum(p.numel() for p in model.model.layers[0].parameters())
    tie_layers(model, 2)
    layers = model.model.layers
    assert layers[2].mlp.up_proj.weight is layers[0].mlp.up_proj.weight
    assert layers[3].post_attention_layernorm.weight is layers[1].post_attention_layernorm.weight
    assert layers[1].mlp.up_proj.weight is not layers[0].mlp.up_proj.weight
    assert [layer.self_attn.layer_idx for layer in layers] == [0, 1, 2, 3]
    unique, total = count_params(model)
    assert total - unique == 2 * per_layer
    assert sum(p.numel() for p in model.parameters()) == unique
    opt = make_optimizer(model, 1e-2)
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))

    x = torch.randint(0, 64, (2, 12))
    for _ in range(2):
        opt.zero_grad()
        model(input_ids=x, labels=x, use_cache=False).loss.backward()
        opt.step()
    assert torch.equal(layers[2].self_attn.q_proj.weight, layers[0].self_attn.q_proj.weight)

    torch.save(dict(model=model.state_dict(), opt=opt.state_dict()), tmp_path / "state.pt")
    resumed = _tiny_llama(4)
    tie_layers(resumed, 2)
    opt2 = make_optimizer(resumed, 1e-2)
    state = torch.load(tmp_path / "state.pt", weights_only=False)
    resumed.load_state_dict(state["model"])
    opt2.load_state_dict(state["opt"])
    assert resumed.model.layers[2].mlp.down_proj.weight is resumed.model.layers[0].mlp.down_proj.weight
    for m, o in ((model, opt), (resumed, opt2)):
        o.zero_grad()
        m(input_ids=x, labels=x, use_cache=False).loss.backward()
        o.step()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), resumed.parameters()))

    model.eval()
    with torch.no_grad():
        tied_logits = model(input_ids=x).logits
    untie_layers(model)
    assert layers[2].mlp.up_proj.weight is not layers[0].mlp.up_proj.weight
    assert count_params(model) == (unique, total)
    model.save_pretrained(str(tmp_path / "export"), safe_serialization=True)
    assert _repeat_violations(tmp_path / "export" / "model.safetensors", 2) == []
    exported = AutoModelForCausalLM.from_pretrained(str(tmp_path / "export"), dtype=torch.float32).eval()
    with torch.no_grad():
        assert torch.equal(exported(input_ids=x).logits, tied_logits)


@pytest.mark.parametrize("name", LADDER)
def test_shipped_weights_follow_their_spec(name):
    """Each shipped model was trained with the steps, learning rate and warm-up its spec states, so a
    spec changed without retraining (or weights left stale) fails here."""
    training = json.loads((MODELS / name / "training.json").read_text())
    spec = registry.SPECS[name]
    assert (training["steps"], training["lr"], training["warmup"], training["layers"]) == \
        (spec["steps"], spec["lr"], spec["warmup"], spec["layers"])
    assert training["tokens"] == spec["steps"] * registry.BATCH_SIZE * registry.SEQ_LEN


def test_controlled_rungs_saw_equal_tokens():
    """The four ladder rungs and the shared-layer model have ladder-8's recipe and saw the same
    tokens: chapter 9's scale question and chapter 8 vary depth (or weight sharing) alone."""
    controlled = ["ladder-4", "ladder-8", "ladder-12", "ladder-16", "ladder-8-shared"]
    recipe = lambda n: {k: registry.SPECS[n][k] for k in ("style", "steps", "lr", "warmup")}
    assert all(recipe(n) == recipe("ladder-8") for n in controlled)
    tokens = {n: registry.training_tokens(n) for n in controlled}
    assert len(set(tokens.values())) == 1 and None not in tokens.values(), tokens
    seeds = {n: json.loads((MODELS / n / "training.json").read_text())["seed"] for n in controlled}
    assert len(set(seeds.values())) == 1, seeds


def test_the_second_seed_is_ladder_4_at_another_seed():
    """Chapter 7's positive control: ladder-4-seed2 has ladder-4's recipe (schedule and tokens too) but its seed,
    and its card says so."""
    keep = lambda n: {k: v for k, v in registry.SPECS[n].items() if k not in ("seed", "description")}  # noqa: E731
    assert keep("ladder-4-seed2") == keep("ladder-4")
    seeds = [json.loads((MODELS / n / "training.json").read_text())["seed"] for n in ("ladder-4", "ladder-4-seed2")]
    assert seeds == [registry.SEED, registry.SPECS["ladder-4-seed2"]["seed"]] and seeds[0] != seeds[1]
    assert registry.training_tokens("ladder-4-seed2") == registry.SPECS["ladder-4-seed2"]["steps"] * \
        registry.BATCH_SIZE * registry.SEQ_LEN


def test_count_params_of_an_ordinary_model():
    from depthutils.ladder.train import count_params

    model = _tiny_llama(3)
    n = sum(p.numel() for p in model.parameters())
    assert count_params(model) == (n, n)


@pytest.mark.parametrize("name", LADDER)
def test_card_states_training_and_params(name, loaded):
    """Cards written by this trainer state tokens, steps, wall time and unique vs
    total parameters, and those counts match the shipped weights."""
    from depthutils.ladder.train import count_params

    card = json.loads((MODELS / name / "card.json").read_text())
    training = json.loads((MODELS / name / "training.json").read_text())
    if "params_unique" not in training:
        pytest.skip(f"{name} was trained before unique/total counts were recorded")
    assert {"params_unique", "params_total"} <= set(card)
    model, _, _ = loaded(name)
    assert count_params(model) == (card["params_unique"], card["params_total"])
    assert (training["params_unique"], training["params_total"]) == (card["params_unique"],
                                                                     card["params_total"])
    spec = registry.SPECS.get(name, {})
    if spec.get("shared_blocks"):
        per_layer = sum(p.numel() for p in model.model.layers[0].parameters())
        assert card["params_total"] - card["params_unique"] == \
            (spec["layers"] - spec["shared_blocks"]) * per_layer
    else:
        assert card["params_unique"] == card["params_total"]
    tr = card["training"]
    assert tr["tokens"] == tr["steps"] * tr["batch_size"] * tr["seq_len"]
    assert tr["wall_time_s"] > 0
    readme = (MODELS / name / "README.md").read_text()
    assert f"{card['params_unique']:,} unique" in readme and f"{card['params_total']:,} total" in readme
    assert f"{tr['tokens']:,} tokens" in readme and f"{tr['steps']} steps" in readme
    assert "min on" in readme
