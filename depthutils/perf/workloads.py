"""Each chapter's own measurement calls, as the plan counts them (a :data:`~depthutils.perf.plan.Workload` each).

A chapter's plan is its workload below, then every other measurement registered for the chapter
(:data:`depthutils.measures.MEASUREMENTS`). Chapters 0 and 1 call their registered measurements alone and have no
workload here. ``tests/perf/test_plan.py`` checks that the calls a shipped chapter makes are the calls its plan
counts; a chapter itself never checks (a reader's own cell may call anything).
"""
from __future__ import annotations

from depthutils import data
from depthutils.analysis.objectives_tables import prompts as objective_prompts
from depthutils.analysis.study import OWN_TASKS
from depthutils.book.reviews.early_exit import own_sets
from depthutils.ladder.registry import OBJECTIVE_TASKS, SPECS, is_embedded
from depthutils.perf.plan import Workload, capped, dataset_tokens, prompt_tokens, score_prompts


def future_effects(info, Ts, k, **work):
    """One future-effects call on ``Ts`` tokens."""
    return [(info, "future_effects", dict(Ts=Ts, fast=k.fast, batch=k.batch, **work))]


def logit_lens(info, Ts, k):
    """One logit-lens call on ``Ts`` tokens."""
    return [(info, "logit_lens", dict(Ts=Ts))]


def effective_depth(info, Ts, k):
    """One effective-depth call on ``Ts`` tokens."""
    return [(info, "effective_depth", dict(Ts=Ts))]


def depth_score(info, p, k, n_per_level=None, max_new_tokens=None, n_by_family=None):
    """One depth-score call on the prompts of ``p``'s ``tasks``."""
    prompts = score_prompts(info, p["tasks"], n_per_level or p["n_per_level"], p["seed"],
                            max_new_tokens or p["max_new_tokens"], n_by_family)
    return [(info, "depth_score", dict(prompts=prompts, fast=k.fast, batch=k.batch))]


def chapter_02(models, p, k):
    """Future effects on the chapter's prompts, for each part and mode."""
    return [c for info in models for part in p["parts"] for mode in p["modes"]
            for c in future_effects(info, dataset_tokens(info, p), k, part=part, mode=mode)]


def chapter_03(models, p, k):
    """Beside the lens (counted as the chapter's registered measurement): the tuned readout's fit on held-out prompts
    and its evaluation (locally only), and the early exit on an embedded model's own tasks or another model's GSM8K
    answers (the facts it knows, which its fact check chooses when it runs, and their held-out ones, are not
    counted)."""
    out = []
    for info in models:
        sets, held_out = own_sets(is_embedded(info.name), n=p["n_examples"], seed=p.get("seed", 123),
                                  **({"fit_prompts": p["fit_prompts"]} if "fit_prompts" in p else {}))
        if not k.remote:
            fit = capped([info.count(q.text) for ps in held_out.values() for q in ps], p.get("max_tokens"), info.shape)
            out.append((info, "tuned_lens", dict(Ts=dataset_tokens(info, p), fit_Ts=fit)))
        rows = [(info.count(q.text), max(1, info.count(q.text) - info.count(q.context)))
                for ps in sets.values() for q in ps]
        out.append((info, "early_exit", dict(Ts=capped([T for T, _ in rows], p.get("max_tokens"), info.shape),
                                             answers=[a for _, a in rows], readouts=not k.remote)))
    return out


def _pairs(p):
    return [(p["arithmetic_prompt"], p["arithmetic_answer"]), (p["multihop_prompt"], p["multihop_answer"])]


def chapter_04(models, p, k):
    """The residual's means on the baseline prompts, then the erasure of each worked prompt."""
    out = []
    for info in models:
        out.append((info, "residual_means", dict(Ts=dataset_tokens(info, p, "baseline_n", "baseline_dataset"))))
        for ctx, ans in _pairs(p):
            T = info.count(ctx + ans)
            out.append((info, "residual_erasure", dict(T=T - 1, n_pred=max(1, T - info.count(ctx)), fast=k.fast,
                                                       batch=k.batch)))
    return out


def chapter_05(models, p, k):
    """Integrated gradients on each worked prompt at the chapter's ``steps``, and on the first at the dense
    reference and the Gauss–Legendre rule it is checked against."""
    out = []
    for info in models:
        for i, (ctx, ans) in enumerate(_pairs(p)):
            T = info.count(ctx + ans)
            ig = dict(T=T, n_pred=max(1, T - info.count(ctx)), fast=k.fast, batch=p["batch_size"],
                      layers_per_pass=k.layers_per_pass)
            rules = [(p["steps"], "riemann")] + ([(p["reference_steps"], "gauss"), (p["gauss_steps"], "gauss")]
                                                 if i == 0 else [])
            out += [(info, "integrated_gradients", dict(ig, steps=steps, rule=rule)) for steps, rule in rules]
    return out


def chapter_06(models, p, k):
    """The depth score on every level of the chapter's tasks (and its held-out multi-hop prompts)."""
    held = {"multihop_heldout": p["n_heldout"]} if "n_heldout" in p else None
    return [c for info in models for c in depth_score(info, p, k, n_by_family=held)]


def chapter_07(models, p, k):
    """Each source mapped onto the last model (the target), or one model onto itself, fitted on held-out text and
    the task prompts."""
    texts = data.heldout_text(p["n_texts"]) + data.load("addition", p["n_task_prompts"]) + \
        data.load("multihop", p["n_task_prompts"])
    sources = models[:-1] if len(models) > 1 else models
    return [(info, "cross_model_mapping", dict(tgt=models[-1].shape, held_out=p["held_out"], same=len(models) == 1,
                                               Ts=capped([info.count(t.text) for t in texts], p.get("max_tokens"),
                                                         info.shape)))
            for info in sources]


def chapter_08(models, p, k):
    """On each model, chapters 2's, 3's and 9's measurements on the chapter's prompts, and chapter 6's depth score
    on its tasks."""
    out = []
    for info in models:
        Ts = dataset_tokens(info, p)
        out += future_effects(info, Ts, k) + logit_lens(info, Ts, k) + effective_depth(info, Ts, k)
        out += depth_score(info, p, k, n_per_level=p.get("n_per_level", 10), max_new_tokens=48)
    return out


def chapter_09(models, p, k):
    """The curves of every model on each task's prompts (AIME's cut at ``aime_max_tokens``)."""
    out = []
    for info in models:
        for task in p["tasks"]:
            n = p["aime_n"] if task == "aime24" else p["n_per_task"]
            rows = prompt_tokens(info, task, None, **({"heldout": True} if task in OWN_TASKS else {}))
            if task == "aime24":
                rows = [r for r in rows if r[0] <= p["aime_max_tokens"]]
            out += effective_depth(info, capped([T for T, _ in rows[:n]], p.get("max_tokens"), info.shape), k)
    return out


def chapter_10(models, p, k):
    """Each shipped run re-measured at the answer position of its task's prompts (the curves and the lens, and
    future effects at that one position)."""
    out = []
    for info in models:
        task = SPECS.get(info.name.rsplit("/", 1)[-1], {}).get("task", OBJECTIVE_TASKS[0])
        Ts = [info.count(q.context) for q in objective_prompts(task)]
        out += effective_depth(info, Ts, k) + future_effects(info, Ts, k, n_t=1)
    return out


#: the chapters' own calls, by chapter number
WORKLOADS: dict[str, Workload] = {"02": chapter_02, "03": chapter_03, "04": chapter_04, "05": chapter_05,
                                  "06": chapter_06, "07": chapter_07, "08": chapter_08, "09": chapter_09,
                                  "10": chapter_10}


def workload(num: str) -> Workload | None:
    """Chapter ``num``'s own calls; None for a chapter whose calls are its registered measurements alone."""
    return WORKLOADS.get(num)


def unplanned(chapter: str, calls, params: dict | None = None) -> list[str]:
    """The measurements among ``calls`` (names, as a chapter's ``calls`` glue lists them) that chapter ``chapter``'s
    plan at its default parameters (updated with ``params``) does not count: each would be missing from every plan
    and memory estimate of the chapter."""
    from depthutils.book.chapters import find_chapter, parameters
    from depthutils.perf.plan import chapter_parameters, make_plan

    path = find_chapter(chapter)
    num, p = chapter_parameters(path, parameters(path), None, None, dict(params or {}))
    planned = {row["measurement"] for row in make_plan(num, p, workload(num), timing=False).rows}
    return sorted(set(calls) - planned)
