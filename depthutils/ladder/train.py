"""Trainer: AdamW, linear warmup + cosine decay, fixed seed, checkpoint-and-resume.

Threads: on a shared machine run with ``OMP_WAIT_POLICY=PASSIVE`` in the
environment (it must be set before torch is loaded): with the default
spin-waiting, two OpenMP threads that share a core with another process ran
about ten times slower here.

Checkpoints live outside the repository (default ``/work/ckpt/<name>/`` i.e.
``<repo>/../ckpt``) and are written every few minutes; rerunning the same
command resumes from the last one.  The loss log (``train_log.csv``) is kept
next to the checkpoint and copied into the model folder at the end, together
with ``training.json`` (steps, tokens, wall time).
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import time
from pathlib import Path

from . import registry

LOG_EVERY = 10


def lr_lambda(step: int, warmup: int, total: int, floor: float = 0.1) -> float:
    """Multiplier of the peak learning rate: linear warmup, cosine to ``floor``."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def ensure_tokenizer(corpus_dir: Path):
    """Load the project tokenizer, training it first if it is not on disk."""
    from .tokenizer import load_tokenizer, train_tokenizer

    if not (registry.TOKENIZER_DIR / "tokenizer.json").is_file():
        return train_tokenizer(corpus_dir, registry.TOKENIZER_DIR)
    return load_tokenizer(registry.TOKENIZER_DIR)


def build_model(spec: dict, tok):
    """A fresh ``LlamaForCausalLM`` of the ladder width, or the ``init_from`` model."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    if spec.get("init_from"):
        return AutoModelForCausalLM.from_pretrained(str(registry.MODELS_DIR / spec["init_from"]),
                                                    dtype=torch.float32)
    torch.manual_seed(registry.SEED)
    cfg = LlamaConfig(num_hidden_layers=spec["layers"], bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      **registry.WIDTH)
    return LlamaForCausalLM(cfg)


def make_optimizer(model, lr: float, weight_decay: float = 0.1):
    """AdamW with weight decay on matrices only."""
    import torch

    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def _truncate_log(log_path: Path, step: int) -> None:
    """Drop log rows written after the checkpoint we resume from."""
    if not log_path.is_file():
        log_path.write_text("step,loss,lr,tokens,elapsed_s\n")
        return
    lines = log_path.read_text().splitlines()
    keep = [lines[0]] + [ln for ln in lines[1:] if int(ln.split(",")[0]) <= step]
    log_path.write_text("\n".join(keep) + "\n")


def train(name: str, corpus_dir: Path = registry.DEFAULT_CORPUS_DIR,
          ckpt_root: Path = registry.DEFAULT_CKPT_DIR, steps: int | None = None,
          ckpt_minutes: float = 3.0, threads: int = 2) -> Path:
    """Train (or resume) model ``name`` from :data:`registry.SPECS`; returns its folder."""
    import torch
    import torch.nn.functional as F
    from tqdm import tqdm

    from .corpus import BatchMaker
    from .tokenizer import save_tokenizer

    torch.set_num_threads(threads)
    spec = registry.SPECS[name]
    total = int(steps or spec["steps"])
    tok = ensure_tokenizer(Path(corpus_dir))
    model = build_model(spec, tok)
    model.train()
    opt = make_optimizer(model, spec["lr"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_lambda(s, spec["warmup"], total))
    maker = BatchMaker(tok, Path(corpus_dir), style=spec["style"], batch_size=registry.BATCH_SIZE,
                       seq_len=registry.SEQ_LEN, seed=registry.SEED)

    ckpt_dir = Path(ckpt_root) / name
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    state_path, log_path = ckpt_dir / "state.pt", ckpt_dir / "train_log.csv"
    start, elapsed = 0, 0.0
    if state_path.is_file():
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        start, elapsed = state["step"], state["elapsed"]
        print(f"resuming {name} at step {start} ({elapsed / 60:.1f} min done)", flush=True)
        _truncate_log(log_path, start)
    else:
        log_path.write_text("step,loss,lr,tokens,elapsed_s\n")

    def save(step):
        tmp = state_path.with_suffix(".tmp")
        torch.save(dict(model=model.state_dict(), opt=opt.state_dict(), sched=sched.state_dict(),
                        step=step, elapsed=elapsed, total=total), tmp)
        tmp.replace(state_path)

    tokens_per_step = registry.BATCH_SIZE * registry.SEQ_LEN
    t0, last_ckpt, running = time.time(), time.time(), []
    bar = tqdm(range(start, total), initial=start, total=total, desc=name, mininterval=5)
    with log_path.open("a", newline="") as log_fh:
        writer = csv.writer(log_fh)
        for step in bar:
            batch = maker.batch(step)
            logits = model(input_ids=batch[:, :-1]).logits
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            running.append(loss.item())
            now = time.time()
            elapsed += now - t0
            t0 = now
            if (step + 1) % LOG_EVERY == 0 or step + 1 == total:
                mean = sum(running) / len(running)
                running = []
                writer.writerow([step + 1, f"{mean:.4f}", f"{sched.get_last_lr()[0]:.6g}",
                                 (step + 1) * tokens_per_step, f"{elapsed:.1f}"])
                log_fh.flush()
                bar.set_postfix(loss=f"{mean:.3f}")
            if now - last_ckpt > ckpt_minutes * 60 or step + 1 == total:
                save(step + 1)
                last_ckpt = now
    bar.close()

    out = registry.MODELS_DIR / name
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config.bos_token_id = tok.bos_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(str(out), safe_serialization=True)
    save_tokenizer(tok, out)
    shutil.copy(log_path, out / "train_log.csv")
    info = dict(name=name, layers=spec["layers"], style=spec["style"], steps=total,
                batch_size=registry.BATCH_SIZE, seq_len=registry.SEQ_LEN,
                tokens=total * tokens_per_step, wall_time_s=round(elapsed, 1),
                lr=spec["lr"], warmup=spec["warmup"], init_from=spec.get("init_from"),
                seed=registry.SEED, threads=threads)
    (out / "training.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"saved {out} ({elapsed / 60:.1f} min)", flush=True)
    return out
