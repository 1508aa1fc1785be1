"""The loop every measurement runs its traces with: one item at a time behind a progress bar on a local model, in
as few NDIF requests as fit on a remote one (:func:`depthutils.models.remote.in_sessions`)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from depthutils.core.progress import progress

__all__ = ["each"]


def each(model, fn: Callable, items: Iterable, what: str, *, nbytes: Callable[[Any], int] | None = None,
         enabled: bool = True) -> list:
    """``[fn(model, x) for x in items]``, where ``fn`` runs nnsight traces of ``model``.

    Locally: one item at a time behind a progress bar. On NDIF: in one request (one nnsight session
    that opens every trace on the server), or in as few as keep each request's saved results under
    :data:`~depthutils.models.requests.REQUEST_BYTES` (``nbytes(x)``: an item's result size in bytes), behind one
    status bar. ``fn`` must return only what its traces saved (a remote session returns only saved values).
    """
    items = list(items)
    if not model.remote:
        return [fn(model, x) for x in progress(items, what, enabled=enabled)]
    from depthutils.models.remote import in_sessions  # the NDIF client, loaded only for a remote model

    return in_sessions(model, fn, items, what, nbytes=nbytes, enabled=enabled)
