"""Datasets of the two papers, as lists of :class:`~depthutils.core.prompts.Prompt`.

Where each loader looks, in order:

1. a local folder named by ``DEPTHUTILS_DATA``, when that variable is set;
2. the Hugging Face hub through ``datasets``, when the hub is reachable;
3. ``../shared/data`` beside the project (or the working directory), when it exists;

otherwise it raises one :class:`DepthError` that names both options. The local
files have the names and fields of ``shared/data/README.md``.
"""
from __future__ import annotations

import json
import os
import random
import socket
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

from depthutils.core.errors import DepthError
from depthutils.core.prompts import Prompt
from depthutils.ladder.corpus import load_texts
from depthutils.ladder.registry import DEFAULT_CORPUS_DIR, EVAL_FILES

ROOT = Path(__file__).resolve().parents[2]

#: local file -> (hub id, hub config, split)
__all__ = ["load", "gsm8k", "math", "aime24", "hellaswag", "mquake", "arithmetic", "simple_arithmetic",
           "heldout_text", "project_task", "boxed", "hub_reachable", "local_dirs", "PROJECT_TASKS"]

HUB = {
    "gsm8k_test.jsonl": ("openai/gsm8k", "main", "test"),
    "math_test.jsonl": ("EleutherAI/hendrycks_math", None, "test"),
    "aime24_test.jsonl": ("Maxwell-Jia/AIME_2024", None, "train"),
    "hellaswag_val.jsonl": ("Rowan/hellaswag", None, "validation"),
    "MQuAKE-hard.json": (None, None, None),
    "simple_arithmetic_nospaces.jsonl": (None, None, None),
}
MATH_TYPES = ("Algebra", "Counting & Probability", "Geometry", "Intermediate Algebra", "Number Theory",
              "Prealgebra", "Precalculus")

GSM8K_TEMPLATE = (
    "Given the following problem, reason and give a final answer to the problem.\nProblem: {question}\n"
    'Your response should end with "The final answer is [answer]" where [answer] is the response to the problem.\n\n'
    "{rationale}The final answer is "
)


def local_dirs() -> list[Path]:
    """Candidate local data folders, in the order they are tried."""
    dirs = []
    if os.environ.get("DEPTHUTILS_DATA"):
        dirs.append(Path(os.environ["DEPTHUTILS_DATA"]).expanduser())
    dirs += [ROOT.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"]
    return dirs


@lru_cache(maxsize=1)
def hub_reachable(timeout: float = 2.0) -> bool:
    """True when the hub answers on its port and offline mode is not set."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        return False
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _read_local(path: Path) -> list[dict]:
    if path.suffix == ".json":
        return json.loads(path.read_text())
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def _hub_rows(filename: str) -> list[dict] | None:
    hub_id, config, split = HUB[filename]
    if hub_id is None or not hub_reachable():
        return None
    import datasets

    if filename == "math_test.jsonl":  # one config per subject on the hub
        rows = []
        for t in MATH_TYPES:
            cfg = t.lower().replace(" & ", "_").replace(" ", "_")
            rows += [dict(r) for r in datasets.load_dataset(hub_id, cfg, split=split)]
        return rows
    return [dict(r) for r in datasets.load_dataset(hub_id, config, split=split)]


def load_rows(filename: str) -> list[dict]:
    """Raw rows of one data set: ``DEPTHUTILS_DATA``, then the hub, then ``../shared/data``."""
    env = os.environ.get("DEPTHUTILS_DATA")
    if env and (Path(env).expanduser() / filename).exists():
        return _read_local(Path(env).expanduser() / filename)
    rows = _hub_rows(filename)
    if rows is not None:
        return rows
    for d in local_dirs():
        if (d / filename).exists():
            return _read_local(d / filename)
    hub_id = HUB[filename][0]
    where = f"the hub ({hub_id}) is not reachable" if hub_id else "it has no hub copy"
    raise DepthError(
        f"Data set {filename} is not available offline: {where} and no local copy was found; "
        f"set DEPTHUTILS_DATA to a folder that holds {filename}"
        + (" or connect to the Hugging Face hub." if hub_id else ".")
    )


def check_n(n, name: str = "n") -> None:
    """Reject a number of examples that is not a positive whole number (``name``: the parameter)."""
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise DepthError(f"{name} must be a positive whole number (a number of examples), got {n!r}.")


def _take(items: list, n: int | None, what: str) -> list:
    if n is None:
        return items
    check_n(n)
    if n > len(items):
        raise DepthError(f"Only {len(items)} {what} examples exist; ask for at most that many.")
    return items[:n]


# ---------------------------------------------------------------------------------------
# loaders

def gsm8k(n: int | None = 20) -> list[Prompt]:
    """GSM8K test problems in P1's (LM-eval-harness) format; the answer is the final number."""
    out = []
    for r in load_rows("gsm8k_test.jsonl"):
        rationale, final = r["answer"].split("####")
        ctx = GSM8K_TEMPLATE.format(question=r["question"], rationale=rationale.strip() + "\n")
        out.append(Prompt.from_parts(ctx, final.strip(), "gsm8k"))
    return _take(out, n, "GSM8K")


def math(n: int | None = 20, *, type: str | None = None, level: int | None = None) -> list[Prompt]:
    """MATH test problems as ``"Problem: …\\nAnswer: <solution>"`` (P1's depth-vs-difficulty prompt)."""
    if type is not None and type not in MATH_TYPES:
        raise DepthError(f"Unknown MATH type {type!r}; use one of: {', '.join(MATH_TYPES)}.")
    if level is not None and level not in (1, 2, 3, 4, 5):
        raise DepthError(f"MATH levels are 1 to 5, got {level!r}.")
    out = []
    for r in load_rows("math_test.jsonl"):
        if type is not None and r["type"] != type:
            continue
        if level is not None and r["level"] != f"Level {level}":
            continue
        out.append(Prompt.from_parts(f"Problem: {r['problem']}\nAnswer: ", r["solution"], "math",
                                     type=r["type"], level=r["level"], final=boxed(r["solution"])))
    return _take(out, n, f"MATH ({type or 'all types'}, level {level or 'any'})")


def boxed(solution: str) -> str | None:
    """The content of the last ``\\boxed{…}`` of a MATH solution (its final answer), braces matched."""
    start = solution.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(solution)):
        depth += {"{": 1, "}": -1}.get(solution[j], 0)
        if depth == 0:
            return solution[i + 1:j]
    return None


def aime24(n: int | None = 5, *, max_tokens: int | None = None, tokenizer=None) -> list[Prompt]:
    """AIME 2024 problems as ``"Problem: …\nAnswer: "`` + answer; ``max_tokens`` keeps the short ones (P2: 400)."""
    out = []
    for r in load_rows("aime24_test.jsonl"):
        p = Prompt.from_parts(f"Problem: {r['problem']}\nAnswer: ", str(r["answer"]), "aime24", id=r.get("id"))
        if max_tokens is not None:
            if tokenizer is None:
                raise DepthError("aime24(max_tokens=...) needs the model's tokenizer to count tokens.")
            if len(tokenizer(p.text, verbose=False)["input_ids"]) > max_tokens:
                continue
        out.append(p)
    return _take(out, n, "AIME24" + (f" (≤{max_tokens} tokens)" if max_tokens else ""))


def hellaswag(n: int | None = 10) -> list[Prompt]:
    """HellaSwag validation: context plus the gold ending (the answer)."""
    out = []
    for r in load_rows("hellaswag_val.jsonl"):
        ending = r["endings"][int(r["label"])]
        out.append(Prompt.from_parts(r["ctx"].rstrip() + " ", ending.strip(), "hellaswag"))
    return _take(out, n, "HellaSwag")


def mquake(n: int | None = 20, *, hops: int = 4, question: bool = False) -> list[Prompt]:
    """MQuAKE multi-hop questions (``hops=4``: the hard subset) or their single-hop clozes (``hops=1``).

    ``question=True`` writes the single hops as P1's ``"Question: …\nAnswer:"`` too, like the 4-hop ones.
    """
    rows = load_rows("MQuAKE-hard.json")
    if hops == 1:
        out = [Prompt.from_parts(f"Question: {h['question']}\nAnswer:" if question else h["cloze"],
                                 " " + h["answer"], "mquake", hops=1)
               for r in rows for h in r["single_hops"]]
    elif hops == 4:
        out = [Prompt.from_parts(f"Question: {r['questions'][0]}\nAnswer:", " " + r["answer"], "mquake", hops=4)
               for r in rows]
    else:
        raise DepthError(f"The local MQuAKE subset has 4-hop questions and their 1-hop clozes; hops={hops!r} "
                         "is not available (use hops=1 or hops=4, or the project's generated multihop()).")
    return _take(out, n, f"MQuAKE {hops}-hop")


def arithmetic(n: int | None = 20, *, operands: int | Iterable[int] = (2, 3, 4, 5, 6), seed: int = 0) -> list[Prompt]:
    """Generated single-digit addition chains in P1's format, ``"5 + 7 + 5 = "`` then ``"17"``."""
    ops = [operands] if isinstance(operands, int) else list(operands)
    if not ops or any(k < 2 for k in ops):
        raise DepthError(f"operands must be whole numbers ≥ 2, got {operands!r}.")
    if n is None:
        n = 100
    check_n(n)
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = ops[i % len(ops)]
        xs = [rng.randint(0, 9) for _ in range(k)]
        out.append(Prompt.from_parts(" + ".join(map(str, xs)) + " = ", str(sum(xs)), "arithmetic", operands=k))
    return out


def simple_arithmetic(n: int | None = 20) -> list[Prompt]:
    """The shared arithmetic probes (``"25-759="`` then ``"-734"``)."""
    rows = load_rows("simple_arithmetic_nospaces.jsonl")
    return _take([Prompt.from_parts(r["context"], r["continuation"], "simple_arithmetic") for r in rows], n,
                 "simple arithmetic")


def heldout_text(n: int | None = 20, *, words: int = 60, corpus_dir: str | Path | None = None) -> list[Prompt]:
    """Windows of ``words`` words from the held-out 5% of the ladder's corpus (King James Bible and
    Shakespeare, ``../shared/corpora``), which no embedded model was trained on; evenly spaced."""
    folder = Path(corpus_dir) if corpus_dir else DEFAULT_CORPUS_DIR
    try:
        docs = load_texts(folder, split="heldout")
    except FileNotFoundError:
        raise DepthError(f"The corpus is not in {folder}; pass corpus_dir= with kjv.txt and tinyshakespeare.txt.") from None
    windows = []
    for text, name in docs:
        ws = text.split()
        windows.append([Prompt(" ".join(ws[i:i + words]), len(" ".join(ws[i:i + words])), f"heldout-{name}")
                        for i in range(0, len(ws) - words, words)])
    n = n or sum(len(w) for w in windows)
    check_n(n)
    per = [windows[0][:: max(1, len(windows[0]) // ((n + 1) // 2))][: (n + 1) // 2],
           windows[1][:: max(1, len(windows[1]) // (n // 2 or 1))][: n // 2]]
    return [p for pair in zip(*per) for p in pair] + per[0][len(per[1]):]


#: the project's own tasks and their held-out files
PROJECT_TASKS = EVAL_FILES


def project_task(task: str, n: int | None = 20, *, seed: int = 0, **where) -> list[Prompt]:
    """The project's own generated evaluation sets (``data/prompts``), e.g. held-out 2-hop questions.

    ``where`` filters on the rows' fields (``heldout=True``, ``hops=2``, ``operands=3`` …);
    the rows are shuffled with ``seed`` so that ``n`` of them mix the groups.
    """
    if task not in PROJECT_TASKS:
        raise DepthError(f"Unknown project task {task!r}; choose one of: {', '.join(PROJECT_TASKS)}.")
    path = ROOT / "data" / "prompts" / PROJECT_TASKS[task]
    def field(row, k):
        return len(row["operands"]) if k == "operands" and isinstance(where[k], int) else row.get(k)

    rows = [r for r in _read_local(path) if all(field(r, k) == v for k, v in where.items())]
    random.Random(seed).shuffle(rows)
    out = [Prompt.from_parts(r["prompt"], r["answer"], task, **{k: v for k, v in r.items()
                                                                 if k not in ("prompt", "answer")})
           for r in rows]
    return _take(out, n, f"{task} ({where or 'all'})")


#: dataset name -> loader, for chapters and the runner
LOADERS: dict[str, Callable[..., list[Prompt]]] = {
    "gsm8k": gsm8k, "math": math, "aime24": aime24, "hellaswag": hellaswag, "mquake": mquake,
    "arithmetic": arithmetic, "simple_arithmetic": simple_arithmetic, "heldout_text": heldout_text,
    **{task: (lambda n=20, _task=task, **kw: project_task(_task, n, **kw)) for task in PROJECT_TASKS},
}


def load(name: str, n: int | None = None, **kwargs) -> list[Prompt]:
    """Load a data set by name (see :data:`LOADERS`)."""
    if name not in LOADERS:
        raise DepthError(f"Unknown dataset {name!r}; choose one of: {', '.join(LOADERS)}.")
    return LOADERS[name](n, **kwargs) if n is not None else LOADERS[name](**kwargs)
