"""P1 §6, "does harder mean deeper?": the depth score of problems grouped by difficulty.

From the future-effect matrix ``D`` of spec §2 (skip layer ``s`` on the positions
before ``t``, measure how much each later layer's update changes), take

    r_s = Σ_{j>s} D[s, j] / (L-1-s)     (s = 0 … L-2)
    score = Σ_s s·r_s / Σ_s r_s          (a centre of mass over layers)

and ``score / (L-1)`` to compare models of different depth. A problem whose
computation needs more layers should move the centre of mass up. Each level
reports P1's statistic (the score of ``D`` maxed over its prompts), the mean of
the per-prompt scores (ours), and the model's greedy, teacher-free accuracy: a level
the model cannot solve says little about how deep its solution is. The result keeps
every prompt's ``D``, so a resample recomputes each level's max
(:class:`~depthutils.measures.depth_score_result.DepthScoreResult`).
"""
from __future__ import annotations

import numpy as np

from depthutils import data
from depthutils.core.answers import answers, new_tokens
from depthutils.core.encoding import encode_all, resolve_max_tokens
from depthutils.core.errors import DepthError, NothingFits
from depthutils.core.prompts import Encoded, Fit, Prompt
from depthutils.core.results import make_meta
from depthutils.cost import budget
from depthutils.cost.accounting import Cost, Shape, total, with_requests
from depthutils.cost.budget import DECODE_BATCH
from depthutils.cost.passes import generate
from depthutils.data import depth_tasks
from depthutils.measures import counted
from depthutils.measures import future_effects as fe
from depthutils.measures.depth_score_result import DepthScoreResult, score
from depthutils.measures.example import Example, addition
from depthutils.measures.layer_skips import Work, fold, work
from depthutils.measures.layer_skips import run as run_work  # _measure names no module: NDIF gets it by value
from depthutils.models import stack
from depthutils.models.each import each

#: task family -> (levels, loader of ``n`` prompts of one level, positions rule). The rule is P1's:
#: "math" takes up to 4 answer positions at stride 4, the others the first answer token.
TASKS = {
    "addition": ((2, 3, 4, 5, 6), lambda level, n, seed: data.project_task("addition", n, operands=level, seed=seed),
                 "first"),
    "multihop": ((1, 2, 3), lambda level, n, seed: data.project_task("multihop", n, hops=level, seed=seed), "first"),
    # the compositions held out of the ladder's training only (a 1-hop fact is always trained): up to n per level,
    # all where fewer exist (60 of 2 hops, 48 of 3)
    "multihop_heldout": ((2, 3), lambda level, n, seed: data.project_task("multihop", None, hops=level, heldout=True,
                                                                          seed=seed)[:n], "first"),
    "math": ((1, 2, 3, 4, 5), lambda level, n, seed: data.math(n, type="Intermediate Algebra", level=level),
             "stride"),
    "mquake": ((1, 4), lambda level, n, seed: data.mquake(n, hops=level, question=True), "first"),
    # few-shot families for pretrained models (depthutils.data.depth_tasks)
    "sums": (tuple(depth_tasks.SUM_LEVELS), depth_tasks.sums, "first"),
    "mquake_qa": ((1, 4), depth_tasks.mquake_qa, "first"),
}

def positions(enc: Encoded, rule: str, k: int = 4, stride: int = 4) -> list[int]:
    """The intervention positions ``t`` of one prompt: its first answer token (``"first"``) or up to
    ``k`` answer tokens at ``stride`` (``"stride"``, P1's MATH rule)."""
    if not enc.answer_positions:
        return []
    return enc.answer_positions[:1] if rule == "first" else enc.answer_positions[::stride][:k]


def _decoding(prompt: Prompt, enc: Encoded, max_new_tokens: int) -> tuple:
    """What the greedy decoding of a prompt's context (teacher-free) decodes: the context's ids and how many tokens
    to generate, up to ``max_new_tokens`` for a prompt with a ``final`` answer (MATH's boxed one), else its answer's
    own tokens plus :data:`~depthutils.core.answers.ANSWER_MARGIN`."""
    n_new = new_tokens(len(enc.answer_positions), bool(prompt.meta.get("final")), max_new_tokens)
    return enc.input_ids[:, :enc.answer_positions[0]], n_new


def _solved(model, prompt: Prompt, context, out) -> bool:
    """Whether the generated ids ``out`` (context and continuation) give ``prompt``'s answer, by the book's one rule
    (:func:`depthutils.core.answers.given`)."""
    text = model.tokenizer.decode(out[0, context.shape[1]:], skip_special_tokens=True)
    return answers(text, prompt.answer, final=prompt.meta.get("final"))


def _measure(model, item):
    """One item of the depth score: a prompt's future-effect maxima (:func:`depthutils.measures.layer_skips.run`
    of a :class:`~depthutils.measures.layer_skips.Work`) or one batch of greedy decodings (``(contexts, budgets)``);
    as :func:`depthutils.models.each.each` items, all go to NDIF in one request."""
    return run_work(model, item) if isinstance(item, Work) else model.greedy_batch(*item)


def decode_batch(model, decodings: list, max_memory=None, say: bool = True) -> int:
    """Contexts per batched greedy decoding of ``decodings`` (``(context ids, n_new)``), from the cost model
    and ``max_memory`` (:func:`depthutils.cost.budget.decode_batch`)."""
    return budget.decode_batch(model, [c.shape[1] for c, _ in decodings],
                               max((n for _, n in decodings), default=1), max_memory, say)


def _decoding_batches(decodings: list, size: int = DECODE_BATCH) -> tuple[list, list]:
    """The decodings ``(context, n_new)`` grouped for :meth:`~depthutils.models.handle.ModelHandle.greedy_batch`:
    sorted by budget and context length (little padding, few wasted steps), at most ``size`` each.
    Returns the batches ``(contexts, budgets)`` and, per batch, the indices of its decodings."""
    order = sorted(range(len(decodings)), key=lambda i: (decodings[i][1], decodings[i][0].shape[1]))
    groups = [order[k:k + size] for k in range(0, len(order), size)]
    return [([decodings[i][0] for i in g], [decodings[i][1] for i in g]) for g in groups], groups


def layer_passes(L: int, works: list, fast: bool) -> dict:
    """Layer applications to one sequence that the skip interventions cost (``layer_passes``) against the
    floor (``layer_pass_floor``): per prompt its clean pass (``L``) and, per skipped layer ``s`` and position
    ``t``, the ``L-1-s`` layers above ``s``, which the skip changes; the layers below are the clean run's.
    The fast path is at the floor; nnsight's batched forwards run every layer for every row and the clean one."""
    floor = sum(L + sum(L - 1 - row.s for chunk in w.chunks for row in chunk) for w in works)
    passes = floor if fast else sum(L * (len(chunk) + 1) for w in works for chunk in w.chunks)
    return {"layer_passes": int(passes), "layer_pass_floor": int(floor)}


def accuracies(model, tasks, *, n: int = 20, seed: int = 0, max_new_tokens: int = 48, max_tokens: int | None = None,
               max_memory=None, progress_bar: bool = True) -> dict:
    """Greedy accuracy alone, ``{(task, level): (solved, n)}``, judged as :func:`depth_score` judges it
    (no interventions): what :func:`tasks_for` was calibrated with."""
    groups = draw(levels_of(model, tasks), n, seed)
    keys, decodings, prompts = [], [], []
    for t, by_level in groups.items():
        for lv, ps in by_level.items():
            kept, encs, _ = encode_all(model, ps, need_answer=True, max_tokens=max_tokens)
            for p, enc in zip(kept, encs):
                keys.append((t, lv))
                prompts.append(p)
                decodings.append(_decoding(p, enc, max_new_tokens))
    batches, groups_of = _decoding_batches(decodings, decode_batch(model, decodings, max_memory, progress_bar))
    out = {k: [0, 0] for k in dict.fromkeys(keys)}
    for g, generated in zip(groups_of, each(model, _measure, batches, "greedy accuracy", enabled=progress_bar)):
        for i, ids in zip(g, generated):
            out[keys[i]][0] += _solved(model, prompts[i], decodings[i][0], ids)
            out[keys[i]][1] += 1
    return {k: tuple(v) for k, v in out.items()}


def levels_of(model, tasks) -> dict:
    """``{family: levels}`` of ``tasks`` as :func:`depth_score` takes it: ``"auto"``
    (:func:`depthutils.data.depth_tasks.tasks_for` of ``model``), family names (all their levels) or
    ``{family: levels}``; checked against :data:`TASKS`."""
    if isinstance(tasks, str) and tasks == "auto":
        tasks = depth_tasks.tasks_for(model)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise DepthError(f"Unknown task(s) {unknown}; choose from {', '.join(TASKS)} or pass groups=.")
    wanted = tasks if isinstance(tasks, dict) else {t: TASKS[t][0] for t in tasks}
    for t, lvs in wanted.items():
        if not lvs or any(lv not in TASKS[t][0] for lv in lvs):
            raise DepthError(f"Task {t!r} has levels {list(TASKS[t][0])}; got {list(lvs)!r}.")
    return wanted


def draw(wanted: dict, n: int, seed: int, n_by_family: dict | None = None) -> dict:
    """``{task: {level: [Prompt, ...]}}`` for ``{family: levels}`` (:func:`levels_of`): ``n`` problems per level,
    or ``n_by_family[family]`` for a family it names (a family it names that is not drawn is ignored)."""
    per = dict(n_by_family or {})
    return {t: {lv: TASKS[t][1](lv, per.get(t, n), seed) for lv in lvs} for t, lvs in wanted.items()}


@counted
def depth_score(model, tasks=("addition", "multihop"), *, n: int = 20, seed: int = 0, n_by_family: dict | None = None,
                groups: dict | None = None, accuracy: bool = True, max_new_tokens: int = 48, max_tokens: int | None = None, max_memory=None,
                progress_bar: bool = True) -> DepthScoreResult:
    """P1's depth score against difficulty for each task family in ``tasks`` (see :data:`TASKS`).

    Args:
        tasks: family names of :data:`TASKS`: the ladder's ``"addition"`` (2–6 operands) and
            ``"multihop"`` (1–3 hops; ``"multihop_heldout"``: 2 and 3 hops, the compositions held out of its
            training only), P1's ``"math"`` (intermediate algebra, levels 1–5) and
            ``"mquake"`` (the shared subset has 1- and 4-hop questions only), and the few-shot
            ``"sums"`` and ``"mquake_qa"`` for pretrained models (:mod:`depthutils.data.depth_tasks`); or a dict
            ``{family: levels}`` for some of a family's levels, such as :func:`depthutils.data.depth_tasks.tasks_for`
            gives for a model; or ``"auto"``, that choice: the ladder's families for an embedded model, the
            calibrated few-shot levels for the book's real models, and every few-shot level for any other.
        n: prompts per level (P1: 20).
        n_by_family: ``{family: prompts per level}`` for the families that take another ``n`` than the rest
            (:func:`draw`; ``"multihop_heldout"`` takes all where fewer exist).
        groups: instead of ``tasks``, your own ``{task: {level: [Prompt, ...]}}`` (``"first"`` rule).
        accuracy: also decode greedily to measure whether the model solves each prompt.
        max_tokens: a prompt whose answer positions fall beyond it (default: the context) is skipped.
        max_memory: the budget (bytes, or a size such as ``"8GB"``; default: what the device has free) of the
            greedy decodings' batch, at most :data:`DECODE_BATCH` contexts, the largest the cost model
            (:func:`depthutils.cost.passes.generate`) fits (:func:`depthutils.cost.budget.pick_batch`, which says so).
    """
    if groups is None:
        groups = draw(levels_of(model, tasks), n, seed, n_by_family)
    rules = {t: TASKS[t][2] if t in TASKS else "first" for t in groups}
    L = model.n_layers
    rows, scores, levels, names, correct, effects = [], [], [], [], [], []
    skipped = 0
    items = [(t, lv, ps) for t, by_level in groups.items() for lv, ps in by_level.items()]
    fast = stack.usable(model)  # future effects' own choice (method "auto")
    plan = []  # per level: its prompts with their interventions and decoding
    for t, lv, ps in items:
        try:
            kept, encs, fit = encode_all(model, ps, need_answer=True, max_tokens=max_tokens)
            skipped += fit.skipped
        except NothingFits:  # the level is reported with n = 0, not as a crash
            kept, encs = [], []
            skipped += len(ps)
        level = []
        for p, enc in zip(kept, encs):
            ts = [x for x in positions(enc, rules[t]) if 1 <= x < enc.n_tokens]
            if ts:
                level.append((p, work(model, enc, ts, fast=fast, output=False),
                              _decoding(p, enc, max_new_tokens) if accuracy else None))
        plan.append(level)
    works = [w for level in plan for _, w, _ in level]
    decodings = [d for level in plan for _, _, d in level if d is not None]
    size = decode_batch(model, decodings, max_memory, progress_bar)
    batches, groups_of = _decoding_batches(decodings, size)
    done = each(model, _measure, works + batches, "depth score", enabled=progress_bar)
    maxima = iter(done[:len(works)])
    outs = [None] * sum(len(g) for g in groups_of)
    for g, generated in zip(groups_of, done[len(works):]):
        for i, out in zip(g, generated):
            outs[i] = out
    outs = iter(outs)
    for (t, lv, _), level in zip(items, plan):
        Ds, s_level, ok_level = [], [], []
        for p, w, decoding in level:
            D = fold(L, w, next(maxima))[0]
            Ds.append(D)
            s_level.append(score(D))
            ok_level.append(_solved(model, p, decoding[0], next(outs)) if accuracy else None)
        D_max = np.fmax.reduce(Ds) if Ds else None
        sc = score(D_max) if D_max is not None else None
        defined = [s for s in s_level if s is not None]
        mean = float(np.mean(defined)) if defined else None
        acc = [o for o in ok_level if o is not None]
        rows.append(dict(task=t, level=lv, n=len(Ds), score=sc, mean_score=mean,
                         norm_score=None if sc is None else sc / (L - 1),
                         norm_mean_score=None if mean is None else mean / (L - 1),
                         accuracy=float(np.mean(acc)) if acc else None))
        scores += [np.nan if s is None else s for s in s_level]
        effects += Ds
        levels += [lv] * len(s_level)
        names += [t] * len(s_level)
        correct += [np.nan if o is None else float(o) for o in ok_level]
    if not scores:
        raise DepthError("No prompt had an answer position to intervene on; check the answers, or raise max_tokens.")
    fit = Fit("skip", resolve_max_tokens(model, max_tokens), used=len(scores), skipped=skipped)
    meta = make_meta(model, dataset="+".join(groups), n=len(scores), seed=seed, fit=fit, tasks=list(groups),
                     n_per_level=n, n_by_family=dict(n_by_family or {}), rules=rules, accuracy=accuracy,
                     max_new_tokens=max_new_tokens,
                     levels={t: list(by_level) for t, by_level in groups.items()}, **layer_passes(L, works, fast))
    return DepthScoreResult(meta=meta, prompt_scores=np.array(scores, float), prompt_levels=np.array(levels),
                            prompt_tasks=np.array(names), prompt_correct=np.array(correct, float),
                            prompt_effects=np.array(effects, float), rows=rows)


def cost(s: Shape, prompts, dtype: str, fast: bool, remote: bool, decode_batch: int = 32,
                batch: int | None = None) -> Cost:
    """What :func:`depth_score` runs: each prompt's interventions (:func:`depthutils.measures.future_effects.cost`)
    and the greedy decodings. ``prompts``: ``(T, n_positions, context, n_new)`` per prompt (its tokens, the interventions' ``t``
    count, the decoded context's length and the tokens to decode)."""
    fe_costs = [fe.cost(s, [T], dtype, fast, False, n_t=k, output=False, what="depth_score", batch=batch)
          for T, k, _, _ in prompts]
    gen = generate(s, [c for *_, c, _ in prompts], [n for *_, n in prompts], dtype, False, decode_batch)
    out = total(fe_costs + [gen])
    out.what = "depth_score"
    return with_requests(out, remote)


def example(model, **options) -> Example:
    """One three-operand addition prompt, scored at its first answer position and decoded greedily
    (:mod:`depthutils.measures.example`)."""
    prompts, enc = addition(model)
    n_new = new_tokens(len(enc.answer_positions), False, 48)
    return Example(lambda: depth_score(model, groups={"addition": {3: prompts}}, progress_bar=False, **options),
                   {"prompts": [[enc.n_tokens, 1, enc.answer_positions[0], n_new]], "fast": stack.usable(model)})
