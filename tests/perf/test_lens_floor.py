"""``perf.lens_floor`` on a small shape: both timings are measured, and the lens it times is the chunked lens of
that head (its KL of the last layer against itself is zero, its top-k overlap one)."""
from __future__ import annotations

import torch

from depthutils.measures.logit_lens import chunked_lens
from depthutils.perf.lens_floor import head_model, lens_floor


def test_the_lens_floor_times_both_and_the_head_is_a_lens():
    r = lens_floor(layers=2, tokens=3, hidden=8, vocab=64, dtype="float32", repeats=1)
    assert r["products_s"] > 0 and r["lens_s"] > 0 and r["lens_over_floor"] > 0
    assert r["tflop"] == 2 * 2 * 3 * 8 * 64 / 1e12
    model = head_model(8, 64, torch.float32)
    hs = torch.randn(2, 3, 8)
    final = torch.nn.functional.linear(hs[-1], model.nn._module.head.weight)
    out = chunked_lens(model, hs, final, 5)
    torch.testing.assert_close(out[-1, 0], torch.zeros(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(out[-1, 1], torch.ones(3))
