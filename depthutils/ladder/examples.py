"""The ladder's task instances and their held-out hash (shared by :mod:`.tasks` and :mod:`.world`)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

HELDOUT_MOD = 5  # hash % 5 == 0  ->  about 20 % held out


def stable_hash(text: str) -> int:
    """A platform-independent 64-bit hash (SHA-256 prefix)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


@dataclass(frozen=True)
class Example:
    """One task instance: ``prompt + continuation`` is the training text.

    ``answer`` is the gold answer *string* (for direct prompts it is exactly
    the continuation text, e.g. ``"28"`` or ``" Mara Voss"``).
    """

    task: str
    prompt: str
    continuation: str
    answer: str
    meta: dict

    @property
    def text(self) -> str:
        return self.prompt + self.continuation


# --------------------------------------------------------------------------
# Addition chains
