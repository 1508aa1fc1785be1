"""Does the second half's sharpening need position 0's massive activations? (a reviewer's question on P1 Fig. 2 and 4)

Chapter 1's norm-growth section locates massive activations (:mod:`depthutils.measures.norm_growth`: a component of
the residual at least :data:`~depthutils.measures.norm_growth.MASSIVE` times a token's median ``|component|``, ours
after Sun et al., COLM 2024) and, on the real models, finds them at position 0, the start token. This measurement
removes them and measures again, in one forward per prompt of three rows of the same prompt:

* row 0, **clean**: the model as it is;
* row 1, **clamped**: at the input ``h_l`` of every layer ``l``, every component ``d`` of position 0 that is massive
  there (``|h_l[0, d]| ≥ MASSIVE · m_l``) in the clean row or in this row, or was at an earlier layer, is set to
  ``sign(h_l[0, d]) · m_l``. ``m_l`` is the clean row's token median at layer ``l``: the mean over positions
  ``1 … T−1`` of the median ``|h_l[t, ·]|`` over a token's components (torch's median, the lower middle value). The
  components and the layer they start at are measured in the run, per prompt, never assumed: none is clamped
  before the first layer where the clean row's position 0 has a massive component;
* row 2, **control**: at every layer, as many components of position 0 as row 1 clamps there, drawn from the others
  (the first of a permutation of the components seeded by ``seed`` that are not clamped in row 1), set the same way.

Each row is then read as chapter 1 reads the clean model: the logit lens's KL to *its own* output on every ``h_l``
(``l = 0 … L−1``, :func:`depthutils.measures.logit_lens.read_lens`, at each prompt's last
:data:`~depthutils.core.depth.LENS_POSITIONS` positions, as the norm-growth section reads it), the
relative contribution ``‖Δ_l‖ / ‖h_l‖`` (chapter 1's statistic, positions ``1 … T−1``) and position 0's largest
``|h_l[0, d]| / m_l`` after the clamp (which shows that the clamp removed the massive activations); and the
output of rows 1 and 2 against the clean output at the same positions: ``KL(q_clean ‖ q_row)`` and top-1 agreement.
The clean row rides in the same batch as the clamped ones (in bfloat16 a result depends on the batch: the spec's
rule for every intervention).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import nnsight
import numpy as np
import torch

from depthutils.core.depth import LENS_POSITIONS
from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError, check_finite
from depthutils.core.results import Result, describe, half_sizes, halves, make_meta
from depthutils.cost.accounting import Cost, Shape
from depthutils.cost.budget import shape_of
from depthutils.cost.passes import one_trace_per_prompt
from depthutils.measures import counted
from depthutils.measures.example import Example, on_gsm
from depthutils.measures.logit_lens import read_lens
from depthutils.measures.norm_growth import MASSIVE, K, NormGrowthResult
from depthutils.models.architectures import check_residual
from depthutils.models.each import each

__all__ = ["MassiveClampResult", "massive_clamp", "prompt_clamp", "control_mask", "massive_at_zero", "cost", "example",
           "ROWS"]

#: the three rows of each prompt's forward, in batch order
ROWS = ("clean", "clamp", "control")
#: per layer, the per-row fields of the result, in the order a trace saves them
LAYER_STATS = ("ratio", "peak")


@dataclass
class MassiveClampResult(Result):
    """Per row of :data:`ROWS` (``<name>_clean``, ``_clamp``, ``_control``): ``lens_kl`` ``[L]``, the lens's KL to the
    row's own output on ``h_l`` (``l = 0 … L−1``; each prompt's mean over its last positions, a plain mean over
    prompts); ``ratio`` ``[L]``, ``‖Δ_l‖ / ‖h_l‖`` (positions ``1 … T−1``, token-weighted); ``peak`` ``[L]``, position
    0's largest ``|h_l[0, d]|`` over the clean token median ``m_l``, after the clamp (the largest over prompts).
    ``clamped`` ``[L]``: how many components the clamped row sets at layer ``l`` (the largest over prompts);
    ``dims`` ``[H]``: 1 where a component is clamped at some layer of some prompt. ``output_kl_clamp`` and
    ``output_kl_control``: ``KL(q_clean ‖ q_row)`` of the outputs, ``output_agree_*``: their top-1 agreement (each
    prompt's mean over the lens's positions). Each has its per-prompt values (``<name>_by_prompt``) beside it,
    weighed by ``prompt_tokens`` (``T − 1``)."""

    lens_kl_clean: np.ndarray = None
    lens_kl_clamp: np.ndarray = None
    lens_kl_control: np.ndarray = None
    ratio_clean: np.ndarray = None
    ratio_clamp: np.ndarray = None
    ratio_control: np.ndarray = None
    peak_clean: np.ndarray = None
    peak_clamp: np.ndarray = None
    peak_control: np.ndarray = None
    clamped: np.ndarray = None
    dims: np.ndarray = None
    output_kl_clamp: np.ndarray = None
    output_kl_control: np.ndarray = None
    output_agree_clamp: np.ndarray = None
    output_agree_control: np.ndarray = None
    lens_kl_clean_by_prompt: np.ndarray = None
    lens_kl_clamp_by_prompt: np.ndarray = None
    lens_kl_control_by_prompt: np.ndarray = None
    ratio_clean_by_prompt: np.ndarray = None
    ratio_clamp_by_prompt: np.ndarray = None
    ratio_control_by_prompt: np.ndarray = None
    peak_clean_by_prompt: np.ndarray = None
    peak_clamp_by_prompt: np.ndarray = None
    peak_control_by_prompt: np.ndarray = None
    clamped_by_prompt: np.ndarray = None
    dims_by_prompt: np.ndarray = None
    output_kl_clamp_by_prompt: np.ndarray = None
    output_kl_control_by_prompt: np.ndarray = None
    output_agree_clamp_by_prompt: np.ndarray = None
    output_agree_control_by_prompt: np.ndarray = None
    prompt_tokens: np.ndarray = None
    kind: ClassVar[str] = "massive_clamp"
    PER_PROMPT: ClassVar[dict] = {
        **{f"lens_kl_{r}": (f"lens_kl_{r}_by_prompt", "mean") for r in ROWS},
        **{f"ratio_{r}": (f"ratio_{r}_by_prompt", "tokens") for r in ROWS},
        **{f"peak_{r}": (f"peak_{r}_by_prompt", "max") for r in ROWS},
        "clamped": ("clamped_by_prompt", "max"), "dims": ("dims_by_prompt", "max"),
        **{f"output_{s}_{r}": (f"output_{s}_{r}_by_prompt", "mean") for s in ("kl", "agree") for r in ROWS[1:]}}
    INTERVAL_FACTS: ClassVar[tuple] = ("survive", "control_survive", "rel_clean", "rel_clamp", "output_kl",
                                       "output_agree")

    def facts(self) -> dict:
        """The numbers the prose states, rounded as printed. ``mid`` (``1 + L//2``): the first layer of chapter 1's
        second half of layers ``1 … L−1``; ``sharp_<row>``: the lens KL on ``h_mid``, what the second half still
        changes of the lens's distribution (the sharpening it does, ours); ``survive`` and ``control_survive``: the
        clamped and the control row's over the clean row's (None where the clean one is 0); ``rel_<row>``: the
        second-to-first ratio of ``‖Δ_l‖ / ‖h_l‖`` (chapter 1's halves, layer 0 apart); ``onset``: the first layer
        whose input is clamped (None: none is); ``dims``: the components clamped; ``n_dims``: the most clamped at
        one layer; ``start``: the token position 0 holds; ``peak_before`` and ``peak_after``: position 0's largest component over the median, clean and
        clamped, over the layers from ``onset`` on; ``output_kl`` and ``output_agree``: the clamped output against
        the clean one (``control_kl``, ``control_agree``: the control's)."""
        L = len(self.lens_kl_clean)
        mid = 1 + L // 2
        sharp = {r: float(getattr(self, f"lens_kl_{r}")[mid]) for r in ROWS}
        rel = {r: halves(getattr(self, f"ratio_{r}")[1:]) for r in ROWS}
        layers = np.flatnonzero(self.clamped > 0)
        onset = int(layers[0]) if layers.size else None
        after = slice(onset if onset is not None else L, L)
        over = lambda a: None if onset is None else round(float(np.max(a[after])), 1)  # noqa: E731
        share = lambda r: None if sharp["clean"] <= 0 else round(sharp[r] / sharp["clean"], 2)  # noqa: E731
        return {"L": L, "mid": mid, "half_size": min(half_sizes(self.ratio_clean[1:])),
                "start": self.meta.get("params", {}).get("start_token"),
                **{f"sharp_{r}": round(sharp[r], 2) for r in ROWS},
                "survive": share("clamp"), "control_survive": share("control"),
                **{f"rel_{r}": round(rel[r][1] / rel[r][0], 2) for r in ROWS},
                "onset": onset, "dims": [int(d) for d in np.flatnonzero(self.dims > 0)],
                "n_dims": int(np.max(self.clamped)), "peak_clean_max": round(float(np.max(self.peak_clean)), 1),
                "peak_before": over(self.peak_clean), "peak_after": over(self.peak_clamp),
                "output_kl": round(float(self.output_kl_clamp), 2), "output_agree": round(float(self.output_agree_clamp), 2),
                "control_kl": round(float(self.output_kl_control), 2),
                "control_agree": round(float(self.output_agree_control), 2)}

    def findings(self) -> str:
        f = self.facts()
        if f["onset"] is None:
            return (f"No component of position 0 reaches {MASSIVE:.0f}× a token's median at any layer (the largest: "
                    f"{f['peak_clean_max']}×): nothing was clamped, and the three rows are one model.")
        return (f"Clamped from h_{f['onset']} on: components {f['dims']} of position 0 (at most {f['n_dims']} at a "
                f"layer); position 0's largest component over the median, from there on: {f['peak_before']}× clean, "
                f"{f['peak_after']}× clamped. Lens KL on h_{f['mid']}: clean {f['sharp_clean']}, clamped "
                f"{f['sharp_clamp']}, control {f['sharp_control']} (clamped over clean {f['survive']}, control "
                f"over clean {f['control_survive']}). ‖Δ‖/‖h‖ second half over first: clean {f['rel_clean']}, "
                f"clamped {f['rel_clamp']}, control {f['rel_control']}. The clamped output against the clean one: "
                f"KL {f['output_kl']}, top-1 agreement {f['output_agree']} (the control's: KL {f['control_kl']}, "
                f"top-1 agreement {f['control_agree']}).")


def control_mask(seen: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """The control's components ``[H]`` (bool): the first ``seen.sum()`` of the permutation ``perm`` ``[H]`` that
    ``seen`` (the clamped row's components, ``[H]`` bool) does not hold."""
    free = ~seen[perm]
    pick = free & (free.cumsum(0) <= seen.sum())
    return torch.zeros_like(seen).index_put((perm,), pick)


def prompt_clamp(model, item) -> tuple:
    """One prompt's forward of :data:`ROWS` (one trace; ``item``: its encoding and the control's permutation ``[H]``):
    ``[L, 3, 3]`` (per layer, :data:`LAYER_STATS` then the clamped count, per row), ``[L, 3]`` (the lens's KL, each
    row's mean over the last positions), ``[2, 2]`` (the output's KL and top-1 agreement, rows 1 and 2 against row
    0) and ``[H]`` (the clamped components), in float32."""
    enc, perm = item
    T, B = enc.n_tokens, len(ROWS)
    P = min(LENS_POSITIONS, T - 1)
    with model.no_grad(), model.trace(enc.input_ids.expand(B, T)):
        per_layer = nnsight.save([])  # a list made inside the trace must be saved to outlive it
        hs, seen = [], None
        for l in range(model.n_layers):
            h = check_residual(model.layers_input(l), B, T, f"layer {l} input").clone()
            x = h.float()
            m = x[0, 1:].abs().median(dim=-1).values.mean()  # the clean row's token median
            now = (x[:2, 0].abs() >= MASSIVE * m).any(0)  # massive at position 0, clean or clamped row
            seen = now if seen is None else seen | now
            for row, mask in ((1, seen), (2, control_mask(seen, perm.to(h.device)))):
                h[row, 0] = torch.where(mask, x[row, 0].sign() * m, x[row, 0]).to(h.dtype)
            model.set_layers_input(l, h)
            hs.append(h[:, -P:])
            x, out = h.float(), check_residual(model.layers_output(l), B, T, f"layer {l} output").float()
            ratio = ((out - x).norm(dim=-1) / x.norm(dim=-1))[:, 1:].mean(-1)
            per_layer.append(torch.stack([ratio, x[:, 0].abs().amax(-1) / m, seen.sum().float().expand(B)]).save())
        lens = read_lens(model, hs, K, last=P, batch=True)
        z = model.logits()[:, -P:].float().log_softmax(-1)
        tail = torch.stack([(z[0].exp() * (z[0] - z[1:])).sum(-1).mean(-1),
                            (z[0].argmax(-1) == z[1:].argmax(-1)).float().mean(-1)]).save()
        dims = seen.float().save()
    lens = torch.stack([t[0].float().mean(-1) for t in lens])  # [L, 3]: the KL row of each layer's lens
    return torch.stack(list(per_layer)).float().cpu(), lens.cpu(), tail.float().cpu(), dims.cpu()


@counted
def massive_clamp(model, prompts, *, clean: NormGrowthResult | None = None, seed: int = 0,
                  max_tokens: int | None = None, progress_bar: bool = True) -> MassiveClampResult:
    """Position 0's massive activations clamped to the token median at every layer from where they appear, beside
    the clean model and a control that clamps as many other components (the module's docstring: which, how, from
    where), each read with the logit lens and chapter 1's relative contribution; one forward of three rows per
    prompt. ``clean``: :func:`~depthutils.measures.norm_growth.norm_growth`'s result on the same prompts (and
    ``max_tokens``), where it was run: a prompt whose position 0 it shows with no massive component at any layer's
    input has nothing to clamp, so its three rows are its clean values, taken from it without a forward. ``seed``
    draws the control's components; a prompt longer than ``max_tokens`` (default: the model's context) is cut."""
    if model.remote:
        raise DepthError("massive_clamp runs on a local model only (it has not been run on NDIF); load the model "
                         "with remote=False.")
    prompts, encs, fit = encode_all(model, prompts, max_tokens=max_tokens)
    if any(e.n_tokens < 2 for e in encs):
        raise DepthError("massive_clamp needs prompts of at least two tokens: position 0 is clamped, the others "
                         "give its median.")
    tokens = [e.n_tokens - 1 for e in encs]
    if clean is not None and list(clean.prompt_tokens) != tokens:
        raise DepthError("clean must be norm_growth's result on the same prompts, with the same max_tokens.")
    H = shape_of(model).hidden
    perm = torch.randperm(H, generator=torch.Generator().manual_seed(seed))
    run = [i for i in range(len(encs)) if clean is None or bool(massive_at_zero(clean)[i].any())]
    done = dict(zip(run, each(model, prompt_clamp, [(encs[i], perm) for i in run], "massive clamp",
                              enabled=progress_bar)))
    per = {k: [] for k in MassiveClampResult.PER_PROMPT}
    for i in range(len(encs)):
        layers, lens, tail, dims = done[i] if i in done else unclamped(clean, i, H)
        for c, r in enumerate(ROWS):
            per[f"lens_kl_{r}"].append(lens[:, c].double().numpy())
            for j, name in enumerate(LAYER_STATS):
                per[f"{name}_{r}"].append(layers[:, j, c].double().numpy())
        per["clamped"].append(layers[:, 2, 1].double().numpy())
        per["dims"].append(dims.double().numpy())
        for j, stat in enumerate(("kl", "agree")):
            for c, r in enumerate(ROWS[1:]):
                per[f"output_{stat}_{r}"].append(float(tail[j, c]))
    arrays = {f"{k}_by_prompt": check_finite(f"massive clamp {k}", np.asarray(v, float)) for k, v in per.items()}
    ds, n = describe(prompts)
    start = model.tokenizer.convert_ids_to_tokens(int(encs[0].input_ids[0, 0]))
    return MassiveClampResult(meta=make_meta(model, dataset=ds, n=n, seed=seed, fit=fit, tokens=sum(tokens),
                                             start_token=start),
                              prompt_tokens=np.array(tokens), **arrays).with_aggregates()


def massive_at_zero(clean: NormGrowthResult) -> np.ndarray:
    """``[N, L]``: whether position 0 of each prompt has a massive component at the input of each layer, in a
    norm-growth result (its largest ``|h_l[0, d]|`` at least :data:`MASSIVE` times the prompt's token median: the
    clamp's own test on its clean row)."""
    L = clean.ratio_by_prompt.shape[1]
    return clean.peak_first_by_prompt[:, :L] >= MASSIVE * clean.median_abs_by_prompt[:, :L]


def unclamped(clean: NormGrowthResult, i: int, H: int) -> tuple:
    """What :func:`prompt_clamp` gives for prompt ``i`` of a norm-growth result that has nothing to clamp: each row is
    the clean model, so each row's values are the clean ones, the outputs agree and no component is clamped."""
    L = clean.ratio_by_prompt.shape[1]
    stats = [clean.ratio_by_prompt[i], clean.peak_first_by_prompt[i, :L] / clean.median_abs_by_prompt[i, :L],
             np.zeros(L)]
    layers = torch.tensor(np.stack(stats, 1)[:, :, None].repeat(len(ROWS), 2))  # [L, 3 stats, 3 rows]
    lens = torch.tensor(clean.lens_kl_by_prompt[i])[:, None].repeat(1, len(ROWS))
    return layers, lens, torch.tensor([[0.0, 0.0], [1.0, 1.0]]), torch.zeros(H)


def cost(s: Shape, Ts, dtype: str, remote: bool) -> Cost:
    """What :func:`massive_clamp` runs on prompts of ``Ts`` tokens: one nnsight forward of three rows per prompt,
    each row's lens decoded in the trace at the last :data:`LENS_POSITIONS` positions."""
    return one_trace_per_prompt(s, Ts, dtype, remote, "massive_clamp", lens="traced", per_token=1, rows=len(ROWS),
                                lens_at=[min(LENS_POSITIONS, T - 1) for T in Ts])


def example(model, **options) -> Example:
    """One GSM8K problem cut to a few tokens (:mod:`depthutils.measures.example`)."""
    return on_gsm(massive_clamp, model, options)
