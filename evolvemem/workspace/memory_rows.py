"""A workspace's memories as the run store keeps them (`RunStore.record_memories`), and back (resume)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evolvemem.contracts.memory import MemoryUnit

if TYPE_CHECKING:
    from evolvemem.workspace.core import Workspace


def all_memories(ws: Workspace) -> list[MemoryUnit]:
    """Every memory of the workspace, conversation by conversation (what a run records at its start)."""
    return [m for ms in ws.memories.values() for m in ms]


def restore_added(ws: Workspace, units: list[MemoryUnit]) -> int:
    """Re-add memories that re-extraction added in an earlier session of this run (resume)."""
    by_conv: dict[str, list[MemoryUnit]] = {}
    for unit in units:
        by_conv.setdefault(unit.conversation_id, []).append(unit)
    return sum(len(ws.add_memories(conv_id, group)) for conv_id, group in by_conv.items())
