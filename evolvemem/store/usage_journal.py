"""The usage journal: `<run_dir>/usage.jsonl`, one line for every LLM call, cache hit, retry and
failure, written the moment it happens.

Why a second place: the `usage` table is a DuckDB write, made with a batch of records or a
round's end. A process killed between a reply and that write used to lose what the call cost,
although the provider billed it. A journal line is one `os.write` on a file opened for appending
(~10 µs, no lock shared with the store): once it returns, the line survives a SIGKILL (it is in
the kernel's page cache; an OS crash before write-back may still lose the last lines, which is
why DuckDB keeps the table). The store folds the journal into `usage`
(`RunStore.fold_usage_journal`): the lines past the byte offset it folded last are added in the
same transaction that moves the offset, so each line counts once however often a run is killed
and resumed.

A line names its evaluation (the journal's current phase, set by whoever brackets the work: run
setup, a round's phase, a diagnosis), its role, the non-zero usage counters, and for a call the
id the client sent with it (`X-Evolvemem-Call-Id`), so a call can be matched with a server's log.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from evolvemem.contracts.usage import USAGE_FIELDS, Usage
from evolvemem.store.rows import UsageRow

JOURNAL_NAME = "usage.jsonl"
SETUP = (-1, "setup")  # usage outside any round: extraction and indexing when a run opens


@dataclass(frozen=True)
class JournalEntry:
    round: int
    phase: str
    role: str
    usage: Usage
    call_id: str | None = None


class UsageJournal:
    """Appends usage lines to one file; thread-safe. Opened for appending at the first line."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._tag = SETUP

    # ---- writing ---------------------------------------------------------------------------
    @contextmanager
    def phase(self, round_no: int, phase: str) -> Iterator[None]:
        """Lines written inside the block belong to evaluation (round_no, phase)."""
        previous, self._tag = self._tag, (round_no, phase)
        try:
            yield
        finally:
            self._tag = previous

    def append(self, role: str, usage: Usage, call_id: str | None = None) -> None:
        """One line, in one write: durable against a kill of this process once it returns."""
        round_no, phase = self._tag
        line: dict[str, object] = {"round": round_no, "phase": phase, "role": role}
        line.update((name, value) for name, value in usage.as_dict().items() if value)
        if call_id:
            line["id"] = call_id
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._fd is None:
                self._fd = self._open()
            os.write(self._fd, data)

    def _open(self) -> int:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size:
                with open(self.path, "rb") as f:
                    f.seek(size - 1)
                    torn = f.read(1) != b"\n"
                if torn:  # a line cut by a kill mid-write: end it, so the next line stands alone
                    os.write(fd, b"\n")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    # ---- reading ---------------------------------------------------------------------------
    def read_from(self, offset: int) -> tuple[list[JournalEntry], int]:
        """The entries of the whole lines after byte `offset`, and the offset past the last one.
        A line still being written (no newline yet) waits for the next read; a journal shorter
        than `offset` was replaced, and is read from its start."""
        try:
            with open(self.path, "rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() < offset:
                    offset = 0
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return [], 0
        whole = data[: data.rfind(b"\n") + 1]
        return [entry for raw in whole.splitlines() if (entry := parse_line(raw)) is not None], offset + len(whole)

    def remove(self) -> None:
        """Delete the file (a run directory taken over by a new run must not inherit its lines)."""
        self.close()
        self.path.unlink(missing_ok=True)


def parse_line(raw: bytes) -> JournalEntry | None:
    """One journal line, or None for one a kill cut short (sealed by `_open`, never folded)."""
    try:
        item = json.loads(raw)
        usage = Usage(**{name: item.get(name, 0) for name in USAGE_FIELDS})
        return JournalEntry(int(item["round"]), str(item["phase"]), str(item["role"]), usage, item.get("id"))
    except (ValueError, KeyError, TypeError):
        return None


def usage_rows_of(entries: list[JournalEntry]) -> list[UsageRow]:
    """`usage` table rows: the entries summed per (round, phase, role)."""
    totals: dict[tuple[int, str, str], Usage] = {}
    for e in entries:
        key = (e.round, e.phase, e.role)
        totals[key] = totals.get(key, Usage()) + e.usage
    return [UsageRow(r, p, role, u) for (r, p, role), u in totals.items()]
