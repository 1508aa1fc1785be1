"""The trainer's step against its reference: objective A's loss with the unembedding on the counted positions
only (:func:`depthutils.ladder.train.loss_of`), against the same loss from every position's logits.

One forward and backward pass per step, at each layer count of the depth-necessity sweep, on the sweep's own
batches (S5 with structured questions, 128 chains a step), on one thread as the sweep trains; the two routes
alternate step by step in one process, so a busy machine slows both alike. The loss and the gradients of the two
routes are compared too.
"""
from __future__ import annotations

import statistics
import time

import torch

__all__ = ["every_position_loss", "train_step", "print_train_step"]


def every_position_loss(model, pairs):
    """The reference: every position's logits, the targets' cross-entropy where counted (the trainer's loss
    before it unembedded the counted positions only; ``weights`` None)."""
    import torch.nn.functional as F

    from depthutils.ladder.objectives import IGNORE

    counted = sum(int((t != IGNORE).sum()) for _, t, _ in pairs)
    loss = 0.0
    for inputs, targets, _ in pairs:
        logits = model(input_ids=inputs, use_cache=False).logits
        loss = loss + F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=IGNORE,
                                      reduction="sum") / counted
    return loss


def train_step(layers=(2, 4, 8), steps: int = 40, warmup: int = 4, task: str = "s5m") -> dict:
    """``{layers: {"reference_ms", "ours_ms", "speedup", "loss_diff", "grad_rel_diff"}}``: the median milliseconds
    of a forward and backward pass over ``steps`` steps (after ``warmup``) of each route, and how far apart their
    loss and gradients are on one more batch."""
    from depthutils.ladder import registry
    from depthutils.ladder.objectives import ObjectiveBatches, geometry_of
    from depthutils.ladder.train import build_model, ensure_tokenizer, loss_of
    from depthutils.ladder.word_problems import TASKS

    had = torch.get_num_threads()
    torch.set_num_threads(1)
    tok = ensure_tokenizer(registry.DEFAULT_CORPUS_DIR)
    out = {}
    try:
        for n in layers:
            spec = registry.SPECS[registry.sweep_name(task, n, registry.SWEEP_SEEDS[0])]
            model = build_model(spec, tok).train()
            maker = ObjectiveBatches(tok, "a", spec["seed"], geometry_of(spec), registry.DEFAULT_CORPUS_DIR,
                                     task=TASKS[task], longest=spec["longest"])
            times = {"reference": [], "ours": []}
            for step in range(warmup + steps):
                pairs = maker.pairs(step)
                order = (("reference", every_position_loss), ("ours", loss_of))
                for name, route in order if step % 2 else order[::-1]:
                    t = time.perf_counter()
                    model.zero_grad()
                    route(model, pairs).backward()
                    if step >= warmup:
                        times[name].append(time.perf_counter() - t)
            pairs, grads, losses = maker.pairs(warmup + steps), [], []
            for route in (every_position_loss, loss_of):
                model.zero_grad()
                loss = route(model, pairs)
                loss.backward()
                losses.append(float(loss.detach()))
                grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
            ref, ours = (1000 * statistics.median(times[k]) for k in ("reference", "ours"))
            out[n] = {"reference_ms": ref, "ours_ms": ours, "speedup": ref / ours,
                      "loss_diff": abs(losses[0] - losses[1]),
                      "grad_rel_diff": float((grads[0] - grads[1]).abs().max() / grads[0].abs().max())}
    finally:
        torch.set_num_threads(had)
    return out


def print_train_step(rows: dict) -> None:
    print("trainer step (objective A, one thread): every position's logits against the counted positions only")
    for n, r in rows.items():
        print(f"  {n} layers: reference {r['reference_ms']:.1f} ms, ours {r['ours_ms']:.1f} ms, "
              f"{r['speedup']:.2f}x; |loss diff| {r['loss_diff']:.1e}, max gradient diff {r['grad_rel_diff']:.1e} "
              f"of the largest", flush=True)
