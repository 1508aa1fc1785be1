"""A model's :class:`~depthutils.cost.accounting.Shape` and a token counter, offline where possible.

In order: an embedded alias or a local folder (its ``config.json`` and its own tokenizer), the papers'
models (:data:`PAPER_CONFIGS`, no download), then the hub (``AutoConfig``; with no connection, one
sentence). Where the model's tokenizer is not on disk, prompts are counted as characters / 4
(:data:`CHARS_PER_TOKEN`, about right for English with the 128k–152k vocabularies of Llama 3 and Qwen2.5).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from depthutils.core.errors import DepthError
from depthutils.cost.accounting import Shape
from depthutils.ladder.registry import resolve_alias
from depthutils.models.real.catalog import REAL_MODELS
from depthutils.models.real.fetch import ensure

CHARS_PER_TOKEN = 4.0

# Every number below was checked against a config.json (see the comment on each line; where the model's own
# repository was not readable offline, a fine-tune's config.json whose ``_name_or_path`` names it, which
# keeps the base model's shape). Only the fields the cost model reads are kept.
# Llama 3.1 70B: hidden 8192, MLP 28672, 80 layers, 64 heads, 8 KV heads, vocabulary 128256, untied
# (huggingface.co/vicky4s4s/llama-3-70B-instruct/blob/fed690c/config.json, Llama 3 70B, same shape as 3.1);
# 8B: 8,030,261,248 parameters (tests/perf/test_plan.py) from its safetensors index; 405B: hidden 16384, 126
# layers, 128 heads, 8 KV heads, head dim 128 (apxml.com/models/llama-3-1-405b, pcpartguide.com/local-llms/llama-3.1-405b).
_LLAMA = dict(model_type="llama", vocab_size=128256, max_position_embeddings=131072, num_key_value_heads=8,
              tie_word_embeddings=False)
# Qwen2.5 base models have a 131072-position config and their Instruct versions 32768
# (huggingface.co/arcee-ai/SuperNova-Medius/blame/refs%2Fpr%2F3/config.json from Qwen/Qwen2.5-14B: 131072;
# huggingface.co/jebish7/Qwen2.5-14B-Instruct, a duplicate of Qwen/Qwen2.5-14B-Instruct: 32768).
_QWEN = dict(model_type="qwen2", max_position_embeddings=131072)
_INSTRUCT = dict(max_position_embeddings=32768)
_Q15 = dict(_QWEN, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
            num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True)
# DeepSeek-R1-Distill-Qwen-1.5B unties its embeddings (tie_word_embeddings false, so 0.23B more weights than
# Qwen2.5-Math-1.5B): huggingface.co/onnx-community/DeepSeek-R1-Distill-Qwen-1.5B-ONNX/blob/main/config.json
_R1_15 = dict(_Q15, tie_word_embeddings=False)
# huggingface.co/ksh1119/qwen2.5_7b_kor_cp_it/blob/main/config.json; osllmai-community/Qwen2.5-7B-Instruct
_Q7 = dict(_QWEN, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
           num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False)
# Qwen2.5-Math-7B: 4096 positions (huggingface.co/zhimeng/Qwen-2.5-7B-Simple-RL/blob/main/config.json, from it)
_QM7 = dict(_Q7, max_position_embeddings=4096)
# huggingface.co/osllmai-community/Qwen2.5-14B-Instruct/blob/eaddfa6/config.json
_Q14 = dict(_QWEN, hidden_size=5120, intermediate_size=13824, num_hidden_layers=48, num_attention_heads=40,
            num_key_value_heads=8, vocab_size=152064, tie_word_embeddings=False)
# Qwen2.5-32B: hidden 5120, MLP 27648, 64 layers, 40 query and 8 KV heads, vocabulary 152064, 131072 positions
# (a public deployment tutorial's transcription of huggingface.co/Qwen/Qwen2.5-32B/blob/main/config.json; the
# model card, in ZHUI/paddlenlp_model_readme's Qwen/Qwen2.5-32B/index.md: 64 layers, 40 Q / 8 KV heads, 131,072)
_Q32 = dict(_Q14, intermediate_size=27648, num_hidden_layers=64)

#: The papers' models, transcribed from their ``config.json`` on the Hugging Face hub (the fields the
#: cost model reads): P1's Llama 3.1 and Qwen2.5 sizes, and the models of P2's Table 1
#: (``../shared/reference/effective_depth_table1.csv``), whose distilled and Math variants share their
#: base model's shape (but for the tied embeddings and context noted above).
PAPER_CONFIGS: dict[str, dict] = {
    "meta-llama/Llama-3.1-8B": dict(_LLAMA, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                    num_attention_heads=32),
    "meta-llama/Llama-3.1-70B": dict(_LLAMA, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                                     num_attention_heads=64),
    "meta-llama/Llama-3.1-405B": dict(_LLAMA, hidden_size=16384, intermediate_size=53248, num_hidden_layers=126,
                                      num_attention_heads=128),
    "Qwen/Qwen2.5-1.5B": _Q15, "Qwen/Qwen2.5-1.5B-Instruct": dict(_Q15, **_INSTRUCT),
    "Qwen/Qwen2.5-Math-1.5B": dict(_Q15, max_position_embeddings=4096),  # as Math-7B; not checked here
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": _R1_15,
    "Qwen/Qwen2.5-3B": dict(_QWEN, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                            num_attention_heads=16, num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "Qwen/Qwen2.5-7B": _Q7, "Qwen/Qwen2.5-7B-Instruct": dict(_Q7, **_INSTRUCT), "Qwen/Qwen2.5-Math-7B": _QM7,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": _Q7,
    "Qwen/Qwen2.5-14B": _Q14, "Qwen/Qwen2.5-14B-Instruct": dict(_Q14, **_INSTRUCT),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": _Q14,
    "Qwen/Qwen2.5-32B": _Q32, "Qwen/Qwen2.5-32B-Instruct": dict(_Q32, **_INSTRUCT),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": _Q32,
}
for _name in ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-405B"):
    PAPER_CONFIGS[_name + "-Instruct"] = PAPER_CONFIGS[_name]


@dataclass
class ModelInfo:
    """A model as the plan sees it: its shape, where it was found and how its prompts are counted."""
    name: str
    shape: Shape
    source: str           # "local folder", "papers' table" or "hub"
    tokenizer: object     # a tokenizer, or None: characters / 4
    bos: bool = True

    def count(self, text: str) -> int:
        """Tokens of ``text`` with a BOS, as the measurements encode it."""
        if self.tokenizer is None:
            return max(2, round(len(text) / CHARS_PER_TOKEN) + 1)
        ids = self.tokenizer(text)["input_ids"]
        return len(ids) + (0 if ids and ids[0] == self.tokenizer.bos_token_id else 1)


def model_info(name: str) -> ModelInfo:
    """The shape and token counter of ``name`` (an alias, a local folder, a papers' model or a hub id)."""
    path = resolve_alias(name)
    if path is None and name in REAL_MODELS:  # a named real model: its verified cache, fetched on first use
        path = ensure(name)
    path = Path(path) if path is not None else Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise DepthError(f"Folder {path} has no config.json; give a Hugging Face model folder.")
        cfg = json.loads((path / "config.json").read_text())
        return ModelInfo(name, Shape.from_config(cfg, name), "local folder", _tokenizer(path))
    key = next((k for k in PAPER_CONFIGS if k.lower() == name.lower()), None)
    if key is not None:
        return ModelInfo(name, Shape.from_config(PAPER_CONFIGS[key], key), "papers' table", None)
    return ModelInfo(name, Shape.from_config(_hub_config(name), name), "hub", None)


def _tokenizer(path: Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError):
        return None


def _hub_config(name: str) -> dict:
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name).to_dict()
    except (OSError, ValueError):
        raise DepthError(f"Model {name!r} is not an embedded alias, a local folder or one of the papers' models, and "
                         "its config could not be fetched from the hub; connect to the internet or give a local "
                         "folder with its config.json.") from None
