"""What a chapter's prose says about its own run: glued numbers and the closing verdict.

Every number a reading guide states comes from the run through myst-nb's
``glue`` (``{glue:text}`name``` in the Markdown), so the prose stays true when a
reader re-runs the chapter on another model. myst-nb comes with the book's
dependencies (``pip install -e .[book]``); outside the book these functions only
display.
"""
from __future__ import annotations

from IPython.display import Markdown

from .claims import Verdict, paper_vs_run

try:
    from myst_nb import glue as _glue
except ImportError:  # the package without the book's extras: nothing to glue into
    _glue = None


def glue_facts(facts, prefix: str) -> None:
    """Glue every ``facts[name]`` as ``{prefix}_{name}`` (not displayed).

    ``facts`` is a dict, or a result: then its ``facts()`` and, where it has them, its
    bootstrap ``intervals()`` over prompts (``{name}_lo``, ``{name}_hi``).

    Returns nothing, so the cell shows nothing either: nbval runs cells without history,
    where a trailing ``;`` does not silence a returned value.

    ``None`` (a quantity that is undefined on this run) is glued as the word "never".
    """
    if not isinstance(facts, dict):
        facts = {**facts.facts(), **(facts.intervals() if hasattr(facts, "intervals") else {})}
    for name, value in facts.items():
        if _glue is not None:
            _glue(f"{prefix}_{name}", "never" if value is None else value, display=False)


def paper(v: Verdict, *results) -> Markdown:
    """The "paper vs this run" table of a verdict's claim (see :func:`depthutils.claims.paper_vs_run`), this
    run's side read from the ``results`` (results, or dicts/lists of them)."""
    metas = []
    for r in results:
        for one in (r.values() if isinstance(r, dict) else r if isinstance(r, (list, tuple)) else [r]):
            if one is not None:
                metas.append(one.meta)
    return Markdown(paper_vs_run(v, metas))


def verdict(v: Verdict | dict[str, Verdict], prefix: str = "verdict") -> Markdown:
    """Glue the outcome as ``{prefix}`` and return the verdict as Markdown for the chapter's last cell.

    Several verdicts (``{name: Verdict}``) are glued as ``{prefix}_{name}`` and shown one after another.
    """
    named = v if isinstance(v, dict) else {"": v}
    parts = []
    for name, one in named.items():
        if _glue is not None:
            _glue(f"{prefix}_{name}" if name else prefix, one.outcome, display=False)
        parts.append(one.markdown())
    return Markdown("\n\n".join(parts))
