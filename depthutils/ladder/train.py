"""Trainer: AdamW, linear warmup then cosine decay (or a constant rate), fixed seed, checkpoint-and-resume.

Threads: on a shared machine run with ``OMP_WAIT_POLICY=PASSIVE`` in the
environment (it must be set before torch is loaded): with the default
spin-waiting, two OpenMP threads that share a core with another process ran
about ten times slower here.

Checkpoints live outside the repository (default ``/work/ckpt/<name>/`` i.e.
``<repo>/../ckpt``) and are written every few minutes; rerunning the same
command resumes from the last one.  The loss log (``train_log.csv``) is kept
next to the checkpoint and copied into the model folder at the end, together
with ``training.json`` (steps, tokens, wall time).

Shared layers (``shared_blocks=k`` in the spec): :func:`tie_layers` makes the
parameters of layer ``i`` the very same ``nn.Parameter`` objects as those of
layer ``i % k``.  The modules stay distinct (each keeps its own ``layer_idx``),
only the weights are shared, so ``model.parameters()`` yields each shared
tensor once (AdamW steps it once, with the gradients of all its applications
summed) and the compute per token is that of the unshared model.  The
checkpoint's ``state_dict`` repeats the shared tensors under every layer's
keys; ``load_state_dict`` copies into the parameters in place, so the tie
survives a resume.  Before export :func:`untie_layers` gives every layer its
own copy, and the folder is an ordinary ``LlamaForCausalLM`` whose layers
carry the shared weights repeated.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import time
from pathlib import Path

from depthutils.ladder import registry

LOG_EVERY = 10


def lr_lambda(step: int, warmup: int, total: int, floor: float = 0.1, schedule: str = "cosine") -> float:
    """Multiplier of the peak learning rate: linear warmup, then cosine to ``floor`` (``schedule="cosine"``) or the
    peak rate to the end (``"constant"``: the depth sweep's, so a run's last snapshots are not read at a decayed
    rate)."""
    if schedule not in ("cosine", "constant"):
        raise ValueError(f"schedule must be 'cosine' or 'constant', got {schedule!r}")
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def ensure_tokenizer(corpus_dir: Path):
    """Load the project tokenizer, training it first if it is not on disk."""
    from depthutils.ladder.tokenizer import load_tokenizer, train_tokenizer

    if not (registry.TOKENIZER_DIR / "tokenizer.json").is_file():
        return train_tokenizer(corpus_dir, registry.TOKENIZER_DIR)
    return load_tokenizer(registry.TOKENIZER_DIR)


def build_model(spec: dict, tok):
    """A fresh ``LlamaForCausalLM`` of the spec's width (default: the ladder's) from its seed, or the
    ``init_from`` model."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    if spec.get("init_from"):
        return AutoModelForCausalLM.from_pretrained(str(registry.MODELS_DIR / spec["init_from"]),
                                                    dtype=torch.float32)
    torch.manual_seed(spec.get("seed", registry.SEED))
    cfg = LlamaConfig(num_hidden_layers=spec["layers"], bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      **spec.get("width", registry.WIDTH))
    return LlamaForCausalLM(cfg)


def tie_layers(model, blocks: int) -> None:
    """Share the weights of decoder layer ``i`` with layer ``i % blocks`` (in place)."""
    layers = model.model.layers
    for i in range(blocks, len(layers)):
        src = dict(layers[i % blocks].named_modules())
        for mod_name, mod in layers[i].named_modules():
            for p_name in list(mod._parameters):
                setattr(mod, p_name, getattr(src[mod_name], p_name))


def untie_layers(model) -> None:
    """Give every decoder layer its own copy of the weights it shares (in place)."""
    import torch

    seen = set()
    for layer in model.model.layers:
        for mod in layer.modules():
            for p_name, p in list(mod._parameters.items()):
                if p is None:
                    continue
                if id(p) in seen:
                    setattr(mod, p_name, torch.nn.Parameter(p.detach().clone(),
                                                            requires_grad=p.requires_grad))
                else:
                    seen.add(id(p))


def count_params(model) -> tuple[int, int]:
    """``(unique, total)`` parameter counts.

    ``total`` counts every decoder layer's weights; ``unique`` counts a decoder
    layer only if it is not a repeat of an earlier one, i.e. unless all its
    tensors are the same objects (tied, during training) or bitwise equal (an
    exported shared-layer model) as those of an earlier layer.  Embeddings
    (tied with the head) and the final norm count once in both.  For an
    ordinary model ``unique == total``.
    """
    import torch

    layers = model.model.layers
    in_layers = {id(p) for p in layers.parameters()}
    outside = sum(p.numel() for p in model.parameters() if id(p) not in in_layers)
    total = unique = outside
    kept: list[list] = []
    for layer in layers:
        tensors = [p for _, p in layer.named_parameters(remove_duplicate=False)]
        size = sum(p.numel() for p in tensors)
        total += size
        if not any(all(q is p or torch.equal(q, p) for q, p in zip(prev, tensors)) for prev in kept):
            unique += size
            kept.append(tensors)
    return unique, total


def export(model, tok, out: Path, dtype: str = "float32") -> Path:
    """Save ``model`` (weights cast to ``dtype`` on a copy: training goes on in float32) with the tokenizer
    as a Hugging Face folder."""
    import copy

    import torch

    from depthutils.ladder.tokenizer import save_tokenizer

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    saved = copy.deepcopy(model).to("cpu", getattr(torch, dtype))
    saved.generation_config.bos_token_id = tok.bos_token_id
    saved.generation_config.eos_token_id = tok.eos_token_id
    saved.generation_config.pad_token_id = tok.pad_token_id
    saved.save_pretrained(str(out), safe_serialization=True)
    save_tokenizer(tok, out)
    return out


def loss_of(model, pairs, device="cpu"):
    """The training loss of one step from its ``(inputs, targets, weights)``: ``Σ weights · cross-entropy`` over
    the targets (``weights`` None: the mean over every counted target, those not
    :data:`~depthutils.ladder.objectives.IGNORE`, of all the step's pairs). The unembedding runs on the counted
    positions only (objective A counts one position in a few; the others' logits would be computed and dropped)."""
    import torch.nn.functional as F

    from depthutils.ladder.objectives import IGNORE

    counted = sum(int((t != IGNORE).sum()) for _, t, _ in pairs)
    loss = 0.0
    for inputs, targets, weights in pairs:
        targets = targets.to(device)
        keep = targets != IGNORE
        hidden = model.get_decoder()(input_ids=inputs.to(device), use_cache=False).last_hidden_state
        logits = model.get_output_embeddings()(hidden[keep])
        ce = F.cross_entropy(logits, targets[keep], reduction="none")
        loss = loss + (ce.sum() / counted if weights is None else (ce * weights.to(device)[keep]).sum())
    return loss


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
          ckpt_minutes: float = 3.0, threads: int = 2, out_dir: Path | None = None,
          device: str = "cpu") -> Path:
    """Train (or resume) model ``name`` from :data:`registry.SPECS`; returns its folder.

    The model is written to ``out_dir`` (default ``data/models/<name>``).  ``device`` is where
    the steps run (``"cpu"`` or ``"cuda"``): the weights are initialised on the CPU from the
    seed and the batches are made there, so the recipe is the same on either; only the
    rounding of the arithmetic differs.  The card records the device.
    """
    import torch
    import transformers
    from tqdm import tqdm

    from depthutils.ladder.corpus import BatchMaker
    from depthutils.ladder.objectives import IGNORE, TRAIN_STEPS, ObjectiveBatches, geometry_of

    torch.set_num_threads(threads)
    spec = registry.SPECS[name]
    total = int(steps or spec["steps"])
    tok = ensure_tokenizer(Path(corpus_dir))
    model = build_model(spec, tok)
    if spec.get("shared_blocks"):
        tie_layers(model, spec["shared_blocks"])
    model.to(device)  # after tying: .to moves each shared Parameter once, in place
    model.train()
    opt = make_optimizer(model, spec["lr"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_lambda(s, spec["warmup"], total, schedule=spec.get("schedule", "cosine")))
    seed = spec.get("seed", registry.SEED)
    if spec.get("objective"):
        from depthutils.ladder.word_problems import TASKS
        maker = ObjectiveBatches(tok, spec["objective"], seed, geometry_of(spec), Path(corpus_dir),
                                 task=TASKS[spec["task"]], longest=spec.get("longest", TRAIN_STEPS[-1]))
    else:
        maker = BatchMaker(tok, Path(corpus_dir), style=spec["style"], batch_size=registry.BATCH_SIZE,
                           seq_len=registry.SEQ_LEN, seed=seed)
    snapshots = set(spec.get("snapshots", ()))

    ckpt_dir = Path(ckpt_root) / name
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    state_path, log_path = ckpt_dir / "state.pt", ckpt_dir / "train_log.csv"
    start, elapsed = 0, 0.0
    seen = dict(tokens=0, task_tokens=0, text_tokens=0, loss_targets=0)  # padding not counted
    used = []  # the thread counts of the processes that ran its steps (a resumed run may have had several)
    if state_path.is_file():
        state = torch.load(state_path, weights_only=False, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        start, elapsed = state["step"], state["elapsed"]
        seen = state.get("seen", seen)
        used = state.get("threads", used)
        print(f"resuming {name} at step {start} ({elapsed / 60:.1f} min done)", flush=True)
        _truncate_log(log_path, start)
    else:
        log_path.write_text("step,loss,lr,tokens,elapsed_s\n")

    def save(step):
        tmp = state_path.with_suffix(".tmp")
        torch.save(dict(model=model.state_dict(), opt=opt.state_dict(), sched=sched.state_dict(),
                        step=step, elapsed=elapsed, total=total, seen=seen, threads=used), tmp)
        tmp.replace(state_path)

    t0, last_ckpt, running = time.time(), time.time(), []
    bar = tqdm(range(start, total), initial=start, total=total, desc=name, mininterval=5)
    with log_path.open("a", newline="") as log_fh:
        writer = csv.writer(log_fh)
        for step in bar:
            if threads not in used:
                used.append(threads)
            pairs = maker.pairs(step)
            real = [int((x != tok.pad_token_id).sum()) for x, _, _ in pairs]
            seen.update(tokens=seen["tokens"] + sum(real), task_tokens=seen["task_tokens"] + real[0],
                        text_tokens=seen["text_tokens"] + sum(real[1:]),
                        loss_targets=seen["loss_targets"] + sum(int((t != IGNORE).sum()) for _, t, _ in pairs))
            loss = loss_of(model, pairs, device)
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
                                 seen["tokens"], f"{elapsed:.1f}"])
                log_fh.flush()
                bar.set_postfix(loss=f"{mean:.3f}")
            if step + 1 in snapshots:
                export(model, tok, ckpt_dir / "snapshots" / f"step-{step + 1:06d}")
            if now - last_ckpt > ckpt_minutes * 60 or step + 1 == total or step + 1 in snapshots:
                save(step + 1)
                last_ckpt = now
    bar.close()

    model.to("cpu")
    params_unique, params_total = count_params(model)
    untie_layers(model)  # safetensors refuses shared tensors; export repeats them
    out = Path(out_dir) if out_dir else registry.MODELS_DIR / name
    out.mkdir(parents=True, exist_ok=True)
    export(model, tok, out, dtype=spec.get("export_dtype", "float32"))
    shutil.copy(log_path, out / "train_log.csv")
    info = dict(name=name, layers=spec["layers"], style=spec["style"], steps=total,
                batch_size=registry.BATCH_SIZE, seq_len=registry.SEQ_LEN,
                tokens=seen["tokens"], wall_time_s=round(elapsed, 1),
                lr=spec["lr"], warmup=spec["warmup"], init_from=spec.get("init_from"),
                seed=seed, threads=(used[0] if len(used) == 1 else used) if used else threads, device=str(device),
                torch_version=torch.__version__, transformers_version=transformers.__version__,
                shared_blocks=spec.get("shared_blocks"),
                params_unique=params_unique, params_total=params_total)
    if spec.get("objective"):
        geo = geometry_of(spec)
        info.update(task=spec["task"], objective=spec["objective"], batch_size=geo.examples, seq_len=None,
                    text_rows=geo.text_rows if spec["objective"] == "lm" else 0, text_len=geo.text_len,
                    task_tokens=seen["task_tokens"], text_tokens=seen["text_tokens"],
                    loss_targets=seen["loss_targets"], snapshots=sorted(snapshots),
                    width=spec["width"], stored_dtype=spec.get("export_dtype", "float32"),
                    schedule=spec.get("schedule", "cosine"), longest=spec.get("longest", TRAIN_STEPS[-1]))
    (out / "training.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"saved {out} ({elapsed / 60:.1f} min)", flush=True)
    return out
