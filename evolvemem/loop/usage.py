"""Per-round LLM accounting: the difference of two usage-ledger snapshots, as `usage` rows."""

from __future__ import annotations

from typing import Any

from evolvemem.contracts.usage import Usage


def usage_rows(before: dict[str, Usage], after: dict[str, Usage], round_no: int, phase: str) -> list[dict[str, Any]]:
    rows = []
    for role, now in after.items():
        delta = now - before.get(role, Usage())
        if delta != Usage():
            rows.append({"round": round_no, "phase": phase, "role": role, **delta.as_dict()})
    return rows
