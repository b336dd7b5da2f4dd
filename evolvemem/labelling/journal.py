"""The labelling run's journal: every model call's outcome, appended as one JSON line.

Keyed by the content of the call (model and messages), so a run started again with the same
input replays what was already asked and asks only what is missing — whether or not the LLM
reply cache is on. A call that failed (the server down) is not journaled: it is asked again. A
torn last line (a kill mid-write) is skipped."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evolvemem.contracts.usage import Usage


def journal_path(out: Path) -> Path:
    """The journal beside the output file: `dev.json` -> `dev.json.label-journal.jsonl`."""
    return out.with_name(out.name + ".label-journal.jsonl")


def call_key(model: str, messages: list[dict[str, Any]]) -> str:
    canonical = json.dumps({"model": model, "messages": messages}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class JournaledReply:
    """A model call's outcome: the parsed JSON reply, or None with the raw text when it was not JSON."""

    parsed: Any
    raw: str
    usage: Usage


class Journal:
    """Append-only; `get` answers from what earlier runs (and this one) recorded."""

    def __init__(self, path: Path):
        self.path = path
        self._entries: dict[str, JournaledReply] = {}
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                    self._entries[entry["key"]] = JournaledReply(
                        entry.get("parsed"), str(entry.get("raw", "")), Usage.from_dict(entry.get("usage"))
                    )
                except (ValueError, KeyError, TypeError):
                    continue  # a line torn by a kill
        self.replayed = len(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> JournaledReply | None:
        return self._entries.get(key)

    def put(self, key: str, reply: JournaledReply, note: dict[str, Any]) -> None:
        """Record one outcome durably before it is used (`note` says what the call was for)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(
            {"key": key, **note, "parsed": reply.parsed, "raw": reply.raw, "usage": reply.usage.as_dict()},
            ensure_ascii=False,
        )
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._entries[key] = reply

    def total_usage(self) -> Usage:
        """What every journaled call cost when it was made (this run's and earlier runs')."""
        return sum((e.usage for e in self._entries.values()), Usage())
