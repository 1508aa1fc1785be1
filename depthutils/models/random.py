"""Models with random weights and the embedded models' tokenizer, built from a config and saved as a Hugging
Face folder: for checks that hold whatever the weights are (which tensor a layer adds), for the benchmark's
second model and for the plan's check at a real model's width.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from depthutils.core.errors import DepthError
from depthutils.ladder.registry import TOKENIZER_DIR

__all__ = ["FAMILIES", "WIDTH_8B", "random_model", "tiny_model"]

#: the families :func:`random_model` builds, by ``model_type``
FAMILIES = ("llama", "olmo2", "gemma2")
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
    weights, in a new temporary folder.

    Random weights: only for checks that hold whatever the weights are, such as which tensor a
    layer adds to the residual.
    """
    from depthutils.models.handle import load_model

    if family not in ("olmo2", "gemma2"):
        raise DepthError(f"family must be one of olmo2, gemma2, got {family!r}.")
    path = random_model(family, seed=seed, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)
    return load_model(str(path), dtype="float32")  # its identity is checked at float32 rounding
