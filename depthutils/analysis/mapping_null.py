"""Chapter 7's nulls for P1's mapping: what the mapping gives where there is no shared computation to find.

P1's abstract: “layers with the same relative depth map best to each other, suggesting that the larger model simply
spreads the same computations out over its many layers”. A residual stream that accumulates layer by layer could
give such a diagonal whatever the layers compute, so each source is mapped three ways, by one and the same call
of :func:`~depthutils.measures.cross_model_mapping.cross_model_mapping` (the same texts, split, ridge and
context):

* onto the trained deeper model (P1's pair);
* onto that deeper model's own initial weights, untrained (:func:`depthutils.models.random_init.untrained`): the
  null, what the architecture and the residual stream's accumulation give without training;
* the first source onto a second seed of itself (the same recipe, other initial weights and batches): the
  positive control, what a map between two models trained alike, on the same computation, gives.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from depthutils.ladder.registry import SPECS, resolve_alias
from depthutils.measures.cross_model_mapping import MappingResult, cross_model_mapping
from depthutils.models.handle import load_model
from depthutils.models.random_init import untrained as untrained_model

__all__ = ["MappingNull", "cards", "load_nulls", "map_against_null"]


@dataclass
class MappingNull:
    """Each source mapped onto the trained target (``trained``) and onto the untrained one (``untrained``, empty
    without one), in the order of the sources, and the first source mapped onto its second seed (``control``, None
    without one)."""

    trained: list[MappingResult]
    untrained: list[MappingResult]
    control: MappingResult | None = None

    def pairs(self) -> list[tuple[MappingResult, MappingResult]]:
        """``(trained, untrained)`` for every source."""
        return list(zip(self.trained, self.untrained))


def load_nulls(source: str, target: str, **load):
    """``(untrained, second)``: the embedded model ``target`` untrained (None where it is not trained from its own
    initial weights, or is ``source`` itself) and ``source``'s second seed, the shipped ``<source>-seed2`` (None
    where there is none); ``load`` goes to :func:`~depthutils.models.handle.load_model`."""
    spec = SPECS.get(target)
    null = untrained_model(target, **load) if spec and not spec.get("init_from") and source != target else None
    second = f"{source}-seed2"
    return null, load_model(second, **load) if resolve_alias(second) is not None else None


def map_against_null(sources, target, untrained, texts, *, control=None, **kwargs) -> MappingNull:
    """Map every model of ``sources`` onto ``target`` and onto ``untrained`` (the target's initial weights; None:
    skipped), and the first source onto ``control`` (its second seed; None: skipped).

    Every map is one call of :func:`~depthutils.measures.cross_model_mapping.cross_model_mapping` with the same
    ``texts`` and ``kwargs`` (``held_out``, ``ridge``, ``seed``, ``max_tokens``, ...): only the target differs, so
    the same texts fit and score every map.
    """
    run = lambda source, tgt: cross_model_mapping(source, tgt, texts, **kwargs)  # noqa: E731
    return MappingNull(trained=[run(s, target) for s in sources],
                       untrained=[] if untrained is None else [run(s, untrained) for s in sources],
                       control=None if control is None else run(sources[0], control))


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
