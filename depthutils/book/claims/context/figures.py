"""Chapters 4 and 5's figures: a real-model section's sample of one kind (:func:`sample_figure`) and the worked
prompt's layer × token maps (:func:`erasure_figure` for chapter 4, :func:`attribution_figure` for chapter 5)."""
from __future__ import annotations

import textwrap

import numpy as np

from depthutils.analysis.known_facts import KINDS
from depthutils.book.claim_table import CLAIMS, LEVEL
from depthutils.book.claims.context.sample import KindSample
from depthutils.book.grading import interval_text
from depthutils.book.legends import below
from depthutils.book.plotstyle import CMAPS, ROBUST_PERCENTILE, heatmap, model_name, robust_max, subplots

__all__ = ["prompt_labels", "sample_figure", "erasure_figure", "attribution_figure", "FIGURES"]


def prompt_labels(prompts: list[str], width: int = 42) -> list[str]:
    """One tick label per prompt, distinct and about ``width`` characters at most: its number, then the prompt on
    one line, without the words every prompt of the sample begins or ends with (two or more: a template, a few-shot
    preamble; ``…`` in their place); what is left, if longer, keeps its first words and its last (``…`` between
    them, cut within a word only where a word is too long)."""
    words = [" ".join(str(p).split()).split(" ") for p in prompts]
    lead = _shared(words) if len(words) > 1 else 0
    trail = _shared([w[lead:][::-1] for w in words]) if len(words) > 1 else 0
    lead, trail = (lead if lead >= 2 else 0), (trail if trail >= 2 else 0)
    out = []
    for i, w in enumerate(words):
        head = f"{i + 1}. " + "…" * bool(lead)
        out.append(head + _fit(w[lead:len(w) - trail], width - len(head) - bool(trail)) + "…" * bool(trail))
    return out


def _shared(lists: list[list[str]]) -> int:
    """How many first items all of ``lists`` have in common."""
    n = 0
    while all(len(x) > n for x in lists) and len({x[n] for x in lists}) == 1:
        n += 1
    return n


def _fit(words: list[str], room: int) -> str:
    """``words`` joined, or, longer than ``room`` characters, their first and last that fit with ``…`` between."""
    p = " ".join(words)
    if len(p) <= room:
        return p
    first = _words(words, 2 * room // 5) or p[:2 * room // 5]
    last = _words(words[::-1], room - len(first) - 1, reverse=True) or p[-(room - len(first) - 1):]
    return f"{first}…{last}"


def _words(words: list[str], room: int, reverse: bool = False) -> str:
    """The most of ``words`` that fit in ``room`` characters, joined (in reading order when ``reverse``)."""
    kept = []
    while len(kept) < len(words) and len(" ".join([*kept, words[len(kept)]])) <= room:
        kept.append(words[len(kept)])
    return " ".join(kept[::-1] if reverse else kept)


def sample_figure(sample: KindSample, what: str = "a context position matters"):
    """One kind's sample on one model: per prompt measured (rows, labelled by :func:`prompt_labels`), the statistic
    (filled dots: counted; hollow: not counted, drawn where the statistic is defined), the mean over the counted
    prompts with its 95% bootstrap interval (line and band), and the claim's two thresholds (dashed: shown at or
    below; dotted: not shown above); the key below the axes."""
    c, s = CLAIMS["context"], sample.stats()
    names = list(sample.results)
    fig, ax = subplots(height=2.9 + 0.26 * max(len(names), 1))
    rel = {n: sample.results[n].facts()["deepest_rel"] for n in names}
    for counted, style in ((True, dict(color="k", label="one prompt")),
                           (False, dict(facecolors="none", edgecolors="0.5", label="one prompt, not counted"))):
        rows = [i for i, n in enumerate(names) if (n not in s["dropped"]) == counted and rel[n] is not None]
        if rows:
            ax.scatter([rel[names[i]] for i in rows], rows, s=18, zorder=3, **style)
    if s["mean"] is not None:
        ax.axvline(s["mean"], color="C0", lw=1.5, label="mean over counted prompts")
        if s["lo"] is not None:
            ax.axvspan(s["lo"], s["hi"], color="C0", alpha=0.2, label=f"{100 * LEVEL:.0f}% bootstrap interval")
    ax.axvline(c.shown.value, color="0.4", ls="--", lw=1, label=f"shown at or below {c.shown.value}")
    ax.axvline(c.against.value, color="0.4", ls=":", lw=1, label=f"not shown above {c.against.value}")
    prompts = [sample.results[n].meta.get("params", {}).get("prompt", n) for n in names]
    ax.set_yticks(np.arange(len(names)), prompt_labels(prompts))
    ax.set(xlim=(0, 1.02), xlabel=textwrap.fill(f"relative depth of the deepest layer at which {what}", 40),
           ylabel="prompt")
    ax.invert_yaxis()
    below(fig, [ax])
    model = next((r.meta.get("model") for r in sample.results.values()), "")
    dropped = f"; not counted: {len(s['dropped'])}" if s["dropped"] else ""
    mean = (f"mean {interval_text(s['mean'], s['lo'], s['hi'])} over {s['n']} prompts" if s["n"]
            else "no prompt counted")
    fig.suptitle(f"{KINDS.get(sample.kind, sample.kind)} prompts on {model}\n{mean}{dropped}")
    return fig


# ------------------------------------------------------------------------------------ the worked prompt's maps

#: the most token labels a layer × token map names along the column's width (10 pt, turned upright)
MAX_TOKEN_LABELS = 32


def _token_map(result, matrix, *, cmap, label, ylabel, what, vmin, vmax, center=None, rel_row=None):
    """A layer × token heatmap with the prompt's tokens on the x axis (one prompt: no interval), layer 0 at
    the bottom as in P1; ``rel_row(r)`` is the last row at relative depth ``r``, where the verdict's
    thresholds (0.6 shown, 0.8 not shown) are drawn."""
    fig, ax = subplots(height=4.8)
    tokens = [t.replace("Ġ", "·").replace("Ċ", "\\n") for t in result.tokens]
    heatmap(ax, matrix, label, cmap=cmap, vmin=vmin, vmax=vmax, center=center, xticklabels=tokens,
            yticklabels="auto")
    ax.invert_yaxis()
    if rel_row is not None:
        for r, ls in ((0.6, "--"), (0.8, ":")):
            ax.axhline(rel_row(r) + 1, color="w", lw=1.2, ls=ls)
        ax.set_title("white lines: relative depth 0.6 (- -) and 0.8 (···)", loc="right", fontsize=10)
    ax.tick_params(axis="x", labelrotation=90)
    step = -(-len(tokens) // MAX_TOKEN_LABELS)  # a long prompt: every step-th token named, so labels never collide
    for i, label in enumerate(ax.get_xticklabels()):
        label.set_visible(i % step == 0)
    ax.set(ylabel=ylabel, xlabel="position" if step == 1 else f"position (every {step}th token named)")
    m = result.meta.get("params", {})
    prompt = f"{m.get('prompt', '')!r} → {m.get('answer', '')!r}"
    if len(prompt) > 60:
        prompt = prompt[:59] + "…"
    fig.suptitle(f"{what}\n{prompt}\n{model_name(result.meta.get('model'))} · one prompt (no interval over prompts)")
    return fig


def erasure_figure(result):
    """P1 Fig. 6b: effect of erasing h_l[t] on the answer distribution, layer × token."""
    return _token_map(result, result.effect, cmap=CMAPS["erasure"], label="max ‖p − p′‖₂ over answer positions",
                      ylabel="residual hₗ, relative depth l / L", what="Where is the answer computed? Erasing one residual vector",
                      vmin=0, vmax=None, rel_row=lambda r: int(np.floor(r * (result.effect.shape[0] - 1))))


def attribution_figure(result):
    """P1 Fig. 6a: attribution per layer × token; diverging colours, BOS excluded from the scale."""
    A = result.attribution
    lim = robust_max(np.abs(A[:, 1:])) or 1.0  # a symmetric scale that one large cell cannot stretch
    label = "attribution to the answer probability"
    if np.abs(A[:, 1:]).max() > lim:
        label += f"\n(scale capped at the {ROBUST_PERCENTILE}th percentile of |attribution|)"
    p = result.meta.get("params", {})
    rule = (f"adaptive rule, {result.evaluations / A.shape[0]:.0f} evaluations per layer" if p.get("rule") == "adaptive"
            else f"{p.get('steps')} steps" + (" (Gauss–Legendre)" if p.get("rule") == "gauss" else ""))
    return _token_map(result, A, cmap=CMAPS["attribution"], label=label,
                      ylabel="layer l's output, (l + 1) / L", vmin=-lim, vmax=lim, center=0.0,
                      rel_row=lambda r: int(np.floor(r * A.shape[0])) - 1,
                      what=f"Integrated gradients, {rule}\n(BOS column outside the colour scale)")


#: each measurement's figure of one prompt, by the measurement's name
FIGURES = {"residual_erasure": erasure_figure, "integrated_gradients": attribution_figure}
