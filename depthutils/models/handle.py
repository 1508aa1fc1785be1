"""Loading a model and reading its residual stream, whatever its family.

`load_model` returns a :class:`ModelHandle`: an nnsight model plus an
architecture adapter (:class:`Arch`) that names, for each supported family,
the modules whose outputs are the quantities of the spec:

* ``layers_input(l)``  -> ``h_l``, the residual entering layer ``l``;
* ``layers_output(l)`` -> ``h_{l+1}``;
* ``attentions_output(l)`` -> ``a_l``, what attention adds to the residual;
* ``mlps_output(l)`` -> ``m_l``, what the MLP adds to the residual;
* ``final_norm`` and ``unembed``.

The accessor names follow nnterp's standard interface. Decoder layers return
a plain tensor in current transformers while attention modules return a
tuple, so every read goes through :func:`unwrap`, which takes element 0 of a
tuple only, and :func:`check_residual`, which asserts ``[B, T, H]``.
"""
from __future__ import annotations  # noqa: I001 (sorted; the long import kept on two lines)

import os
import sys
from typing import Any

import nnsight
import torch
from nnsight.modeling import huggingface as nnsight_hf

from depthutils.core.errors import DepthError
from depthutils.core.prompts import bos_mode
from depthutils.ladder.registry import ALIASES, is_embedded
from depthutils.models.architectures import (
    ARCHITECTURES, Arch, ShapeError, get_path, rewrap, supported_families, unwrap)
from depthutils.models.devices import _dense_bf16, _pick_device, _pick_dtype, auto_dtype
from depthutils.models.requests import DEFAULT_TIMEOUT
from depthutils.models.sources import _local_revision, _resolve_local, _tokenizer
from depthutils.models.stack import batch_invariant
from depthutils.models.start_token import check_option as check_start
from depthutils.models.start_token import describe as describe_start
from depthutils.models.start_token import resolve as resolve_start

__all__ = ["Arch", "ARCHITECTURES", "ModelHandle", "load_model", "loaded_dtypes", "unwrap"]

#: model name -> the dtype it was last loaded in, in this process (a chapter's "ran in" line names them)
_LOADED: dict[str, str] = {}


def loaded_dtypes() -> dict[str, str]:
    """Every model this process loaded, by name, with the dtype it last computed in (``"bfloat16"`` …)."""
    return dict(_LOADED)


class ModelHandle:
    """An nnsight model with its architecture adapter and tokenizer.

    Measurements only use the accessors below, so they work for every family in
    :data:`ARCHITECTURES`, locally or on NDIF (``remote=True``).
    """

    def __init__(self, nn_model: Any, arch: Arch, tokenizer: Any, *, name: str, revision: str,
                 remote: bool = False, device: str = "cpu", dtype: torch.dtype = torch.float32,
                 config: Any = None, prepend_bos: bool | str = True, timeout: float = DEFAULT_TIMEOUT,
                 start_how: str = "as given", dtype_how: str = "as given"):
        self.nn = nn_model
        self.arch = arch
        self.tokenizer = tokenizer
        self.name = name
        self.revision = revision
        self.remote = remote
        self.device = device
        self.dtype = dtype
        self.dtype_how = dtype_how  # how it was chosen: see depthutils.models.devices.auto_dtype
        self.config = config
        #: the decoder's own config (Gemma 3's multimodal config wraps a text config)
        self.text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        self.prepend_bos = prepend_bos  # resolved (never "auto"): see depthutils.core.prompts.encode
        self.start_how = start_how  # how it was chosen: see depthutils.models.start_token.resolve
        self.timeout = timeout  # remote: seconds one request may take, queue included
        #: remote: the id of every NDIF job this handle sent (one per request)
        self.jobs: list[str] = []
        #: remote: inside :func:`depthutils.models.each.each`'s session, whose traces run on the server as it is
        self.in_session = False
        scale = getattr(self.text_config, arch.residual_scale, None) if arch.residual_scale else None
        self.residual_scale = float(scale) if scale is not None else 1.0
        self._layers = get_path(nn_model, arch.layers)
        self.n_layers = len(self._layers)

    # -- the plain transformers model, for forward hooks outside nnsight -------------
    @property
    def hf(self) -> torch.nn.Module:
        """The underlying ``transformers`` model (a plain ``torch.nn.Module``: register forward hooks on it)."""
        return self.nn._module

    def hf_layer(self, l: int) -> torch.nn.Module:
        """Decoder layer ``l`` of :attr:`hf` as a plain module (``self.layer(l)`` is its nnsight envoy)."""
        return get_path(self.hf, self.arch.layers)[l]

    # -- nnterp-style accessors (nnsight envoys; read their .input/.output in a trace) --
    def layer(self, l: int) -> Any:
        return self._layers[l]

    def attention(self, l: int) -> Any:
        return get_path(self._layers[l], self.arch.attn)

    def mlp(self, l: int) -> Any:
        return get_path(self._layers[l], self.arch.mlp)

    @property
    def final_norm(self) -> Any:
        return get_path(self.nn, self.arch.final_norm)

    @property
    def unembed(self) -> Any:
        return get_path(self.nn, self.arch.unembed)

    def layers_input(self, l: int) -> Any:
        return self.layer(l).input

    def layers_output(self, l: int) -> Any:
        return unwrap(self.layer(l).output)

    def _added(self, raw: Any) -> Any:
        """What a sublayer adds to the residual, from its module's output."""
        x = unwrap(raw)
        if self.arch.inplace:
            x = x.clone()  # read now: the layer adds into this tensor in place later
        return x * self.residual_scale if self.residual_scale != 1.0 else x

    def _raw(self, added: torch.Tensor) -> torch.Tensor:
        """The module output that makes the sublayer add ``added`` (inverse of :meth:`_added`)."""
        x = added / self.residual_scale if self.residual_scale != 1.0 else added
        return x.clone() if self.arch.inplace else x

    def attentions_output(self, l: int) -> Any:
        return self._added(self.attention(l).output)

    def mlps_output(self, l: int) -> Any:
        return self._added(self.mlp(l).output)

    def set_layers_output(self, l: int, value: torch.Tensor) -> None:
        env = self.layer(l)
        env.output = rewrap(env.output, value)

    def set_attentions_output(self, l: int, value: torch.Tensor) -> None:
        """Make attention ``l`` add ``value`` to the residual."""
        env = self.attention(l)
        env.output = rewrap(env.output, self._raw(value))

    def set_mlps_output(self, l: int, value: torch.Tensor) -> None:
        """Make MLP ``l`` add ``value`` to the residual."""
        env = self.mlp(l)
        env.output = rewrap(env.output, self._raw(value))

    def set_layers_input(self, l: int, value: torch.Tensor) -> None:
        self.layer(l).input = value

    def finish_logits(self, z: torch.Tensor) -> torch.Tensor:
        """What the model does to ``lm_head``'s output before returning it (see :class:`Arch`)."""
        cfg, how = self.text_config, self.arch.logits
        if how == "softcap" and getattr(cfg, "final_logit_softcapping", None):
            cap = cfg.final_logit_softcapping
            return torch.tanh(z / cap) * cap
        if how == "divide" and getattr(cfg, "logits_scaling", None):
            return z / cfg.logits_scaling
        if how == "multiply" and getattr(cfg, "logit_scale", None) is not None:
            return z * cfg.logit_scale
        return z

    def logits(self) -> Any:
        """The model's output logits inside a trace (``lm_head``'s output, finished)."""
        return self.finish_logits(self.unembed.output)

    def lens(self, h: torch.Tensor) -> torch.Tensor:
        """Logits of the logit lens: ``unembed(final_norm(h))``, finished like the model's own;
        callable inside a trace. At the last layer it equals the model's output."""
        return self.finish_logits(self.unembed(self.final_norm(h)))

    # -- running ----------------------------------------------------------------------
    def trace(self, input_ids: torch.Tensor):
        """An nnsight trace over a batch of token ids ``[B, T]`` (no padding)."""
        if input_ids.ndim != 2:
            raise ShapeError(f"input_ids must be [batch, tokens], got {tuple(input_ids.shape)}")
        if self.remote and not self.in_session:
            return self.nn.trace(input_ids, backend=self.backend("trace"))
        return self.nn.trace(input_ids if self.remote else input_ids.to(self.device))

    def backend(self, what: str, bar: bool = True):
        """The backend of one NDIF request for ``what`` (a measurement's name, for its status bar and
        its error messages): a :class:`depthutils.models.remote.Backend`."""
        from depthutils.models.remote import Backend  # the NDIF client, loaded only for a remote model

        return Backend(self.nn.to_model_key(), name=self.name, what=what, timeout=self.timeout, jobs=self.jobs,
                       bar_enabled=bar)

    def greedy(self, input_ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        """Greedy decoding from token ids ``[1, T]`` through nnsight (on NDIF when remote):
        the prompt and its continuation, ``[1, T + new]``, on the CPU."""
        if input_ids.ndim != 2 or input_ids.shape[0] != 1:
            raise ShapeError(f"input_ids must be [1, tokens], got {tuple(input_ids.shape)}")
        return self.greedy_batch([input_ids], max_new_tokens)[0]

    def greedy_batch(self, contexts: list, max_new_tokens) -> list:
        """Greedy decoding of several contexts (token ids ``[1, T_i]`` each) in one nnsight ``generate``
        (on NDIF when remote): each context with its own continuation, ``[1, T_i + new_i]``, on the CPU.

        The contexts are left-padded into one batch with an attention mask (positions follow the mask),
        so each row decodes as it would alone, up to floating-point rounding. ``max_new_tokens`` is one
        number or one per context; a row stops after its own budget or at its first end-of-sequence
        token, as a decoding of that context alone would.
        """
        for c in contexts:
            if c.ndim != 2 or c.shape[0] != 1:
                raise ShapeError(f"input_ids must be [1, tokens], got {tuple(c.shape)}")
        budgets = [max_new_tokens] * len(contexts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
        lengths = [c.shape[1] for c in contexts]
        T = max(lengths)
        pad = self.tokenizer.pad_token_id or self.tokenizer.eos_token_id
        ids = torch.full((len(contexts), T), pad if pad is not None else 0, dtype=contexts[0].dtype)
        mask = torch.zeros(len(contexts), T, dtype=torch.long)
        for i, c in enumerate(contexts):
            ids[i, T - c.shape[1]:], mask[i, T - c.shape[1]:] = c[0], 1
        out = self._generate(ids, mask, max(budgets))
        stop = self._eos_ids()
        rows = []
        for i, c in enumerate(contexts):
            new = out[i, T:T + budgets[i]]
            ends = [k for k, tok in enumerate(new.tolist()) if tok in stop]
            rows.append(torch.cat([c[0].cpu(), new[:ends[0] + 1] if ends else new])[None, :])
        return rows

    def _generate(self, ids: torch.Tensor, mask: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        """One nnsight ``generate`` over a (left-padded) batch ``[B, T]``: ``[B, T + new]`` on the CPU."""
        if not self.remote:
            ids, mask = ids.to(self.device), mask.to(self.device)
        backend = self.backend("greedy decoding") if self.remote and not self.in_session else None
        with torch.no_grad(), self.nn.generate(ids, backend=backend, max_new_tokens=max_new_tokens,
                                               do_sample=False, attention_mask=mask,
                                               pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id
                                               ) as tracer:
            out = tracer.result.save()
        if out.ndim != 2 or out.shape[0] != ids.shape[0] or out.shape[1] < ids.shape[1]:
            raise ShapeError(f"generated ids must be [{ids.shape[0]}, >= {ids.shape[1]}], got {tuple(out.shape)}")
        return out.cpu()

    def _eos_ids(self) -> set:
        """The token ids that end a greedy decoding (the generation config's, else the model config's)."""
        eos = getattr(getattr(self.nn._module, "generation_config", None), "eos_token_id", None)
        eos = getattr(self.text_config, "eos_token_id", None) if eos is None else eos
        return set() if eos is None else {eos} if isinstance(eos, int) else set(eos)

    def no_grad(self):
        """``torch.no_grad()`` locally; gradients are off by default inside traces otherwise."""
        return torch.no_grad()

    @property
    def max_length(self) -> int | None:
        cfg = self.text_config
        for key in ("max_position_embeddings", "n_positions", "n_ctx"):
            v = getattr(cfg, key, None)
            if isinstance(v, int):
                return v
        return None

    @property
    def bos(self) -> str:
        """What position 0 holds: see :func:`depthutils.core.prompts.bos_mode`."""
        return bos_mode(self.tokenizer, self.prepend_bos)

    def meta(self) -> dict:
        return {"model": self.name, "revision": self.revision, "family": self.arch.family,
                "n_layers": self.n_layers, "dtype": self.dtype_name, "dtype_how": self.dtype_how,
                "device": self.device, "remote": self.remote, "context": self.max_length,
                "prepend_bos": self.prepend_bos, "bos": self.bos, "start": self.start_how}

    @property
    def dtype_name(self) -> str:
        """``"float32"``, ``"bfloat16"``, …: the dtype the model computes in."""
        return str(self.dtype).replace("torch.", "")

    @property
    def precision(self) -> str:
        """The dtype and how it was chosen, in a few words for a page: ``"bfloat16 (auto: the CPU has avx512_bf16)"``."""
        return f"{self.dtype_name} ({self.dtype_how})"

    @property
    def start(self) -> str:
        """What position 0 holds and how that was chosen, in one sentence for a page."""
        return f"{describe_start(self.tokenizer, self.prepend_bos)[:-1]} (prepend_bos {self.start_how})."

    def __repr__(self) -> str:
        return (f"ModelHandle({self.name!r}, family={self.arch.family}, layers={self.n_layers}, "
                f"dtype={self.precision}, remote={self.remote})")


# ---------------------------------------------------------------------------------------
# loading

def load_model(name_or_path: str, *, device: str = "auto", dtype: Any = "auto", remote: bool = False,
               revision: str | None = None, trust_remote_code: bool = False,
               prepend_bos: bool | str = "auto", timeout: float = DEFAULT_TIMEOUT,
               label: str | None = None) -> ModelHandle:
    """Load a model for measurement.

    Args:
        name_or_path: an alias of an embedded model (``python -m depthutils models``),
            a local Hugging Face folder, or a hub id such as ``meta-llama/Llama-3.1-8B``.
        device: ``"auto"`` (GPU if any, else CPU), ``"cpu"`` or ``"cuda[:i]"``.
        dtype: ``"auto"`` (default): bfloat16 on a GPU and on a CPU that computes it natively (AVX-512 BF16,
            AMX or Arm BF16; :func:`depthutils.models.devices.native_bf16`), float32 on other CPUs and for the
            book's embedded models; or ``"float32"``, ``"bfloat16"``, ``"float16"``. The handle's
            :attr:`~ModelHandle.precision` and every result's ``meta`` say which, and why.
        remote: run on NDIF. The API key is read from ``NDIF_API_KEY`` in the environment
            and is never an argument, so it cannot end up in an executed notebook.
        revision: a hub revision (branch, tag or commit).
        trust_remote_code: off unless you ask for it; it runs code from the model's repo.
        prepend_bos: what stands at position 0, which no measurement intervenes on. ``True``: when the
            tokenizer adds no BOS (GPT-2, Pythia, Qwen2.5), prepend its BOS (or EOS), so that position 0 is
            an attention sink and not the first real token (TransformerLens's convention); ``False``: no
            start token; one token of the vocabulary; ``"auto"`` (default): ``True``, except for the named
            real models, whose start is chosen by measurement (:mod:`depthutils.models.start_token`). Results record it.
        timeout: with ``remote=True``, the seconds one request to NDIF may take from sending to its
            downloaded result, its time in NDIF's queue included (default 3600: a 70B model's queue);
            past it the call stops with an error that says so.
        label: the name results and prose give the model (default: its alias's folder, path or hub id).
    """
    from nnsight.modeling.transformers import TransformersModel
    from transformers import AutoConfig
    from transformers.utils import logging as hf_logging

    if os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") == "1":  # also when transformers was imported first
        hf_logging.disable_progress_bar()

    check_start(prepend_bos)
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path).strip():
        raise DepthError("load_model needs a model alias, local folder or hub id; got an empty value.")
    # an embedded alias ("default") is named by its folder ("ladder-8"): that name is what a reader is shown
    name = ALIASES.get(str(name_or_path), str(name_or_path))
    if remote:
        if not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0):
            raise DepthError(f"timeout must be a positive number of seconds, got {timeout!r}.")
        if not os.environ.get("NDIF_API_KEY"):
            raise DepthError("remote=True needs an NDIF API key in the environment variable NDIF_API_KEY.")
        from depthutils.models.remote import ndif_reachable  # the NDIF client, loaded only for a remote model
        if not ndif_reachable():
            raise DepthError(f"Cannot reach NDIF (the remote execution service) at {nnsight.CONFIG.API.HOST}: check "
                             "your connection or NDIF_HOST, or run with remote=False on a model that fits here.")
    local = _resolve_local(name)  # remote too: a self-hosted NDIF can serve a folder it deployed
    source = str(local.resolve()) if local is not None else name
    try:
        config = AutoConfig.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code)
    except Exception as e:  # offline hub, typo, gated repo ...
        raise DepthError(
            f"Model {name!r} is not an embedded alias ({', '.join(sorted(ALIASES))}), not a local folder, "
            f"and could not be fetched from the Hugging Face hub ({type(e).__name__}). "
            "Check the spelling, give a folder with config.json, or connect to the hub."
        ) from None
    arch = ARCHITECTURES.get(getattr(config, "model_type", None))
    if arch is None:
        raise DepthError(
            f"Model {name!r} is a {getattr(config, 'model_type', '?')!r} model, which depthutils does not support. "
            f"Supported families: {supported_families()}."
        )
    tokenizer = _tokenizer(source, local is not None, revision, trust_remote_code)
    if remote:
        nnsight.CONFIG.API.APIKEY = os.environ["NDIF_API_KEY"]  # from the environment only, never saved
        nnsight.register(sys.modules["depthutils"])  # traces call helpers of every subpackage; ship their source
        if local is not None:
            # nnsight asks the hub for a repo id's canonical spelling; a folder is its own id (the key a
            # self-hosted NDIF that deployed this folder serves it under)
            nnsight_hf._ID_CACHE.setdefault(source, source)
        model = TransformersModel(source, task="text-generation", tokenizer=tokenizer, revision=revision,
                                  trust_remote_code=trust_remote_code)
        rev = _local_revision(local) if local is not None else revision or "main"
        handle = ModelHandle(model, arch, tokenizer, name=label or name, revision=rev, remote=True,
                             device="remote", dtype=_pick_dtype(dtype, "cuda"), config=config,
                             dtype_how="auto: NDIF's GPUs" if dtype == "auto" else "as given",
                             prepend_bos=True if prepend_bos == "auto" else prepend_bos, timeout=float(timeout),
                             start_how="auto: the tokenizer's BOS (the specification's rule)" if prepend_bos == "auto" else "as given")
        return handle
    dev = _pick_device(device)
    embedded = local is not None and is_embedded(str(local))
    # "auto" is decided once (off Linux, native_bf16 times a matmul); a named dtype is checked against this CPU
    dt, how = auto_dtype(dev, embedded) if dtype == "auto" else (_pick_dtype(dtype, dev), "as given")
    placement = {} if dev == "cpu" else {"device_map": dev}  # device_map needs accelerate
    model = TransformersModel(source, task="text-generation", tokenizer=tokenizer, dispatch=True,
                              revision=revision, dtype=dt, trust_remote_code=trust_remote_code,
                              use_safetensors=True, **placement)
    module = model._module
    module.eval()
    for p in module.parameters():  # measurements never train; keeps IG from filling param.grad
        p.requires_grad_(False)
    if dev == "cpu" and dt == torch.bfloat16:  # nothing added to the float32 path
        get_path(module, arch.unembed).register_forward_pre_hook(_dense_bf16)
    rev = _local_revision(local) if local is not None else (getattr(config, "_commit_hash", None) or revision or "main")
    start, start_how = resolve_start(prepend_bos, name, module, tokenizer)
    handle = ModelHandle(model, arch, tokenizer, name=label or name, revision=rev, remote=False, device=dev, dtype=dt,
                         config=config, prepend_bos=start, start_how=start_how, dtype_how=how)
    _LOADED[handle.name] = handle.dtype_name
    if dev == "cpu" and dt == torch.bfloat16:  # whether the fast path may run: measured here, not inside a measurement
        batch_invariant(handle)
    return handle
