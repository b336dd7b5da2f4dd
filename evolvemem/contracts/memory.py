"""`MemoryUnit`: one stored memory, always traceable to the turns it came from."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any
from datetime import datetime

MEMORY_TYPES = ("episodic", "semantic", "preference", "project_state", "working_summary", "procedural")


@dataclass(frozen=True)
class MemoryUnit:
    """A memory of one conversation.

    `source_turn_ids` is what evidence recall and the failure taxonomy rest on: a memory
    "covers" a gold evidence turn when the turn id is among its sources. `added_round` versions
    memories added by targeted re-extraction so a revert can tell a memory change from a config
    change. `embedding` is filled lazily by the index (cached by content hash), not stored here
    by extractors."""

    memory_id: str
    conversation_id: str
    content: str
    memory_type: str = "episodic"
    session_id: str = ""
    source_turn_ids: tuple[str, ...] = ()
    timestamp: datetime | None = None
    importance: float = 0.5
    confidence: float = 1.0
    reinforcement: float = 0.0
    persons: tuple[str, ...] = ()
    locations: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    added_round: int = 0
    embedding: tuple[float, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def content_hash(self) -> str:
        return content_hash(self.content)

    def evolve(self, **changes: Any) -> "MemoryUnit":  # dataclasses.replace checks each field
        """A copy with some fields changed (units are immutable)."""
        return replace(self, **changes)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def make_memory_id(conversation_id: str, content: str, salt: str = "") -> str:
    """Deterministic id: the same memory text in the same conversation gets the same id."""
    return f"{conversation_id}:m{hashlib.sha1((salt + content).encode('utf-8')).hexdigest()[:10]}"
