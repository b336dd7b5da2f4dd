"""Tables of entries looked up by name (benchmarks, diagnosers, label kinds): one way to build them."""

from __future__ import annotations

from typing import Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


EntryT = TypeVar("EntryT", bound=Named)


def named_table(*entries: EntryT) -> dict[str, EntryT]:
    """name -> entry, in the order given; a name given twice is a mistake in the table."""
    table: dict[str, EntryT] = {}
    for entry in entries:
        if entry.name in table:
            raise ValueError(f"{entry.name!r} is named twice in the table")
        table[entry.name] = entry
    return table
