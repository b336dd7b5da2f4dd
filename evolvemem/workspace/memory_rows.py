"""A workspace's memories as rows of the run store's `memories` table, and back (resume)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.store.schema import TABLES

if TYPE_CHECKING:
    from evolvemem.workspace.core import Workspace

MEMORY_COLUMNS = tuple(name for name, _, _ in TABLES["memories"])


def memory_rows(ws: Workspace, units: list[MemoryUnit] | None = None) -> list[dict[str, Any]]:
    """Rows of the `memories` table (all of the workspace's memories, or the given ones); its
    columns are MemoryUnit field names, so the schema alone decides what is stored."""
    if units is None:
        units = [m for ms in ws.memories.values() for m in ms]
    return [
        {c: (list(v) if isinstance(v, tuple) else v) for c in MEMORY_COLUMNS for v in [getattr(m, c)]} for m in units
    ]


def restore_added(ws: Workspace, rows: list[dict[str, Any]]) -> int:
    """Re-add memories that re-extraction added in an earlier session of this run (resume)."""
    by_conv: dict[str, list[MemoryUnit]] = {}
    for row in rows:
        fields: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in row.items() if v is not None}
        by_conv.setdefault(row["conversation_id"], []).append(MemoryUnit(**fields))
    return sum(len(ws.add_memories(conv_id, units)) for conv_id, units in by_conv.items())
