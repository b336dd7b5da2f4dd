"""Per-round LLM accounting: the difference of two usage-ledger snapshots, as `usage` rows."""

from __future__ import annotations

from evolvemem.contracts.usage import Usage
from evolvemem.store.rows import UsageRow


def usage_rows(before: dict[str, Usage], after: dict[str, Usage], round_no: int, phase: str) -> list[UsageRow]:
    rows = []
    for role, now in after.items():
        delta = now - before.get(role, Usage())
        if delta != Usage():
            rows.append(UsageRow(round_no, phase, role, delta))
    return rows
