"""What one NDIF request may hold and how long it may take: the sizes the remote path
(:mod:`depthutils.models.remote`) and the cost model split a measurement's prompts by. No NDIF client is imported
here, so a local run never loads one."""
from __future__ import annotations

from typing import Any, Callable

#: seconds a remote request may take from sending to its downloaded result, NDIF's queue included:
#: a 70B model's queue on NDIF can hold a job for many minutes (``load_model(..., timeout=)``)
DEFAULT_TIMEOUT = 3600.0
#: the size budget of one request: the results a session saves (and the client downloads) stay under
#: this, else :func:`each` splits the prompts over several sessions
REQUEST_BYTES = 256 * 2**20


def batches(items: list, nbytes: Callable[[Any], int] | None, budget: int | None = None) -> list[list]:
    """``items`` in order, grouped so that each group's results (``nbytes(item)`` each) stay under
    ``budget`` (default :data:`REQUEST_BYTES`); one group when ``nbytes`` is None. An item larger than
    the budget goes alone."""
    budget = REQUEST_BYTES if budget is None else budget
    if nbytes is None:
        return [items] if items else []
    groups, size = [], 0
    for x in items:
        n = nbytes(x)
        if not groups or size + n > budget:
            groups.append([])
            size = 0
        groups[-1].append(x)
        size += n
    return groups
