"""Fixtures: tiny random-init models of every supported family, built offline from configs.

Each family's model is saved once per session in Hugging Face format with a
small byte-level BPE tokenizer that adds a BOS token, then loaded twice: with
``depthutils.load_model`` (nnsight) and with plain ``transformers`` for the
oracle in ``tests/oracle.py``.
"""
from __future__ import annotations

import os
from pathlib import Path

#: under xdist each worker (and the notebook kernels it starts, which inherit its environment) gets its share of the
#: cores: two single-threaded processes run the small models faster than one process with two threads
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
if WORKERS > 1:
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    THREADS = str(max(1, _cores // WORKERS))
    os.environ.update(OMP_NUM_THREADS=THREADS, MKL_NUM_THREADS=THREADS, DEPTHUTILS_JOBS=str(WORKERS))

import pytest  # noqa: E402
import torch  # noqa: E402

if WORKERS > 1:
    torch.set_num_threads(int(THREADS))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from depthutils.book.runner import KERNEL_ENV  # noqa: E402  the same kernel settings as the runner and the book

#: nbval's run of each chapter is the book's (real models included), and the book renders it: tests/nbval_book.py
pytest_plugins = ["nbval_book"]

os.environ.update(KERNEL_ENV)  # nbval's kernels inherit these: no progress bars in chapter outputs

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

# ------------------------------------------------------------------------------- tolerances
# Stated once, here. Values computed in different batch rows, with different batch sizes, or along
# different code paths (batched nnsight traces, the stack fast path, the plain-PyTorch oracle) are
# not bitwise equal: which CPU kernel runs (AVX2 or AVX-512, blocked by batch size and thread count)
# changes the order of fp32 additions. One fp32 rounding is ~6e-8 relative; it compounds through
# every layer, so the bound grows with depth. A clean CI run on an AVX-512 machine saw 4e-7 where a
# 3-layer tiny model "should" give 0, while every real intervention effect in the suite is > 1e-3.


def zero_tol(n_layers: int) -> float:
    """The bound for "this must be 0 up to fp32 rounding" on an ``n_layers`` model (1e-6 per layer+1):
    ~4e-6 on the 3-layer tiny models, far above the 4e-7 seen, far below any real effect (> 1e-3)."""
    return 1e-6 * (n_layers + 1)


#: oracle comparisons (every measurement against tests/oracle.py): the spec's 1e-5 in fp32
ATOL = 1e-5
#: the same, relative, for values far above 1 (a norm ratio at position 0 is about 16): float32 sums reduced in a
#: different order differ by a few ulp (9e-7 relative seen between a local run and the NDIF stand-in); 32 ulp
RTOL = 32 * 2.0 ** -23
#: a real model's cached fp32 folder against transformers' own load of its GGUF (the bound; the two
#: are the same dequantized tensors, so the difference seen is 0)
GGUF_ATOL = 1e-4
#: a real effect: an intervention or comparison that must visibly move something
REAL_EFFECT = 1e-3
#: the cost model's peak-memory prediction (depthutils.cost.accounting) against a measured peak RSS, relative: the
#: issue's goal (±25%); glibc's allocator and the torch kernels' scratch space make the real peak differ
PLAN_MEMORY_TOL = 0.25
#: its layer-passes against bench's counter where the algorithm's count has no closed form (erasure's
#: suffix blocks, integrated gradients' stopped last layer): rounding of its positions' windows
PLAN_PASSES_TOL = 0.05

TEXT = ("The spouse of the performer of Imagine is Yoko Ono. 5 + 7 + 5 + 3 + 1 + 7 = 28. "
        "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning. ") * 4


def make_tokenizer(path: Path, add_bos: bool = True):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([TEXT], trainers.BpeTrainer(
        vocab_size=320, show_progress=False, special_tokens=["<|bos|>", "<|eos|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if add_bos:  # else like GPT-2, Pythia or Qwen2.5: no BOS of its own (depthutils prepends one)
        tok.post_processor = processors.TemplateProcessing(single="<|bos|> $A", special_tokens=[("<|bos|>", 0)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>",
                                   pad_token="<|pad|>")
    fast.save_pretrained(path)
    return fast


def family_config(family: str, vocab: int, layers: int = 3, context: int = 128):
    """A tiny config of ``family``: width 32, 4 heads, every family-specific feature switched on
    (softcapping, multipliers, MoE routing, parallel sublayers) so that the adapter must get it right."""
    import transformers as tf

    common = dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                  num_attention_heads=4, max_position_embeddings=context, bos_token_id=0, eos_token_id=1,
                  pad_token_id=2)
    gqa = dict(num_key_value_heads=2)
    if family == "gpt2":
        return tf.GPT2Config(vocab_size=vocab, n_embd=32, n_layer=layers, n_head=4, n_positions=context,
                             bos_token_id=0, eos_token_id=1, pad_token_id=2)
    if family == "falcon":  # parallel attention + MLP; the layer adds attention into the MLP output in place
        return tf.FalconConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                               max_position_embeddings=context, parallel_attn=True, new_decoder_architecture=False,
                               alibi=False, bias=False, bos_token_id=0, eos_token_id=1, pad_token_id=2)
    if family == "gemma3":  # the multimodal wrapper around a Gemma 3 text model
        text = family_config("gemma3_text", vocab, layers, context).to_dict()
        vision = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                      image_size=28, patch_size=14)
        return tf.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                               boi_token_index=3, eoi_token_index=4, image_token_index=5,
                               bos_token_id=0, eos_token_id=1, pad_token_id=2)
    extra = {
        "llama": gqa, "qwen2": gqa, "mistral": gqa, "phi3": gqa, "starcoder2": gqa, "olmo": {}, "olmo2": {},
        "gpt_neox": {}, "qwen3": dict(gqa, head_dim=8),
        "gemma2": dict(gqa, head_dim=8, query_pre_attn_scalar=8, final_logit_softcapping=3.0,
                       attn_logit_softcapping=5.0, sliding_window=16),
        "gemma3_text": dict(gqa, head_dim=8, query_pre_attn_scalar=8, final_logit_softcapping=3.0,
                            sliding_window=16),
        "mixtral": dict(gqa, num_local_experts=4, num_experts_per_tok=2),
        "qwen3_moe": dict(gqa, head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                          decoder_sparse_step=1, mlp_only_layers=[]),
        "cohere": dict(gqa, logit_scale=0.5),
        "granite": dict(gqa, residual_multiplier=0.5, embedding_multiplier=2.0, logits_scaling=0.5,
                        attention_multiplier=0.3),
    }[family]
    cls = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config, "qwen3": tf.Qwen3Config,
           "mistral": tf.MistralConfig, "olmo2": tf.Olmo2Config, "gpt_neox": tf.GPTNeoXConfig,
           "gemma2": tf.Gemma2Config, "gemma3_text": tf.Gemma3TextConfig, "phi3": tf.Phi3Config,
           "mixtral": tf.MixtralConfig, "qwen3_moe": tf.Qwen3MoeConfig, "olmo": tf.OlmoConfig,
           "cohere": tf.CohereConfig, "starcoder2": tf.Starcoder2Config, "granite": tf.GraniteConfig}[family]
    return cls(**common, **extra)


def build_tiny(family: str, root: Path, layers: int = 3, seed: int = 0, context: int = 128,
               add_bos: bool = True) -> Path:
    """A random-init ``family`` model of ``layers`` layers and a ``context``-token context, saved with
    a small BPE tokenizer that adds a BOS (``add_bos``) or none, in Hugging Face format."""
    from transformers import AutoModelForCausalLM

    path = root / f"tiny-{family}-{layers}" if (context, add_bos) == (128, True) else \
        root / f"tiny-{family}-{layers}-ctx{context}-{'bos' if add_bos else 'nobos'}"
    if (path / "config.json").exists():
        return path
    tok = make_tokenizer(path, add_bos)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(family_config(family, len(tok), layers, context))
    with torch.no_grad():  # random init with larger weights, so contributions are far from trivial
        for p in model.parameters():
            if p.ndim == 2:
                p.mul_(3.0)
    model.save_pretrained(path)
    return path


FAMILIES = ["llama", "qwen2", "qwen3", "mistral", "olmo2", "gpt_neox", "gpt2", "gemma2", "gemma3_text", "gemma3",
            "phi3", "mixtral", "qwen3_moe", "olmo", "cohere", "starcoder2", "granite", "falcon"]
#: one family of each kind that needs more than a plain pre-norm stack, for the oracle tests
KINDS = {"sandwich norms": "gemma2", "MoE": "mixtral", "parallel": "falcon", "multipliers": "granite"}
#: every measurement's oracle runs on these: the plain pre-norm stacks, then one family of each kind
ORACLE_FAMILIES = ["llama", "qwen2", "gpt_neox", "olmo2", "gpt2"] + list(KINDS.values())


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tiny_models")


@pytest.fixture(scope="session")
def tiny(tiny_root):
    """``tiny(family) -> (handle, hf_model)``, cached per family."""
    from transformers import AutoModelForCausalLM

    import depthutils

    cache = {}

    def get(family: str):
        if family not in cache:
            path = build_tiny(family, tiny_root)
            handle = depthutils.load_model(str(path), device="cpu", dtype="float32")
            hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
            cache[family] = (handle, hf)
        return cache[family]

    return get


@pytest.fixture(scope="session")
def prompts():
    from depthutils.core.prompts import Prompt

    return [Prompt.from_parts("5 + 7 + 5 + 3 + 1 + 7 = ", "28", "test"),
            Prompt.from_parts("The spouse of the performer of Imagine is", " Yoko Ono", "test"),
            Prompt.from_parts("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and "
                              "bakes muffins. How many are left? The answer is ", "9", "test")]


# ------------------------------------------------------------------------------- tiers
# The markers are declared in pyproject.toml (--strict-markers); select a tier with -m, e.g.
# ``pytest -m "not slow and not browser and not remote and not real"`` for the seconds-long unit tests.

def pytest_collection_modifyitems(config, items):
    """Mark by what a test needs: a chapter under nbval, or a test of the built book (the ``book_url`` fixture builds
    it, or it is marked ``book``) is ``slow``; a test that reads the rendered book in Chromium (the ``browser``
    fixture) is ``browser`` too.

    Then order them for xdist's workers (``--dist loadfile``, in this order): the chapters first; then the file that
    serves the rendered book to the browser (it waits for the chapters and builds the book while the other worker
    goes on); then everything else; then the other files that read the book, which the build is done for by then."""
    builder, readers = set(), set()
    for item in items:
        needs = set(getattr(item, "fixturenames", ()))
        path = item.nodeid.split("::")[0]
        if {"book_url", "browser"} & needs:
            item.add_marker(pytest.mark.book)
            builder.add(path)
        if item.nodeid.startswith("chapters/") or item.get_closest_marker("book"):
            item.add_marker(pytest.mark.slow)
        if "browser" in needs:
            item.add_marker(pytest.mark.browser)
        if item.get_closest_marker("book"):
            readers.add(path)

    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        return 0 if path.startswith("chapters/") else 1 if path in builder else 3 if path in readers else 2

    items.sort(key=rank)  # stable: each file keeps its own order


def pytest_collection_finish(session):
    """A run that holds the remote tests starts the local NDIF server's install (``tests/ndif/install.sh``: mostly
    downloads) in the background as soon as it has collected, on one process, while the chapters run; the module
    fixture runs the same script, which waits on the install's lock and then finds the server's venv in place."""
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0" or session.config.getoption("collectonly"):
        return
    if not any(item.path.name == "test_remote.py" for item in session.items):
        return
    import subprocess

    subprocess.Popen(["bash", str(ROOT / "tests" / "ndif" / "install.sh")], stdin=subprocess.DEVNULL,  # a failure is
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # the fixture's


@pytest.fixture(autouse=True)
def _real_model_is_cached(request):
    """A test marked ``real("<name>")`` runs when that real model is cached at the time it runs, not at collection:
    in one test run the chapters fetch the real models before the unit tests that use them."""
    marker = request.node.get_closest_marker("real")
    if marker is not None:
        from depthutils.models.real.catalog import cache_root

        name = marker.args[0] if marker.args else "smollm2-135m"
        if not (cache_root() / name / "depthutils-manifest.json").exists():
            pytest.skip(f"{name} is not cached (python -m depthutils fetch {name}; the book's build fetches it)")


# ------------------------------------------------------------------------------------ the exercises' mutation tables

#: the exercise checker's fallbacks, which say where and by how much an answer differs but name no mistake
GENERIC = ("values differ; the largest difference", "(off by ", "all zeros")


def message(id: str, fn) -> str | None:
    """The exercise checker's message for ``fn`` as the answer to exercise ``id`` (``None`` when it passes)."""
    from depthutils.core.errors import DepthError
    from depthutils.teaching import exercises

    try:
        exercises.check(id, fn)
    except (AssertionError, DepthError) as err:
        return str(err)
    return None


def assert_named(id: str, mistake: str, fn, phrase: str) -> None:
    """The checker fails ``fn`` (the wrong answer ``mistake``) with a message containing ``phrase``, never
    only a generic fallback (:data:`GENERIC`): what every mutation table (``tests/teaching/test_*mutations*.py``)
    asserts of each row."""
    msg = message(id, fn)
    assert msg is not None, f"{id} passes the wrong answer '{mistake}'"
    assert phrase in msg, msg
    assert not any(generic in msg for generic in GENERIC), msg
