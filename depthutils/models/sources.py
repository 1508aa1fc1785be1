"""Where a model's files come from, without loading its weights: an embedded alias, a named real model
(its verified cache, :mod:`depthutils.models.real.fetch`), a local Hugging Face folder, or a hub id; the revision a
cache key carries; and the tokenizer.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from depthutils.core.errors import DepthError
from depthutils.ladder.registry import resolve_alias
from depthutils.models.real.catalog import REAL_MODELS


def _resolve_local(name: str) -> Path | None:
    if name in REAL_MODELS:  # a named real model: its verified cached folder, fetched on first use
        from depthutils.models.real.fetch import ensure

        return ensure(name)
    p = resolve_alias(name)
    if p is not None:
        return Path(p)
    p = Path(name).expanduser()
    if p.is_dir():
        if not (p / "config.json").exists():
            raise DepthError(f"Folder {p} has no config.json; point load_model at a Hugging Face model folder.")
        return p
    return None


def _local_revision(path: Path) -> str:
    """A content hash of a local model folder (config and weight files), short and stable."""
    h = hashlib.sha256((path / "config.json").read_bytes())
    for f in sorted(path.glob("*.safetensors")):
        h.update(f.name.encode())
        h.update(f.read_bytes() if f.stat().st_size < 200 * 2**20 else str(f.stat().st_size).encode())
    return "local-" + h.hexdigest()[:12]


def revision_of(name: str) -> str:
    """The revision a cache key should carry: a content hash for local models, else the hub commit."""
    local = _resolve_local(name)
    if local is not None:
        return _local_revision(local)
    try:
        from transformers import AutoConfig

        return getattr(AutoConfig.from_pretrained(name), "_commit_hash", None) or "main"
    except Exception:
        return "main"


def load_tokenizer(name: str, trust_remote_code: bool = False):
    """The tokenizer of an alias, a local folder or a hub id (without loading the weights)."""
    local = _resolve_local(name)
    return _tokenizer(str(local or name), local is not None, None, trust_remote_code)


def _tokenizer(source: str, local: bool, revision: str | None, trust_remote_code: bool):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if local and (Path(source) / "tokenizer.json").exists():
        # AutoTokenizer may swap a local tokenizer's class and change its ids.
        return PreTrainedTokenizerFast.from_pretrained(source)
    return AutoTokenizer.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code)
