"""Per-round LLM accounting: the difference of two usage-ledger snapshots, as `usage` rows."""
from __future__ import annotations

from evolvemem.store.schema import TABLES

FIELDS = tuple(name for name, _, _ in TABLES["usage"] if name not in ("round", "phase", "role"))


def usage_rows(before: dict, after: dict, round_no: int, phase: str) -> list[dict]:
    rows = []
    for role, now in after.items():
        was = before.get(role, {})
        delta = {f: (now.get(f, 0) or 0) - (was.get(f, 0) or 0) for f in FIELDS}
        if any(delta.values()):
            rows.append({"round": round_no, "phase": phase, "role": role, **delta})
    return rows
