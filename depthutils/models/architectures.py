"""The architecture adapters: for each supported family, where a decoder layer keeps its parts and what
it does to them on the way to the residual stream (:class:`Arch`, :data:`ARCHITECTURES`), and the guards
every read goes through: :func:`unwrap` (element 0 of a *tuple* only: decoder layers return a tensor,
attention modules a tuple) and :func:`check_residual` (asserts ``[B, T, H]``, so that ``output[0]`` cannot
silently take batch row 0).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from depthutils.core.errors import DepthError

__all__ = ["Arch", "ARCHITECTURES", "ShapeError", "check_residual", "rewrap", "supported_families", "unwrap"]


@dataclass(frozen=True)
class Arch:
    """Where a family keeps its parts, and what it does to them on the way to the residual.

    ``attn`` and ``mlp`` are paths *inside a decoder layer* to the modules whose
    output is the sublayer's contribution to the residual stream: for families
    with norms after the sublayers (OLMo2, Gemma 2/3) those are the post-norms.

    * ``residual_scale``: a config attribute that multiplies both sublayer outputs
      before they are added (Granite's ``residual_multiplier``);
    * ``logits``: how the model turns ``lm_head``'s output into its logits, so that
      the lens at the last layer equals the output: ``"softcap"`` (Gemma 2/3's
      ``final_logit_softcapping``), ``"divide"`` (Granite's ``logits_scaling``) or
      ``"multiply"`` (Cohere's ``logit_scale``);
    * ``inplace``: the layer adds into a sublayer's output tensor after it returns
      (Falcon's ``mlp_output += attention_output``), so reads and writes are cloned.
    """

    family: str
    layers: str
    attn: str
    mlp: str
    final_norm: str
    unembed: str = "lm_head"
    residual_scale: str | None = None
    logits: str | None = None
    inplace: bool = False


_LLAMA_LIKE = dict(layers="model.layers", attn="self_attn", mlp="mlp", final_norm="model.norm")
_POST_NORMS = dict(layers="model.layers", attn="post_attention_layernorm", mlp="post_feedforward_layernorm",
                   final_norm="model.norm")

#: model_type (from config.json) -> adapter. Parallel-attention families (GPT-NeoX, Cohere, Falcon)
#: need nothing special: both sublayers read h_l and their outputs are still what is added.
ARCHITECTURES: dict[str, Arch] = {
    "llama": Arch("llama", **_LLAMA_LIKE),
    "qwen2": Arch("qwen2", **_LLAMA_LIKE),
    "qwen3": Arch("qwen3", **_LLAMA_LIKE),
    "mistral": Arch("mistral", **_LLAMA_LIKE),
    "phi3": Arch("phi3", **_LLAMA_LIKE),
    "olmo": Arch("olmo", **_LLAMA_LIKE),
    "starcoder2": Arch("starcoder2", **_LLAMA_LIKE),
    "mixtral": Arch("mixtral", **_LLAMA_LIKE),        # the sparse MoE block is the MLP
    "qwen3_moe": Arch("qwen3_moe", **_LLAMA_LIKE),    # likewise (dense layers: Qwen3MoeMLP)
    "cohere": Arch("cohere", **_LLAMA_LIKE, logits="multiply"),
    "granite": Arch("granite", **_LLAMA_LIKE, residual_scale="residual_multiplier", logits="divide"),
    "olmo2": Arch("olmo2", **_POST_NORMS),
    "gemma2": Arch("gemma2", **_POST_NORMS, logits="softcap"),
    "gemma3_text": Arch("gemma3_text", **_POST_NORMS, logits="softcap"),
    # the multimodal wrapper: its forward (transformers 5.23) does not softcap, unlike Gemma3ForCausalLM's
    "gemma3": Arch("gemma3", layers="model.language_model.layers", attn="post_attention_layernorm",
                   mlp="post_feedforward_layernorm", final_norm="model.language_model.norm"),
    "gpt_neox": Arch("gpt_neox", layers="gpt_neox.layers", attn="attention", mlp="mlp",
                     final_norm="gpt_neox.final_layer_norm"),
    "gpt2": Arch("gpt2", layers="transformer.h", attn="attn", mlp="mlp", final_norm="transformer.ln_f"),
    "falcon": Arch("falcon", layers="transformer.h", attn="self_attention", mlp="mlp",
                   final_norm="transformer.ln_f", inplace=True),
}


def supported_families() -> str:
    return ", ".join(sorted(ARCHITECTURES))


def unwrap(value: Any) -> Any:
    """The hidden-state tensor of a module output: element 0 of a tuple, else the value itself.

    Never index a tensor with ``[0]`` to "unwrap" it: for a decoder layer that
    returns ``[B, T, H]`` that would silently select batch row 0.
    """
    if isinstance(value, (tuple, list)):
        return value[0]
    return value


def rewrap(old: Any, new: torch.Tensor) -> Any:
    """Put ``new`` where :func:`unwrap` found the hidden states of ``old``."""
    if isinstance(old, tuple):
        return (new,) + tuple(old[1:])
    if isinstance(old, list):
        return [new] + list(old[1:])
    return new


class ShapeError(DepthError):
    """A tensor read from the model does not have the shape the measurement expects."""


def check_residual(x: Any, batch: int, tokens: int, what: str = "residual") -> torch.Tensor:
    """Assert that ``x`` is a ``[batch, tokens, hidden]`` tensor and return it."""
    shape = tuple(getattr(x, "shape", ()))
    if len(shape) != 3 or shape[0] != batch or shape[1] != tokens:
        raise ShapeError(
            f"{what} has shape {shape}, expected [batch={batch}, tokens={tokens}, hidden]; "
            "a module output was probably unwrapped wrongly (output[0] of a tensor is batch row 0)."
        )
    return x


def get_path(root: Any, dotted: str) -> Any:
    """The object at ``dotted`` below ``root`` (``"model.layers.3.mlp"``: attributes, and list items by index)."""
    obj = root
    for part in dotted.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj
