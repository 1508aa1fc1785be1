"""Closed-form affine maps ``ŷ = W x + b`` from normal equations accumulated in float64: the cross-model mapping
(chapter 7) and the tuned readout (chapter 3) fit theirs with these.

The normal equations ``XᵀX`` and ``XᵀY`` (``X`` with a column of ones for the bias) are summed batch by batch, so
no residual of every token is ever held at once, and solved once with a ridge penalty on the weights (not the
bias), relative to the mean diagonal of ``XᵀX`` so that it is free of the residual's scale.
"""
from __future__ import annotations

import torch


def with_bias(x: torch.Tensor) -> torch.Tensor:
    """``x`` with a column of ones appended (the affine map's bias)."""
    return torch.cat([x, torch.ones(*x.shape[:-1], 1, dtype=x.dtype)], dim=-1)


def fit_maps(xtx: torch.Tensor, xty: torch.Tensor, ridge: float, toward_identity: bool = False) -> torch.Tensor:
    """Solve the ridge normal equations for every source layer at once.

    ``xtx [S, D+1, D+1]`` and ``xty [S, D+1, K]`` (the last row/column is the bias); the penalty is
    ``ridge · mean(diag XᵀX)`` on the weights only, so ``ridge`` is free of the residual's scale. It pulls the
    weights towards zero; or with ``toward_identity`` (``K = D``) the whole map, bias included, towards the identity
    map ``x ↦ x``: ``min ‖X W − Y‖² + λ‖W − [I; 0]‖²``, solved by ``(XᵀX + λI) W = XᵀY + λ[I; 0]``, so that a large
    ``ridge`` leaves ``x`` as it is.
    """
    S, D1, K = xty.shape
    if toward_identity and K != D1 - 1:
        raise ValueError(f"toward_identity needs a map onto the same width; got {D1 - 1} onto {K}.")
    eye = torch.eye(D1, dtype=xtx.dtype)
    eye[-1, -1] = 1.0 if toward_identity else 0.0  # the bias: towards 0 with the identity, else free
    scale = xtx[:, :-1, :-1].diagonal(dim1=1, dim2=2).mean(-1).clamp_min(1e-12)  # [S]
    lhs = xtx + ridge * scale[:, None, None] * eye
    if toward_identity:
        xty = xty + ridge * scale[:, None, None] * eye[:, :-1]
    # one solve per layer: torch's batched solve (MKL's getrs) fails on a wide right-hand side, e.g.
    # SmolLM2 onto itself ([30, 577, 577] against [30, 577, 17280]: "Pivots given to lu_solve must all be
    # greater or equal to 1"); the per-layer solves are the same arithmetic
    out = torch.empty_like(xty)  # written layer by layer: never a second [S, D+1, K] beside it
    for i in range(S):
        out[i] = torch.linalg.solve(lhs[i], xty[i])
    return out


class NormalEquations:
    """``XᵀX [S, D+1, D+1]`` and ``XᵀY [S, D+1, K]`` of ``S`` maps, summed in float64 over batches of rows."""

    def __init__(self):
        self.xtx = self.xty = None
        self.rows = 0  #: the rows (tokens) summed so far

    def add(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Add rows: ``x [S, N, D]`` (without the bias column) and ``y [S, N, K]`` or ``[N, K]`` (one target for all)."""
        xb = with_bias(x.double())
        a, b = xb.transpose(1, 2) @ xb, xb.transpose(1, 2) @ y.double()
        if self.xtx is None:
            self.xtx, self.xty = a, b
        else:
            self.xtx.add_(a)
            self.xty.add_(b)
        self.rows += x.shape[1]

    def solve(self, ridge: float, toward_identity: bool = False) -> torch.Tensor:
        """The maps ``[S, D+1, K]`` (:func:`fit_maps`); the last row is the bias."""
        if self.xtx is None:
            raise ValueError("No rows were added to the normal equations: pass at least one text to fit on.")
        return fit_maps(self.xtx, self.xty, ridge, toward_identity)
