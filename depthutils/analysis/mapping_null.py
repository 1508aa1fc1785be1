"""Chapter 7's nulls for P1's mapping: what the mapping gives where there is no shared computation to find.

P1's abstract: “layers with the same relative depth map best to each other, suggesting that the larger model simply
spreads the same computations out over its many layers”. A residual stream that accumulates layer by layer could
give such a diagonal whatever the layers compute, so each source is mapped three ways, by one and the same call
of :func:`~depthutils.measures.cross_model_mapping.cross_model_mapping` (the same texts, split, ridge and
context):

* onto the trained deeper model (P1's pair);
* onto :data:`N_INITS` untrained initialisations of that deeper model (:func:`depthutils.models.random_init.untrained`:
  its own initial weights, then draws from the next seeds): the null, what the architecture and the residual
  stream's accumulation give without training, and how much that varies from one draw to another;
* the first source onto a second seed of itself (the same recipe, other initial weights and batches): the
  positive control, what a map between two models trained alike, on the same computation, gives; and onto
  :data:`N_INITS` untrained initialisations of that second seed, the control's own null, of the source's shape.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from depthutils.ladder.registry import SEED, SPECS, resolve_alias
from depthutils.measures.cross_model_mapping import MappingResult, cross_model_mapping
from depthutils.models.handle import load_model
from depthutils.models.random_init import N_INITS
from depthutils.models.random_init import untrained as untrained_model

__all__ = ["N_INITS", "MappingNull", "cards", "init_seeds", "load_nulls", "map_against_null"]


@dataclass
class MappingNull:
    """Each source mapped onto the trained target (``trained``) and onto every untrained initialisation of it
    (``untrained``: one list per source, in the order of the sources, each in the order of the initialisations;
    empty without them), the first source mapped onto its second seed (``control``, None without one) and onto the
    untrained initialisations of that second seed (``control_untrained``: the control's null, of the source's
    shape)."""

    trained: list[MappingResult]
    untrained: list[list[MappingResult]]
    control: MappingResult | None = None
    control_untrained: list[MappingResult] = field(default_factory=list)

    def pairs(self) -> list[tuple[MappingResult, list[MappingResult]]]:
        """``(trained, [untrained, ...])`` for every source."""
        return list(zip(self.trained, self.untrained))

    def nulls(self) -> list[MappingResult]:
        """Every mapping onto an untrained initialisation of the deeper model, source by source."""
        return [r for inits in self.untrained for r in inits]

    def results(self) -> list[MappingResult]:
        """Every mapping: the trained pairs, their nulls, the control and its nulls."""
        return [*self.trained, *self.nulls(), *([self.control] if self.control else []), *self.control_untrained]


def init_seeds(name: str, n: int = N_INITS) -> list[int]:
    """The seeds of ``n`` untrained initialisations of embedded model ``name``: its own seed (its trainer's
    initial draw), then the next ``n - 1`` integers."""
    own = SPECS[name].get("seed", SEED)
    return [own + k for k in range(n)]


def _inits(name: str, n: int, load: dict) -> list:
    """``n`` untrained initialisations of ``name`` (:func:`init_seeds`), or none where it is not an embedded model
    trained from its own initial weights."""
    spec = SPECS.get(name)
    if not spec or spec.get("init_from"):
        return []
    return [untrained_model(name, seed=seed, **load) for seed in init_seeds(name, n)]


def load_nulls(source: str, target: str, n: int = N_INITS, **load):
    """``(untrained, second, second_untrained)``: ``n`` untrained initialisations of the embedded model ``target``
    (:func:`init_seeds`; none where it is not trained from its own initial weights, or is ``source`` itself),
    ``source``'s second seed, the shipped ``<source>-seed2`` (None where there is none), and ``n`` untrained
    initialisations of that second seed (the positive control's null, of the source's shape; none without it);
    ``load`` goes to :func:`~depthutils.models.handle.load_model`."""
    nulls = _inits(target, n, load) if source != target else []
    name = f"{source}-seed2"
    if resolve_alias(name) is None:
        return nulls, None, []
    return nulls, load_model(name, **load), _inits(name, n, load)


def map_against_null(sources, target, untrained, texts, *, control=None, control_untrained=(),
                     **kwargs) -> MappingNull:
    """Map every model of ``sources`` onto ``target`` and onto every model of ``untrained`` (initialisations of the
    target; None or empty: skipped), and the first source onto ``control`` (its second seed; None: skipped) and onto
    every model of ``control_untrained`` (initialisations of the second seed).

    Every map is one call of :func:`~depthutils.measures.cross_model_mapping.cross_model_mapping` with the same
    ``texts`` and ``kwargs`` (``held_out``, ``ridge``, ``seed``, ``max_tokens``, ...): only the target differs, so
    the same texts fit and score every map. The calls share one residual ``cache``: each model is traced once on the
    texts, the sources kept throughout, a target dropped once every source is mapped onto it.
    """
    cache: dict = {}
    kept = {id(s) for s in sources}

    def onto(tgt, srcs) -> list[MappingResult]:
        out = [cross_model_mapping(s, tgt, texts, cache=cache, **kwargs) for s in srcs]
        if id(tgt) not in kept:
            cache.pop(id(tgt), None)
        return out

    trained = onto(target, sources)
    by_init = [onto(u, sources) for u in untrained or []]
    ctrl = [] if control is None else onto(control, sources[:1])
    ctrl_nulls = [] if control is None else [onto(u, sources[:1])[0] for u in control_untrained]
    return MappingNull(trained=trained, untrained=[list(col) for col in zip(*by_init)],
                       control=ctrl[0] if ctrl else None, control_untrained=ctrl_nulls)


def cards(a: str, b: str) -> dict:
    """Two embedded models side by side from their cards (``card.json``): training steps, held-out accuracy (%) on
    the addition chains (3-6 operands pooled) and the word problems, and English text loss (nats per token), as
    ``{what}_a`` and ``{what}_b``."""
    out = {}
    for tag, name in (("a", a), ("b", b)):
        card = json.loads((resolve_alias(name) / "card.json").read_text())
        out.update({f"steps_{tag}": card["training"]["steps"],
                    f"addition_{tag}": round(100 * card["addition_heldout_mix"]["acc"], 1),
                    f"word_problems_{tag}": round(100 * card["word_problems_heldout"]["acc"], 1),
                    f"text_loss_{tag}": round(card["text_loss"]["model_nats"], 2)})
    return out
