"""The key of a figure drawn at the column's width (:mod:`depthutils.book.plotstyle`): one legend below its panels,
outside the data, where constrained layout makes room for it (``loc="outside lower center"``)."""
from __future__ import annotations

from matplotlib.patches import Patch

from depthutils.book.plotstyle import BAND_NOTE

__all__ = ["band_key", "below"]


def band_key() -> Patch:
    """The key of the bands every line plot draws (:data:`~depthutils.book.plotstyle.BAND_NOTE`): a patch of their
    grey."""
    return Patch(color="0.5", alpha=0.2, label=BAND_NOTE)


def below(fig, axes=(), extra=(), ncol: int = 2, **kw):
    """One legend below the panels of ``fig`` (a figure or subfigure with constrained layout): every labelled artist
    of ``axes`` once (the first of a label), then the ``extra`` handles; ``kw`` goes to ``fig.legend``."""
    handles = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    handles.update({h.get_label(): h for h in extra})
    return fig.legend(list(handles.values()), list(handles.keys()), loc="outside lower center", ncol=ncol, **kw)
