"""Evaluation of the ladder models: greedy accuracy, text loss, model cards.

* :func:`write_eval_sets` writes the generated evaluation sets to
  ``data/prompts/eval_*.jsonl`` (held-out instances, plus seen ones where the
  card reports both).
* :func:`evaluate_model` measures greedy accuracy per task group
  and the held-out English text loss against a unigram baseline.
* :func:`write_card` writes ``card.json`` and ``README.md`` into the model folder.
* :func:`choose_book_prompts` writes ``data/prompts/book_prompts.json``: a held-out
  addition chain and a held-out 2-hop question the default model answers.

A row is answered when the greedy continuation gives its answer by the book's
one rule (:func:`depthutils.core.answers.given`): at its start for ``direct``
models, after ``"The answer is"`` for ``cot`` ones, and after ``"The final
answer is"`` for word problems in both styles.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from depthutils.core.answers import answers
from depthutils.core.prompts import P1_ARITHMETIC
from depthutils.ladder import registry, tasks
from depthutils.ladder.registry import EVAL_FILES

BOOK_PROMPTS = registry.PROMPTS_DIR / "book_prompts.json"
#: the operands of P1's arithmetic prompt
P1_OPERANDS = [int(x) for x in P1_ARITHMETIC[0].rstrip("= ").split(" + ")]
#: Operand counts of the "held-out mix" figure and the test's 50-chain sample.
MIX_OPERANDS = (3, 4, 5, 6)
TEST_SAMPLE_SIZE = 50
TEXT_WINDOWS = 200


# ---------------------------------------------------------------- eval sets

def write_eval_sets(out_dir: Path = registry.PROMPTS_DIR) -> dict:
    """Write the evaluation sets as JSONL; returns them."""
    sets = tasks.build_eval_sets()
    out_dir.mkdir(parents=True, exist_ok=True)
    for key, rows in sets.items():
        with (out_dir / EVAL_FILES[key]).open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
    return sets


def load_eval_set(key: str) -> list[dict]:
    """Read one evaluation set (``addition``, ``word_problems`` or ``multihop``)."""
    path = registry.PROMPTS_DIR / EVAL_FILES[key]
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def addition_test_sample(rows: list[dict] | None = None, k: int = TEST_SAMPLE_SIZE) -> list[dict]:
    """The fixed sample the test re-measures: the first chains of each count in
    :data:`MIX_OPERANDS`, split as evenly as possible (13/13/12/12 for 50)."""
    rows = rows if rows is not None else load_eval_set("addition")
    out = []
    for i, n in enumerate(MIX_OPERANDS):
        share = k // len(MIX_OPERANDS) + (1 if i < k % len(MIX_OPERANDS) else 0)
        out += [r for r in rows if r["n"] == n and r["heldout"]][:share]
    return out


# ---------------------------------------------------------------- generation

def load_checkpoint(name_or_path):
    """Load ``(model, tokenizer, style)`` from an alias, folder name or path."""
    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    path = registry.resolve_alias(str(name_or_path)) or Path(name_or_path)
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    tok = PreTrainedTokenizerFast.from_pretrained(str(path))
    style = registry.SPECS.get(path.name, {}).get("style", "direct")
    return model, tok, style


def greedy_continuations(model, tok, prompts: list[str], max_new_tokens: int,
                         batch_size: int = 64) -> list[str]:
    """Greedy continuations (special tokens dropped), batched by prompt length."""
    import torch

    enc = [tok(p)["input_ids"] for p in prompts]
    groups = defaultdict(list)
    for i, ids in enumerate(enc):
        groups[len(ids)].append(i)
    out = [""] * len(prompts)
    with torch.inference_mode():
        for length, idx in groups.items():
            for s in range(0, len(idx), batch_size):
                chunk = idx[s:s + batch_size]
                x = torch.tensor([enc[i] for i in chunk])
                y = model.generate(x, attention_mask=torch.ones_like(x), do_sample=False,
                                   max_new_tokens=max_new_tokens, eos_token_id=tok.eos_token_id,
                                   pad_token_id=tok.pad_token_id)
                for i, row in zip(chunk, y[:, length:].tolist()):
                    out[i] = tok.decode(row, skip_special_tokens=True)
    return out


def marker(task: str, style: str) -> str | None:
    """What the answer of ``task`` stands after in a continuation of a ``style`` model (None: at its start)."""
    return tasks.FINAL_MARKER if task == "word_problem" else tasks.COT_MARKER if style == "cot" else None


MAX_NEW = {("addition", "direct"): 4, ("addition", "cot"): 90, ("multihop", "direct"): 10,
           ("multihop", "cot"): 72, ("word_problem", "direct"): 72, ("word_problem", "cot"): 72}


def score(model, tok, style: str, rows: list[dict]) -> list[bool]:
    """Whether the model answers each row (rows of a single task): its greedy continuation gives the row's answer
    by the book's one rule (:func:`depthutils.core.answers.given`), at its start or after the task's
    :func:`marker`."""
    task = rows[0]["task"]
    conts = greedy_continuations(model, tok, [r["prompt"] for r in rows], MAX_NEW[(task, style)])
    return [answers(c, r["answer"], marker=marker(task, style)) for c, r in zip(conts, rows)]


# ---------------------------------------------------------------- text loss

def text_loss(model, tok, corpus_dir: Path, windows: int = TEXT_WINDOWS,
              length: int = 96) -> dict:
    """Held-out English loss (nats/token) vs an add-one unigram baseline.

    Windows of ``length`` tokens are taken evenly from the held-out 5 % of the
    corpus, each preceded by BOS like the training documents.
    """
    import numpy as np
    import torch
    import torch.nn.functional as F

    from depthutils.ladder.corpus import load_texts

    train_ids = np.concatenate([tok(t, add_special_tokens=False)["input_ids"]
                                for t, _ in load_texts(corpus_dir, "train")])
    held = np.concatenate([tok(t, add_special_tokens=False)["input_ids"]
                           for t, _ in load_texts(corpus_dir, "heldout")])
    counts = np.bincount(train_ids, minlength=len(tok)).astype(np.float64) + 1.0
    logp_uni = np.log(counts / counts.sum())
    starts = np.linspace(0, len(held) - length - 1, windows).astype(int)
    x = torch.tensor(np.stack([held[s:s + length] for s in starts]), dtype=torch.long)
    x = torch.cat([torch.full((windows, 1), tok.bos_token_id), x], dim=1)
    with torch.inference_mode():
        losses = []
        for i in range(0, windows, 50):
            logits = model(input_ids=x[i:i + 50, :-1]).logits
            losses.append(F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                          x[i:i + 50, 1:].reshape(-1), reduction="sum").item())
    n = windows * length
    unigram = float(-logp_uni[x[:, 1:].numpy()].sum() / n)
    return dict(model_nats=round(sum(losses) / n, 4), unigram_nats=round(unigram, 4),
                tokens=n)


# ---------------------------------------------------------------- evaluation

def _acc(hits: list[bool]) -> dict:
    return dict(acc=round(sum(hits) / len(hits), 4) if hits else None, n=len(hits))


def evaluate_model(name: str, corpus_dir: Path = registry.DEFAULT_CORPUS_DIR,
                   threads: int = 1) -> dict:
    """All card numbers for one model."""
    import torch

    torch.set_num_threads(threads)
    model, tok, style = load_checkpoint(name)
    res: dict = dict(style=style)

    add = load_eval_set("addition")
    hits = score(model, tok, style, add)
    by_n = defaultdict(list)
    for r, h in zip(add, hits):
        by_n[r["n"]].append(h)
    res["addition"] = {str(n): dict(**_acc(v), split="seen" if n == 2 else "heldout")
                       for n, v in sorted(by_n.items())}
    mix = [h for r, h in zip(add, hits) if r["n"] in MIX_OPERANDS]
    res["addition_heldout_mix"] = dict(**_acc(mix), operands=list(MIX_OPERANDS),
                                       note="equal numbers of held-out chains per operand count")
    sample = {r["prompt"] for r in addition_test_sample(add)}
    res["addition_test_sample"] = _acc([h for r, h in zip(add, hits) if r["prompt"] in sample])

    wps = load_eval_set("word_problems")
    res["word_problems_heldout"] = _acc(score(model, tok, style, wps))

    mh = load_eval_set("multihop")
    hits = score(model, tok, style, mh)
    groups = defaultdict(list)
    for r, h in zip(mh, hits):
        groups[(r["hops"], "heldout" if r["heldout"] else "seen")].append(h)
    res["multihop"] = {f"{hops}-hop {split}": _acc(groups[(hops, split)])
                       for hops in sorted(tasks.CHAINS) for split in ("seen", "heldout")
                       if groups[(hops, split)]}
    by_chain = defaultdict(list)
    for r, h in zip(mh, hits):
        if r["heldout"]:
            by_chain[" of ".join(r["chain"])].append(h)
    res["multihop_heldout_by_chain"] = {k: _acc(v) for k, v in sorted(by_chain.items())}
    res["text_loss"] = text_loss(model, tok, Path(corpus_dir))
    from depthutils.ladder.train import count_params

    res["params_unique"], res["params_total"] = count_params(model)
    res["params"] = res["params_total"]  # kept for older readers (registry.list_models)
    res["layers"] = model.config.num_hidden_layers
    res["shared_blocks"] = registry.SPECS.get(name, {}).get("shared_blocks")
    return res


def write_card(name: str, corpus_dir: Path = registry.DEFAULT_CORPUS_DIR) -> dict:
    """Evaluate ``name`` and write ``card.json`` + ``README.md`` into its folder."""
    folder = registry.resolve_alias(name)
    if folder is None:
        raise FileNotFoundError(f"no model {name!r} in {registry.MODELS_DIR}")
    res = evaluate_model(folder.name, corpus_dir)
    training = json.loads((folder / "training.json").read_text())
    tokens_total = training["tokens"]
    base = training.get("init_from")
    if base:
        tokens_total += json.loads((registry.MODELS_DIR / base / "training.json").read_text())["tokens"]
    card = dict(name=folder.name, **res, training=training, tokens_seen=tokens_total,
                size_mb=round((folder / "model.safetensors").stat().st_size / 2**20, 2))
    (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    (folder / "README.md").write_text(render_card(card))
    return card


def _pct(d: dict) -> str:
    return "n/a" if d.get("acc") is None else f"{100 * d['acc']:.1f}% (n={d['n']})"


def render_card(card: dict) -> str:
    """Markdown model card from the ``card.json`` dictionary."""
    tr = card["training"]
    spec = registry.SPECS.get(card["name"], {})
    total = card.get("params_total", card["params"])
    unique = card.get("params_unique", total)
    shared = card.get("shared_blocks")
    if shared:
        order = " ".join("ABCDEFGH"[i % shared] for i in range(card["layers"]))
        arch = (f"{card['layers']} layer applications cycling through {shared} distinct blocks "
                f"({order}); exported as an ordinary {card['layers']}-layer Llama whose layers "
                f"repeat the shared weights (layer i = layer i mod {shared}, bitwise)")
        params = (f"{unique:,} unique ({shared} blocks, embeddings, final norm); {total:,} total, "
                  f"counting each block once per application, as the compute per token does; "
                  f"{card['size_mb']} MB fp32 safetensors (stores the repeats)")
    else:
        arch = f"{card['layers']} layers"
        params = (f"{unique:,} unique = {total:,} total (no shared weights); "
                  f"{card['size_mb']} MB fp32 safetensors")
    threads = tr.get("threads", 2)
    lines = [
        f"# {card['name']}", "",
        f"{spec.get('description', '')}. "
        + (f"Fine-tuned by this project from `{tr['init_from']}` on the same task mix written "
           "step by step" if tr.get("init_from") else
           "Trained by this project from scratch on generated tasks plus public-domain English "
           "(KJV Bible, Tiny Shakespeare)")
        + "; see `depthutils/ladder/README.md`."
        + (f" Same data, tokens, schedule, seed and compute per token as `ladder-{card['layers']}`"
           " (layer grouping in the spirit of MoEUT, without the experts); only the number of "
           "distinct weights differs." if shared else ""), "",
        "| | |", "|---|---|",
        f"| architecture | LlamaForCausalLM, {arch}, hidden "
        f"{registry.WIDTH['hidden_size']}, {registry.WIDTH['num_attention_heads']} heads, "
        f"MLP {registry.WIDTH['intermediate_size']}, vocab {registry.WIDTH['vocab_size']}, tied embeddings |",
        f"| parameters | {params} |",
        f"| answer style | {card['style']} |",
        f"| training | {tr['steps']} steps x {tr['batch_size']} x {tr['seq_len']} tokens = "
        f"{tr['tokens']:,} tokens" + (f" (fine-tuned from {tr['init_from']})" if tr.get("init_from") else "") + " |",
        f"| tokens seen in total | {card['tokens_seen']:,} |",
        f"| training wall time | {tr['wall_time_s'] / 60:.1f} min on " + (
            f"one GPU ({tr['device']}; torch {tr.get('torch_version', '?')}, transformers "
            f"{tr.get('transformers_version', '?')}; same recipe, only the arithmetic's rounding "
            "differs from a CPU run)" if tr.get("device", "cpu") != "cpu" else
            f"{threads} CPU thread{'s' if threads != 1 else ''} (shared 2-core machine)")
        + (f", not counting `{tr['init_from']}`'s own training" if tr.get("init_from") else "") + " |",
        "| reproduce | `python -m depthutils.ladder "
        + (f"--device {tr['device']} " if tr.get("device", "cpu") != "cpu" else "")
        + f"train {card['name']}` then "
        f"`python -m depthutils.ladder evaluate {card['name']}` |", "",
        "## Held-out English text loss", "",
        f"{card['text_loss']['model_nats']} nats/token vs {card['text_loss']['unigram_nats']} "
        f"for an add-one unigram baseline ({card['text_loss']['tokens']:,} held-out tokens, the last 5% "
        "of each corpus file).", "",
        "## Greedy exact-match accuracy", "",
        "| task | split | accuracy |", "|---|---|---|",
    ]
    for n, d in card["addition"].items():
        lines.append(f"| addition, {n} operands | {d['split']} | {_pct(d)} |")
    lines.append(f"| addition, 3-6 operands pooled | heldout | {_pct(card['addition_heldout_mix'])} |")
    lines.append(f"| word problems (GSM8K frame) | heldout | {_pct(card['word_problems_heldout'])} |")
    for key, d in card["multihop"].items():
        hops, split = key.split(" ")
        lines.append(f"| multi-hop, {hops} | {split} | {_pct(d)} |")
    lines += ["", "Held-out multi-hop compositions by chain (a `country` answer has 8 possible "
              "values, a city 24, a person 80):", ""]
    lines += [f"* {chain}: {_pct(d)}" for chain, d in card["multihop_heldout_by_chain"].items()]
    lines += ["",
              "Addition: `\"5 + 7 + 5 = \"` -> `\"17\"`; the prompt ends with a space token, which "
              "predicts the first answer digit. All 100 two-operand chains are seen in training; "
              "3-6 operand chains are held out when the SHA-256 of the prompt is 0 mod 5. "
              "Multi-hop: all 1-hop facts are seen; a 2/3-hop composition is held out when "
              "`(chain, subject)` hashes to 0 mod 5 (its single facts stay in training). "
              "Word problems: held out when the question hashes to 0 mod 5. "
              + ("This model writes steps and is scored on `The answer is X`."
                 if card["style"] == "cot" else "This model answers directly."), ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- book prompts

def choose_book_prompts(model_name: str = "default") -> dict:
    """Pick the book's arithmetic and 2-hop prompts and write ``book_prompts.json``.

    Arithmetic: P1's ``"5 + 7 + 5 + 3 + 1 + 7 = "`` if it is held out and the
    model answers it; else the first held-out chain answered, trying 6, then 5,
    4 and 3 operands.  Multi-hop: the first held-out ``spouse of the performer
    of`` question answered (P1's shape), else any held-out 2-hop question.
    """
    model, tok, style = load_checkpoint(model_name)
    add = [r for r in load_eval_set("addition") if r["heldout"]]
    p1 = tasks.addition_example(P1_OPERANDS)
    cands = ([dict(task="addition", prompt=p1.prompt, answer=p1.answer, n=6)]
             if tasks.addition_is_heldout(P1_OPERANDS) else [])
    for n in (6, 5, 4, 3):
        cands += [r for r in add if r["n"] == n]
    mh = [r for r in load_eval_set("multihop") if r["heldout"] and r["hops"] == 2]
    mh.sort(key=lambda r: r["chain"] != ["spouse", "performer"])
    chosen = {}
    for key, rows in (("arithmetic", cands), ("multihop", mh)):
        hits = score(model, tok, style, rows)
        picked = next((r for r, h in zip(rows, hits) if h), None)
        if picked is None:
            raise RuntimeError(f"{model_name} answers none of the held-out {key} candidates")
        chosen[key] = dict(prompt=picked["prompt"], answer=picked["answer"], heldout=True,
                           candidates_tried=rows.index(picked) + 1,
                           candidates_correct=sum(hits), candidates_total=len(rows))
    BOOK_PROMPTS.write_text(json.dumps(chosen, indent=2) + "\n")
    return chosen
