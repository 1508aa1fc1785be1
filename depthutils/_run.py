"""Small pieces every measurement shares: encoding a prompt list, progress bars, norms."""
from __future__ import annotations

import importlib.util
import os
import sys
import warnings

import torch

with warnings.catch_warnings():  # a kernel without ipywidgets: tqdm falls back to text bars, no warning
    warnings.simplefilter("ignore")
    from tqdm.auto import tqdm

from .errors import DepthError
from .prompts import Encoded, Prompt, as_prompt, encode


def as_prompts(prompts) -> list[Prompt]:
    """A list of :class:`Prompt` from one prompt, one string, or a list of either."""
    if isinstance(prompts, (Prompt, str)):
        prompts = [prompts]
    prompts = [as_prompt(p) for p in prompts]
    if not prompts:
        raise DepthError("No prompts were given; pass at least one prompt (n_examples must be ≥ 1).")
    return prompts


def encode_all(handle, prompts, need_answer: bool = False) -> tuple[list[Prompt], list[Encoded]]:
    """The prompts as a list, and their tokenisation for ``handle`` (over-long prompts are rejected)."""
    prompts = as_prompts(prompts)
    return prompts, [encode(handle.tokenizer, p, handle.max_length, need_answer) for p in prompts]


def _bars_wanted() -> bool:
    """DEPTHUTILS_PROGRESS=1/0 decides; unset, bars show in a terminal, or in Jupyter with ipywidgets.

    A notebook kernel without ipywidgets would print text bars into the cell's stderr, which
    then shows in the rendered book and breaks nbval's output comparison.
    """
    env = os.environ.get("DEPTHUTILS_PROGRESS")
    if env in ("0", "1"):
        return env == "1"
    if sys.stderr is not None and sys.stderr.isatty():
        return True
    if "ipykernel" in sys.modules:
        return importlib.util.find_spec("ipywidgets") is not None
    return False


def progress(iterable, desc: str, total: int | None = None, enabled: bool = True):
    """A tqdm.auto bar on loops that can take a while (see :func:`_bars_wanted`)."""
    return tqdm(iterable, desc=desc, total=total, disable=not (enabled and _bars_wanted()), leave=False)


def rel_norm(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per-token ``‖x‖ / ‖ref‖`` over the hidden axis, in float32."""
    return x.float().norm(dim=-1) / ref.float().norm(dim=-1)


def cosine(x: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per-token cosine similarity over the hidden axis, in float32."""
    return torch.nn.functional.cosine_similarity(x.float(), ref.float(), dim=-1)
