"""`Change`: one setting's value changing, between two configs (a round's diff) or by a clamp
(`ClampReport`: the value given was outside its safe range)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Change:
    """`field` went from `old` to `new` (`scope` is "global" or a question type)."""

    field: str
    old: Any
    new: Any
    scope: str = "global"

    def __str__(self) -> str:
        where = "" if self.scope == "global" else f"[{self.scope}] "
        return f"{where}{self.field}: {self.old!r} -> {self.new!r}"

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "old": self.old, "new": self.new, "scope": self.scope}

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> Change:
        """A change as `as_dict` stored it (a decision's `changes` column)."""
        return cls(str(stored["field"]), stored.get("old"), stored.get("new"), str(stored.get("scope") or "global"))


class ClampReport(Change):
    """A value given (`old`) outside its safe range, clamped to `new`."""

    def __str__(self) -> str:
        where = "" if self.scope == "global" else f" (override for {self.scope})"
        return f"{self.field}{where}: {self.old!r} is outside the safe range, clamped to {self.new!r}"
