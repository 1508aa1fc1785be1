"""The book's depth measures read where the answer is computed: the position that predicts it (ours).

Chapters 1–3 read their measures on every token of a text; a task's answer, though, is computed at one position, the
last token of the question, whose output predicts the answer's first token. Reading every token mixes that position
with the question's, which objectives train differently (an answer-only objective never trains them), and
reading from the answer's first token on, as the depth score does, misses it. So this measurement reads, for
each prompt, position ``t`` = the answer's first token − 1, the same position under every objective, on the
question alone (tokens ``0 … t``, as the whole text tokenises them):

* ``layer_ratio [L]``: P1's relative contribution ``‖Δ_l‖ / ‖h_l‖`` at ``t`` (chapter 1);
* ``mean_cos [L]``: P2's mean of the attention, MLP and layer cosines with the residual at ``t``;
* ``kl [L]``, ``overlap [L]``: the logit lens on ``h_l`` (the input of layer ``l``) at ``t`` against the model's
  output there, KL and top-``k`` overlap (chapter 3; P2's curves);
* ``on_later [L]`` and ``output [L]``: P1's future effect with the skip on positions ``[1, t)`` and the effect
  read at ``t`` (chapter 2): the mean effect of skipping layer ``s`` on the updates of the layers above it, and
  on the output distribution (‖p − p′‖₂);
* ``depth``: P1's depth score of that future-effect matrix (chapter 6), normalised by ``L − 1``.

Every array is per prompt; the aggregate measures (:meth:`AtAnswerResult.measure`) average over prompts (the
plain mean, ours: P1's maximum over prompts has a biased bootstrap) and read the halves and effective depths of
the mean curves.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from depthutils.core.encoding import encode_all
from depthutils.core.errors import DepthError, check_finite
from depthutils.core.results import Result, describe, halves, make_meta
from depthutils.measures import layer_skips
from depthutils.measures.curves import ed_kl, ed_overlap, ratio
from depthutils.measures.depth_score_result import score
from depthutils.measures.effective_depth import curves_and_lens
from depthutils.models import stack
from depthutils.models.each import each

#: the measures :meth:`AtAnswerResult.measure` gives, each larger when the later layers do more
MEASURES = ("contributions", "later", "output", "ed_kl", "ed_overlap", "depth")
LABELS = {"contributions": "contribution ratio (2nd/1st half)", "later": "later-layer effect ratio (2nd/1st half)",
          "output": "output effect ratio (2nd/1st half)", "ed_kl": "ED_KL ratio", "ed_overlap": "ED_overlap ratio",
          "depth": "normalised depth score"}
ARRAYS = ("layer_ratio", "mean_cos", "kl", "overlap", "on_later", "output")


@dataclass
class AtAnswerResult(Result):
    """Per prompt, at its answer-predicting position: ``[N, L]`` curves (:data:`ARRAYS`) and ``depth [N]``."""

    layer_ratio: np.ndarray = None
    mean_cos: np.ndarray = None
    kl: np.ndarray = None
    overlap: np.ndarray = None
    on_later: np.ndarray = None
    output: np.ndarray = None
    depth: np.ndarray = None
    positions: np.ndarray = None
    kind: ClassVar[str] = "at_answer"

    @property
    def n_layers(self) -> int:
        return int(self.layer_ratio.shape[1])

    def measure(self, name: str, idx=None) -> float | None:
        """Measure ``name`` (:data:`MEASURES`) on prompts ``idx`` (repeats allowed; default all)."""
        return measure_of({a: getattr(self, a) for a in (*ARRAYS, "depth")}, name, idx)

    def facts(self) -> dict:
        return {m: self.measure(m) for m in MEASURES} | {"n": len(self.depth), "L": self.n_layers}


def measure_of(arrays: dict, name: str, idx=None) -> float | None:
    """Measure ``name`` from per-prompt ``arrays`` (the fields of :class:`AtAnswerResult`), on prompts ``idx``
    (repeats allowed; default all): :func:`measures_at` with those prompts' counts as weights."""
    n = len(arrays["depth"])
    w = np.ones(n) if idx is None else np.bincount(np.asarray(idx, int), minlength=n).astype(float)
    v = measures_at(w[None], arrays, name)[0]
    return None if not np.isfinite(v) else float(v)


def _weighted(W: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Rows of ``W [m, N]`` (a weight per prompt) times ``x [N]`` or ``[N, L]``, averaged over the prompts where
    ``x`` is defined (NaN where none is)."""
    ok = np.isfinite(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (W @ np.where(ok, x, 0.0)) / (W @ ok)


def measures_at(W: np.ndarray, arrays: dict, name: str) -> np.ndarray:
    """Measure ``name`` for each row of prompt weights ``W [m, N]`` (a bootstrap's counts), ``[m]`` (NaN:
    undefined): the weighted mean curve of each row, then a half ratio (second half over first;
    the contribution ratio leaves layer 0 apart, as chapter 1 does; undefined where the first half is 0), an
    effective-depth ratio ``(ED + 1) / L`` (P2's rules, :mod:`depthutils.measures.curves`), or the mean depth
    score."""
    if name == "depth":
        return _weighted(W, np.asarray(arrays["depth"], float))
    if name in ("ed_kl", "ed_overlap"):
        curves = _weighted(W, np.asarray(arrays[name[3:]], float))
        rule = ed_kl if name == "ed_kl" else ed_overlap
        return np.array([np.nan if (r := ratio(rule(c), c.size)) is None else r for c in curves])
    curves = _weighted(W, np.asarray(arrays[{"contributions": "layer_ratio", "later": "on_later",
                                              "output": "output"}[name]], float))
    out = np.full(len(curves), np.nan)
    for i, c in enumerate(curves):
        first, second = halves(c[1:] if name == "contributions" else c)
        if np.isfinite(first) and first > 0:
            out[i] = second / first
    return out


def answer_position(enc) -> int:
    """The position that predicts the answer's first token (the question's last token)."""
    if not enc.predict_positions:
        raise DepthError("No answer tokens were found; give each prompt's answer exactly as it continues the prompt.")
    return enc.predict_positions[0]


def question(enc):
    """The encoding cut to the question, tokens ``0 … t`` with ``t`` its answer-predicting position."""
    t = answer_position(enc)
    return dataclasses.replace(enc, input_ids=enc.input_ids[:, :t + 1], tokens=enc.tokens[:t + 1],
                               answer_positions=[], predict_positions=[], answer_ids=[])


def at_answer(model, prompts, *, k: int = 5, max_tokens: int | None = None, progress_bar: bool = True) -> AtAnswerResult:
    """The measures of :data:`ARRAYS` at each prompt's answer-predicting position (see the module docstring).

    ``prompts`` are teacher-forced (:class:`~depthutils.core.prompts.Prompt` with their answers): the answer says
    where the position is, and is not itself read. One trace per prompt for the curves and the lens, one future-
    effects run per prompt (on NDIF: all in one request each). A prompt whose answer falls beyond ``max_tokens``
    is skipped.
    """
    prompts, encs, fit = encode_all(model, prompts, need_answer=True, max_tokens=max_tokens)
    qs = [question(e) for e in encs]
    if any(q.n_tokens < 2 for q in qs):
        raise DepthError("An answer starts right after the start token; the position before it is position 0, "
                         "which the book never intervenes on: give each prompt a question.")
    L, fast = model.n_layers, stack.usable(model)
    both = each(model, curves_and_lens, [(q, k) for q in qs], "at the answer (curves)", enabled=progress_bar)
    works = [layer_skips.work(model, q, [q.n_tokens - 1], fast=fast, output=True) for q in qs]
    maxima = each(model, layer_skips.run, works, "at the answer (future effects)", enabled=progress_bar)
    rows = {a: [] for a in ARRAYS}
    depth = []
    for (stats, lens), w, m in zip(both, works, maxima):
        s, ln = stats[:, :, -1].double().cpu().numpy(), lens[:, :, -1].double().cpu().numpy()  # [L, 6], [L, 2]
        D, O = layer_skips.fold(L, w, m)
        rows["layer_ratio"].append(s[:, 4])
        rows["mean_cos"].append((s[:, 1] + s[:, 3] + s[:, 5]) / 3)
        rows["kl"].append(ln[:, 0])
        rows["overlap"].append(ln[:, 1])
        rows["on_later"].append(np.array([np.nanmean(D[j, j + 1:]) if j < L - 1 else np.nan for j in range(L)]))
        rows["output"].append(O)
        sc = score(D)
        depth.append(np.nan if sc is None else sc / (L - 1))
    arrays = {a: np.stack(v) for a, v in rows.items()}
    for a in ("layer_ratio", "mean_cos", "kl", "overlap", "output"):
        check_finite(f"at the answer: {a}", arrays[a])
    ds, n = describe(prompts)
    meta = make_meta(model, dataset=ds, n=n, fit=fit, k=k, method="stack" if fast else "batched")
    return AtAnswerResult(meta=meta, depth=np.array(depth), positions=np.array([q.n_tokens - 1 for q in qs]),
                          **arrays)
