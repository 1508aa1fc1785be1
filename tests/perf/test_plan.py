"""The cost model (depthutils.cost.accounting) and ``python -m depthutils plan``: layer-passes against bench's counter,
peak memory against a measured peak RSS, and the command offline."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import PLAN_MEMORY_TOL, PLAN_PASSES_TOL, ROOT, build_tiny, make_tokenizer

from depthutils.core.errors import DepthError
from depthutils.cost.accounting import Shape
from depthutils.cost.model_info import PAPER_CONFIGS
from depthutils.measures import MEASUREMENTS, cost_of
from depthutils.perf.counting import Counter, floors
from depthutils.perf.harness import isolated
from depthutils.perf.plan import parse_bytes


def test_shape_counts_llama_8b_parameters():
    """Llama 3.1 8B has 8,030,261,248 parameters (its safetensors index: 16,060,522,496 bytes in bf16)."""
    s = Shape.from_config(PAPER_CONFIGS["meta-llama/Llama-3.1-8B"])
    assert s.params == 8_030_261_248


def test_distilled_qwen_unties_its_embeddings():
    """DeepSeek-R1-Distill-Qwen-1.5B's config.json has tie_word_embeddings false (1.78B parameters), unlike the
    Qwen2.5-Math-1.5B it was distilled into (1.54B): the untied output matrix is 151936 x 1536 more."""
    r1 = Shape.from_config(PAPER_CONFIGS["deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"])
    math = Shape.from_config(PAPER_CONFIGS["Qwen/Qwen2.5-Math-1.5B"])
    assert not r1.tied and r1.params - math.params == 151936 * 1536


def test_qwen_32b_has_its_config_s_parameters():
    """Qwen2.5-32B's config (hidden 5120, MLP 27648, 64 layers, 40/8 heads, vocabulary 152064, untied, with
    q/k/v biases) has 32,763,876,352 parameters: the count another project's test asserts for that config."""
    assert Shape.from_config(PAPER_CONFIGS["Qwen/Qwen2.5-32B"]).params == 32_763_876_352


def test_shape_matches_a_built_model(tiny, tiny_root):
    from transformers import AutoConfig

    for family in ("llama", "qwen2", "mixtral"):
        hf = tiny(family)[1]
        s = Shape.from_config(AutoConfig.from_pretrained(build_tiny(family, tiny_root)).to_dict())
        assert s.params == sum(p.numel() for p in hf.parameters()), family


def test_layer_passes_match_the_counter(tiny, tiny_root):
    """Predicted layer-passes of the fast paths against the layer calls bench's counter sees."""
    import depthutils as du
    from depthutils.core.prompts import encode

    handle, _ = tiny("llama")
    path = build_tiny("llama", tiny_root)
    s = Shape.from_config(json.loads((path / "config.json").read_text()))
    p = du.Prompt.from_parts("5 + 7 + 5 + 3 + 1 + 7 + 2 + 4 + 6 + 1 + 9 + 3 + 8 + 1 = ", "62")
    enc = encode(handle.tokenizer, p, need_answer=True)
    T, n_pred = enc.n_tokens, len(enc.predict_positions)
    counter = Counter(handle)
    ts = [8, 16]
    du.future_effects(handle, [p], positions=ts, progress_bar=False)
    fe = counter.layer_passes
    assert cost_of("future_effects")(s, [T], "float32", True, False, positions=[ts]).layer_passes == pytest.approx(
        fe, rel=1e-9)
    check = 2 * (T + T - T // 2) / T  # the suffix check: two layers' clean keys and values, then a half prompt
    assert fe == pytest.approx(floors(s.layers, [T], [ts], T, 1)["future_effects"] + check, rel=1e-9)
    counter.reset()
    du.residual_erasure(handle, p, baseline=torch.zeros(s.layers + 1, s.hidden).numpy(), progress_bar=False)
    er = counter.layer_passes * counter.longest / (T - 1)  # the counter's unit is the longest sequence seen
    assert cost_of("residual_erasure")(s, T - 1, n_pred, "float32", True, False).layer_passes == pytest.approx(
        er, rel=PLAN_PASSES_TOL)
    counter.reset()
    du.integrated_gradients(handle, p, steps=16, progress_bar=False)
    ig = counter.layer_passes
    counter.close()
    assert cost_of("integrated_gradients")(s, T, n_pred, "float32", True, False, steps=16).layer_passes == pytest.approx(
        ig, rel=PLAN_PASSES_TOL)


def _memory_worker(path, tokens):
    import depthutils as du
    from depthutils.perf.timing import peak_rss_now

    before = peak_rss_now()
    handle = du.load_model(path, device="cpu", dtype="float32")
    prompt = du.Prompt.from_parts("5 + 7 + " * tokens, "1")
    du.future_effects(handle, [prompt], max_tokens=tokens, progress_bar=False)
    return {"before": before, "peak": peak_rss_now()}


def test_memory_prediction_on_a_small_model(tmp_path):
    """Peak RSS of future effects on a 4-layer, width-256 Llama with a 32k vocabulary (so that the logits
    of the batch dominate what the run adds), against the process's RSS before loading + the plan."""
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path / "mem-llama"
    tok = make_tokenizer(path)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=32768, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                                 num_attention_heads=4, max_position_embeddings=1024, bos_token_id=0,
                                 eos_token_id=1, pad_token_id=2, tie_word_embeddings=False)).save_pretrained(path)
    tokens = 400
    got = isolated(_memory_worker, str(path), tokens)
    s = Shape.from_config(json.loads((path / "config.json").read_text()))
    c = cost_of("future_effects")(s, [tokens], "float32", True, False)
    predicted = got["before"] + s.resident_bytes("float32") + c.peak
    assert len(tok) < 32768
    assert c.peak > 0.5 * (got["peak"] - got["before"])  # the run's own memory is a real part of the peak
    assert predicted == pytest.approx(got["peak"], rel=PLAN_MEMORY_TOL)


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "depthutils", "plan", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


@pytest.mark.parametrize("chapter,model", [("02", "ladder-4"), ("integrated_gradients", "meta-llama/Llama-3.1-70B")])
def test_plan_json_offline(chapter, model, tmp_path):
    out = _cli(chapter, "--model", model, "--device", "cuda", "--json", env={"XDG_CACHE_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    for key in ("layer_passes", "peak_memory_bytes", "seconds", "batch_size", "fits"):
        assert key in plan
    assert plan["layer_passes"] > 0 and plan["seconds"] > 0


def test_plan_remote_counts_requests(tmp_path):
    out = _cli("03", "--model", "meta-llama/Llama-3.1-70B", "-p", "remote", "True", "--json")
    plan = json.loads(out.stdout)
    # one request per measurement call: every measurement registered for chapter 3 that runs on NDIF
    assert {r["measurement"] for r in plan["rows"]} == {n for n, m in MEASUREMENTS.items()
                                                        if m.chapter == "03" and m.runs_remotely}
    assert plan["requests"] == len(plan["rows"]) == 2 and plan["fits"] and plan["download_bytes"] > 0


def test_plan_unknown_hub_id_offline_fails_in_one_sentence():
    out = _cli("01", "--model", "nobody/no-such-model-xyz")
    assert out.returncode == 2
    assert out.stderr.startswith("error: Model 'nobody/no-such-model-xyz'") and out.stderr.count("\n") == 1


def test_parse_bytes():
    assert parse_bytes("80GB") == 80e9 and parse_bytes("1GiB") == 2 ** 30
    from depthutils.core.errors import DepthError
    with pytest.raises(DepthError):
        parse_bytes("eighty")


def test_plan_decodes_as_many_tokens_as_the_depth_score(monkeypatch):
    """The plan's greedy decodings (context length, tokens generated) are the ones ``depth_score`` asks
    ``greedy_batch`` for, prompt by prompt: the answer's tokens plus the margin, not the answer alone."""
    import depthutils as du
    from depthutils.cost.model_info import model_info
    from depthutils.models.handle import ModelHandle
    from depthutils.perf.plan import score_prompts

    asked = []
    real = ModelHandle.greedy_batch

    def spy(self, contexts, max_new_tokens):
        budgets = [max_new_tokens] * len(contexts) if isinstance(max_new_tokens, int) else max_new_tokens
        asked.extend((c.shape[1], int(b)) for c, b in zip(contexts, budgets))
        return real(self, contexts, max_new_tokens)

    monkeypatch.setattr(ModelHandle, "greedy_batch", spy)
    tasks = {"addition": (2, 4)}
    du.depth_score(du.load_model("default"), tasks, n=3, progress_bar=False)
    planned = [(ctx, new) for _, _, ctx, new in score_prompts(model_info("default"), tasks, 3, 0, 48)]
    assert sorted(asked) == sorted(planned) and len(asked) == 6


def test_repredict_names_an_older_check_file_instead_of_failing_on_a_missing_key(tmp_path):
    """A ``plan --check`` file saved before the rows recorded each example's workload is refused in one sentence."""
    from depthutils.perf.check import repredict

    old = tmp_path / "old.json"
    old.write_text(json.dumps([{"model": "default", "dtype": "float32", "measurement": next(iter(MEASUREMENTS)),
                                "path": "default", "lengths": {"gsm": 40}}]))
    with pytest.raises(DepthError, match="workload each example ran"):
        repredict(str(old))


@pytest.mark.slow  # a chapter run in its own kernel (about half a minute)
def test_the_check_measures_a_chapter_as_a_user_runs_it(tiny_root):
    """``plan --check``'s last row: ``run 01`` in its own process, its largest process's peak beside the plan's
    for the same chapter and parameters; a run that fails is one sentence naming the chapter and the model."""
    from conftest import build_tiny

    from depthutils.__main__ import planned_peak
    from depthutils.core.errors import DepthError
    from depthutils.perf.check import _run_chapter, user_run

    path = str(build_tiny("llama", tiny_root))
    row = user_run(path, planned_peak("01", path, {"n_examples": 2}), "01", {"n_examples": 2})
    assert row["rss_meas"] > 2e8 and row["rss_pred"] > 0 and row["wall_meas"] > 0  # a kernel holds torch: ≥ 200 MB
    assert row["rss_err"] == pytest.approx(row["rss_pred"] / row["rss_meas"] - 1)
    with pytest.raises(DepthError, match=r"^run 01 on /nonexistent failed: "):
        _run_chapter("01", "/nonexistent", {})
