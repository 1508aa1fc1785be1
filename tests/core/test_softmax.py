"""``core.softmax.probabilities`` and ``logsumexp`` against ``torch.softmax`` and ``torch.logsumexp``: the same
numbers within float32 rounding, no subnormal float, and the input left as it was."""
from __future__ import annotations

import torch
from conftest import ATOL

from depthutils.core.softmax import EXP_FLOOR, logsumexp, probabilities

TINY = torch.finfo(torch.float32).tiny  # the smallest normal float32


def wide_logits(dtype):
    g = torch.Generator().manual_seed(0)
    z = torch.randn(6, 5000, generator=g) * 40  # gaps of hundreds: many e^{z−max} below the normal floats
    return z.to(dtype)


def test_probabilities_equal_softmax_without_subnormals():
    for dtype in (torch.float32, torch.bfloat16):
        z = wide_logits(dtype)
        before = z.clone()
        want = torch.softmax(z.float(), -1)
        got = probabilities(z)
        assert got.dtype == torch.float32 and got.shape == z.shape
        assert torch.equal(z, before)  # the input is not written
        torch.testing.assert_close(got, want, atol=ATOL, rtol=1e-5)
        torch.testing.assert_close(got.sum(-1), torch.ones(6), atol=ATOL, rtol=0)
        assert ((want > 0) & (want < TINY)).any()  # the case the clamp is for occurs here
        assert not ((got > 0) & (got < TINY)).any()
        assert got.min() >= torch.exp(torch.tensor(EXP_FLOOR)) / got.shape[-1]


def test_logsumexp_equals_torch_logsumexp():
    for dtype in (torch.float32, torch.bfloat16):
        z = wide_logits(dtype)
        before = z.clone()
        got = logsumexp(z)
        assert got.dtype == torch.float32 and got.shape == (6,)
        assert torch.equal(z, before)
        torch.testing.assert_close(got, torch.logsumexp(z.double(), -1).float(), atol=ATOL, rtol=1e-6)
