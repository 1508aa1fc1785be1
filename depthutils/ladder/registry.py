"""Where the ladder models live, their aliases and their training specs.

Only the standard library is imported here so that ``python -m depthutils
models`` can list the models without loading torch.
"""

from __future__ import annotations

import json
from pathlib import Path

#: the objectives experiment's null control (:mod:`depthutils.ladder.objectives`): objective A from the same initial
#: weights on another draw of the task examples, so A against A′ pairs runs as the objectives are paired (by seed)
#: where no objective differs
NULL = "a2"
#: ``depthutils/ladder/registry.py`` -> repository root is two levels above the package.
REPO_ROOT = Path(__file__).resolve().parents[2]
#: Folder holding the shipped models (Hugging Face format, one folder each).
MODELS_DIR = REPO_ROOT / "data" / "models"
#: Folder holding the generated evaluation sets and the book's prompts.
PROMPTS_DIR = REPO_ROOT / "data" / "prompts"
#: The project's tokenizer (shared by every model; each model folder has a copy).
TOKENIZER_DIR = MODELS_DIR / "_tokenizer"
#: the held-out evaluation sets of the project's tasks, by task (files under ``PROMPTS_DIR``)
EVAL_FILES = {"addition": "eval_addition.jsonl", "word_problems": "eval_word_problems.jsonl",
              "multihop": "eval_multihop.jsonl"}
#: Default corpus folder (public-domain text, never copied into the repo).
DEFAULT_CORPUS_DIR = REPO_ROOT.parent / "shared" / "corpora"
#: Default checkpoint root (outside the repository).
DEFAULT_CKPT_DIR = REPO_ROOT.parent / "ckpt"

#: alias -> folder name in MODELS_DIR.
ALIASES: dict[str, str] = {
    "default": "ladder-8",
    "ladder-4": "ladder-4",
    "ladder-8": "ladder-8",
    "ladder-12": "ladder-12",
    "ladder-16": "ladder-16",
    "ladder-8-cot": "ladder-8-cot",
    "ladder-8-shared": "ladder-8-shared",
    "ladder-4-seed2": "ladder-4-seed2",
    "cot": "ladder-8-cot",
    "shared": "ladder-8-shared",
    "shallow": "ladder-4",
    "deep": "ladder-16",
}

#: Shared architecture (only the depth changes along the ladder).
WIDTH = dict(
    vocab_size=2048,
    hidden_size=128,
    intermediate_size=384,
    num_attention_heads=4,
    num_key_value_heads=4,
    max_position_embeddings=1024,
    tie_word_embeddings=True,
    rope_theta=10000.0,
)

#: Training spec of each model.  ``style`` is the answer format the model was
#: trained on: ``direct`` (answer right after the prompt) or ``cot`` (steps,
#: then ``The answer is N``).  ``init_from`` names a model to fine-tune.
#: ``shared_blocks=k`` ties the weights of layer ``i`` to layer ``i % k`` during
#: training (``k`` distinct blocks applied cyclically, A B A B ... for ``k=2``);
#: the exported folder is an ordinary Llama whose layers repeat those weights.
SPECS: dict[str, dict] = {
    "ladder-8": dict(layers=8, style="direct", steps=3500, lr=3e-3, warmup=150,
                     description="8-layer Llama, direct answers (the book's default)"),
    "ladder-4": dict(layers=4, style="direct", steps=3500, lr=3e-3, warmup=150,
                     description="4-layer Llama, direct answers (shallow rung)"),
    "ladder-8-cot": dict(layers=8, style="cot", steps=800, lr=1e-3, warmup=50,
                         init_from="ladder-8",
                         description="ladder-8 fine-tuned to write chain-of-thought steps"),
    "ladder-8-shared": dict(layers=8, shared_blocks=2, style="direct", steps=3500, lr=3e-3,
                            warmup=150,
                            description="8 layer applications cycling through 2 shared blocks "
                                        "(A B A B A B A B), direct answers"),
    # The controlled ladder: every rung (4, 8, 12, 16 layers) has ladder-8's recipe, i.e. the same
    # width, data mix and order, seed, schedule and 3500 x 16 x 256 = 14.3M training tokens; only the
    # depth changes.
    "ladder-12": dict(layers=12, style="direct", steps=3500, lr=3e-3, warmup=150,
                      description="12-layer Llama, direct answers"),
    "ladder-16": dict(layers=16, style="direct", steps=3500, lr=3e-3, warmup=150,
                      description="16-layer Llama, direct answers (deep rung)"),
    # ladder-4's recipe at another seed (other initial weights, other batches drawn from the same mix): chapter 7's
    # positive control, what mapping a model onto the same computation (trained alike) gives
    "ladder-4-seed2": dict(layers=4, style="direct", steps=3500, lr=3e-3, warmup=150, seed=2,
                           description="4-layer Llama, direct answers: ladder-4's recipe with seed 2"),
}
# The objectives experiment (:mod:`.objectives`): one 8-layer architecture of the ladder's width (a narrower
# MLP, 256), two tasks (:mod:`.word_problems`: S5, which needs depth, and the Z10 control, which has a shortcut),
# three objectives, five seeds. A seed fixes the initial weights and the task examples, so the objectives of a
# seed differ only in their loss; on S5 each seed also trains the null control, A on another draw of the
# examples from the same initial weights. Seed 1 of each task and objective is shipped (six models in float16); every
# run's card and measurements are tables in ``data/experiments/objectives``.
OBJECTIVE_WIDTH = dict(WIDTH, intermediate_size=256)
OBJECTIVE_TASKS = ("s5", "z10")
OBJECTIVE_SEEDS = (1, 2, 3, 4, 5)
#: the seed whose final models are shipped in ``data/models``
SHIPPED_SEED = 1
OBJECTIVE_STEPS = 2400
#: the steps whose weights are kept and measured: log-spaced, at half octaves over the last two
OBJECTIVE_SNAPSHOTS = (19, 38, 75, 150, 300, 600, 850, 1200, 1700, 2400)
_OBJECTIVE_WORDS = {"a": "loss on the answer only", "qa": "loss on question and answer",
                    "lm": "loss on question, answer and English text rows",
                    NULL: "loss on the answer only, another draw of the examples (the null control)"}
#: the task whose seeds also train the null control (A on another draw of the examples: ``objectives.NULL``)
NULL_TASK = "s5"
_TASK_WORDS = {"s5": "permutations of 5 points (S5)", "z10": "chains of operations mod 10 (Z10)"}


def objective_name(task: str, objective: str, seed: int) -> str:
    """``("s5", "qa", 2)`` -> ``"objective-s5-qa-2"``, the name of that run (and of its model folder)."""
    return f"objective-{task}-{objective}-{seed}"


def _kinds(task: str) -> list[str]:
    """The runs a seed of ``task`` trains: the three objectives, and on :data:`NULL_TASK` the null control."""
    return [o for o in _OBJECTIVE_WORDS if o != NULL or task == NULL_TASK]


for _seed in OBJECTIVE_SEEDS:
    for _task, _task_words in _TASK_WORDS.items():
        for _obj in _kinds(_task):
            _words = _OBJECTIVE_WORDS[_obj]
            SPECS[objective_name(_task, _obj, _seed)] = dict(
                layers=8, style="direct", steps=OBJECTIVE_STEPS, lr=1e-3, warmup=50, task=_task, objective=_obj,
                seed=_seed, width=OBJECTIVE_WIDTH, snapshots=OBJECTIVE_SNAPSHOTS, export_dtype="float16",
                description=f"8-layer Llama on {_task_words}, {_words}, seed {_seed}")
#: the objectives experiment's runs, seed by seed (a seed's six runs are trained before the next seed's)
OBJECTIVE_RUNS = [objective_name(t, o, s) for s in OBJECTIVE_SEEDS for t in _TASK_WORDS for o in _kinds(t)]
#: the runs whose final model is shipped (the null control's are not)
SHIPPED_OBJECTIVE_RUNS = [n for n in OBJECTIVE_RUNS if SPECS[n]["seed"] == SHIPPED_SEED and SPECS[n]["objective"] != NULL]

# The depth-necessity sweep (:mod:`.sweep`): does S5 need more layers than a control with a shortcut (C10) at the
# lengths a model learns within a fixed budget? Objective A on each task at 2, 4 and 8 layers of the objectives'
# width, three seeds, 6,000 steps of 128 chains of 1-12 operations at a constant learning rate (a cosine decay
# would read the last snapshots at a tenth of the rate; at 12 operations S5 has 7.1M chains, so a length learned is
# not memorised). Nothing is shipped: each snapshot's accuracy on 1-16 operations is a row of
# ``data/experiments/depth_sweep/rows.csv``.
SWEEP_LAYERS = (2, 4, 8)
#: the sweep's table: one row per run and snapshot (:func:`depthutils.ladder.sweep.write_table`)
SWEEP_TABLE = REPO_ROOT / "data" / "experiments" / "depth_sweep" / "rows.csv"
SWEEP_SEEDS = (1, 2, 3)
SWEEP_STEPS = 6000
SWEEP_EXAMPLES = 128
#: the longest chain trained on (the curriculum reaches it at step ``(SWEEP_LONGEST - 1) * CURRICULUM``, 2,200)
SWEEP_LONGEST = 12
#: the lengths every snapshot is evaluated on: the trained ones and four longer
SWEEP_EVAL = tuple(range(1, SWEEP_LONGEST + 5))
SWEEP_SNAPSHOTS = tuple(range(1000, SWEEP_STEPS + 1, 1000))


def sweep_name(task: str, layers: int, seed: int) -> str:
    """``("s5m", 4, 2)`` -> ``"depth-s5m-L4-2"``, the name of that run of the depth-necessity sweep."""
    return f"depth-{task}-L{layers}-{seed}"


#: the sweep's tasks, the one that needs depth first: S5 and the C10 control
#: (:data:`depthutils.ladder.word_problems.S5M`, ``C10M``), with structured questions, which the objectives
#: experiment's next round trains on (a question with structure for Q+A and LM to learn)
SWEEP_TASKS = {"s5m": "permutations of 5 points (S5), structured questions",
               "c10m": "additions mod 10 (C10), structured questions"}
for _seed in SWEEP_SEEDS:
    for _task, _task_words in SWEEP_TASKS.items():
        for _layers in SWEEP_LAYERS:
            SPECS[sweep_name(_task, _layers, _seed)] = dict(
                layers=_layers, style="direct", steps=SWEEP_STEPS, lr=1e-3, warmup=50, schedule="constant",
                task=_task, objective="a", seed=_seed, width=OBJECTIVE_WIDTH, snapshots=SWEEP_SNAPSHOTS,
                examples=SWEEP_EXAMPLES, longest=SWEEP_LONGEST,
                description=f"{_layers}-layer Llama on {_task_words}, loss on the answer only, seed {_seed} "
                            "(the depth-necessity sweep)")
#: the sweep's runs in training order: the fewest layers first, S5 before its control, seed by seed (a session that
#: ends early leaves the deepest control runs out, which the premise reads least)
SWEEP_RUNS = [sweep_name(t, n, s) for n in SWEEP_LAYERS for t in SWEEP_TASKS for s in SWEEP_SEEDS]

#: Training order of ``python -m depthutils.ladder all``.
ORDER = ["ladder-8", "ladder-4", "ladder-8-cot", "ladder-12", "ladder-16", "ladder-8-shared", "ladder-4-seed2"]

#: Batch geometry shared by all runs (tokens per step = BATCH_SIZE * SEQ_LEN).
BATCH_SIZE = 16
SEQ_LEN = 256
SEED = 1234


def resolve_alias(name: str) -> Path | None:
    """Return the model folder for an alias or a folder name, or ``None``.

    ``name`` may be an alias from :data:`ALIASES` (e.g. ``"default"``) or the
    name of a folder in :data:`MODELS_DIR` that holds a ``config.json``.
    """
    folder = ALIASES.get(name, name)
    path = MODELS_DIR / folder
    if (path / "config.json").is_file():
        return path
    return None


def is_embedded(model) -> bool:
    """True for the book's own models: ``model`` (a handle, or its name) is an alias or a folder of
    :data:`MODELS_DIR`."""
    name = model if isinstance(model, str) else str(getattr(model, "name", ""))
    try:  # resolve_alias also accepts any absolute folder (pathlib's join), so its place decides
        path = resolve_alias(name) or Path(name).expanduser()
        return path.resolve().parent == MODELS_DIR.resolve()
    except OSError:
        return False


def training_tokens(name: str) -> int | None:
    """Training tokens of an embedded model (alias or folder name) from its ``training.json``
    (a fine-tune adds its own to its base model's); None for any other model."""
    path = resolve_alias(name)
    info = path / "training.json" if path else None
    if info is None or not info.is_file():
        return None
    doc = json.loads(info.read_text())
    base = training_tokens(doc["init_from"]) if doc.get("init_from") else 0
    return None if base is None else base + int(doc["tokens"])


def _count_params(path: Path) -> int | None:
    """Total parameter count (shared blocks counted once per layer) from the
    card, else from the safetensors header."""
    card = path / "card.json"
    if card.is_file():
        try:
            return int(json.loads(card.read_text())["params"])
        except (KeyError, ValueError, TypeError):
            pass
    st = path / "model.safetensors"
    if not st.is_file():
        return None
    with st.open("rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(n))
    total = 0
    for key, meta in header.items():
        if key == "__metadata__":
            continue
        count = 1
        for dim in meta["shape"]:
            count *= dim
        total += count
    return total


def _unique_params(path: Path, total: int | None) -> int | None:
    """Unique parameter count from the card (``params_unique``), else ``total``."""
    card = path / "card.json"
    if card.is_file():
        try:
            return int(json.loads(card.read_text())["params_unique"])
        except (KeyError, ValueError, TypeError):
            pass
    return total


def list_models() -> list[dict]:
    """List the shipped models: alias(es), folder, layers, params (total and
    unique; they differ for shared-layer models), description."""
    rows = []
    if not MODELS_DIR.is_dir():
        return rows
    for path in sorted(MODELS_DIR.iterdir()):
        cfg_file = path / "config.json"
        if not cfg_file.is_file():
            continue
        cfg = json.loads(cfg_file.read_text())
        aliases = [a for a, f in ALIASES.items() if f == path.name and a != path.name]
        spec = SPECS.get(path.name, {})
        params = _count_params(path)
        rows.append(dict(
            alias=", ".join(aliases) if aliases else path.name,
            folder=path.name,
            layers=cfg.get("num_hidden_layers"),
            params=params,
            params_unique=_unique_params(path, params),
            description=spec.get("description", ""),
        ))
    return rows
