"""Models with random weights and the embedded models' tokenizer, built from a config and saved as a Hugging
Face folder: for checks that hold whatever the weights are (which tensor a layer adds), for the benchmark's
second model and for the plan's check at a real model's width; and an embedded model's own initial weights
(:func:`untrained`), chapter 7's null.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from depthutils.core.errors import DepthError
from depthutils.ladder.registry import TOKENIZER_DIR

__all__ = ["FAMILIES", "N_INITS", "WIDTH_8B", "random_model", "tiny_model", "untrained"]

#: the families :func:`random_model` builds, by ``model_type``
FAMILIES = ("llama", "olmo2", "gemma2")
#: untrained initialisations of each of chapter 7's null targets (:mod:`depthutils.analysis.mapping_null`): a spread,
#: not one draw (the grading rule asks for at least these)
N_INITS = 3
#: Llama 3.1 8B's width (its layers, not its depth or vocabulary)
WIDTH_8B = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8)


def random_model(family: str = "llama", path: str | Path | None = None, *, seed: int = 0, dtype: str | None = None,
                 uniform: float | None = None, **config) -> Path:
    """The folder of a ``family`` model with random weights, the config ``config`` and the project's tokenizer.

    ``path``: where to save it; an existing folder there is reused (built once), and without ``path`` a new
    temporary folder is made. The weights are the family's own initialisation after ``torch.manual_seed(seed)``,
    or, with ``uniform``, drawn from ``U(-uniform, uniform)`` without a first initialisation (fast at 8B width).
    ``dtype`` converts the weights (``"bfloat16"``) before they are drawn.
    """
    import transformers

    if family not in FAMILIES:
        raise DepthError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}.")
    path = Path(path) if path is not None else Path(tempfile.mkdtemp(prefix=f"random-{family}-"))
    if (path / "config.json").exists():
        return path
    tok = transformers.PreTrainedTokenizerFast.from_pretrained(TOKENIZER_DIR)
    cfg = transformers.AutoConfig.for_model(family, vocab_size=config.pop("vocab_size", len(tok)),
                                            bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                            pad_token_id=tok.pad_token_id, **config)
    if uniform is None:
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(cfg)
        if dtype is not None:
            model = model.to(getattr(torch, dtype))
    else:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        model = model.to_empty(device="cpu")
        if dtype is not None:
            model = model.to(getattr(torch, dtype))
        torch.manual_seed(seed)
        for p in model.parameters():
            p.data.uniform_(-uniform, uniform)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def tiny_model(family: str = "olmo2", layers: int = 2, seed: int = 0):
    """A small loaded model of ``family`` (``"olmo2"`` or ``"gemma2"``: norms after the sublayers) with random
    weights, in a new temporary folder; results and prose name it ``random-<family>``, not by that folder.

    Random weights: only for checks that hold whatever the weights are, such as which tensor a
    layer adds to the residual.
    """
    from depthutils.models.handle import load_model

    if family not in ("olmo2", "gemma2"):
        raise DepthError(f"family must be one of olmo2, gemma2, got {family!r}.")
    path = random_model(family, seed=seed, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)
    return load_model(str(path), dtype="float32", label=f"random-{family}")  # identity checked at float32 rounding


def untrained(name: str, *, seed: int | None = None, device: str = "auto", dtype: str = "auto", **kwargs):
    """Embedded model ``name`` as it stood before its first training step, loaded and named ``"<name>-untrained"``;
    with ``seed``, another initial draw of the same architecture, named ``"<name>-untrained-seed<seed>"``.

    The weights are drawn by the trainer's own :func:`~depthutils.ladder.train.build_model` from the spec's seed
    (:data:`~depthutils.ladder.registry.SPECS`; ``seed`` replaces it), so ``untrained("ladder-16")`` has
    ``ladder-16``'s architecture and the initial draw its trainer makes from its seed, with no training, and
    ``untrained("ladder-16", seed=7)`` the draw the same trainer would make from seed 7 (``seed`` equal to the spec's
    own is the model's own draw, and named so). They are written to a temporary folder that is
    removed once loaded (where the system allows: a file still mapped cannot be removed on Windows). ``dtype="auto"`` is the embedded models' rule (float32 on a CPU), so the untrained model
    computes in the precision of its trained twin; ``kwargs`` go to :func:`~depthutils.models.handle.load_model`.
    """
    from depthutils.ladder.registry import SEED, SPECS
    from depthutils.ladder.tokenizer import load_tokenizer
    from depthutils.ladder.train import build_model, export, tie_layers, untie_layers
    from depthutils.models.devices import _pick_device, auto_dtype
    from depthutils.models.handle import load_model

    spec = SPECS.get(name)
    if spec is None or spec.get("init_from"):
        raise DepthError(f"{name!r} is not an embedded model trained from its own initial weights; choose one of "
                         f"{', '.join(n for n, s in SPECS.items() if not s.get('init_from'))}.")
    own = spec.get("seed", SEED)
    label = f"{name}-untrained" if seed is None or seed == own else f"{name}-untrained-seed{seed}"
    tok = load_tokenizer(TOKENIZER_DIR)
    model = build_model(spec if seed is None else {**spec, "seed": seed}, tok)
    if spec.get("shared_blocks"):  # as the trainer ties them before its first step, then exported as repeats
        tie_layers(model, spec["shared_blocks"])
        untie_layers(model)
    if dtype == "auto":
        dtype = auto_dtype(_pick_device(device), embedded=True)[0]
    with tempfile.TemporaryDirectory(prefix=f"{label}-", ignore_cleanup_errors=True) as folder:
        export(model, tok, Path(folder))
        return load_model(folder, device=device, dtype=dtype, label=label, **kwargs)
