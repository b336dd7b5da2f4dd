"""The memory store: one DuckDB file holding what a served memory needs to come back after a restart.

It is the run store's sibling: one file, one writer (DuckDB's file lock; a second writing process
gets one line), and it owns every SQL statement of the serving path. Per (namespace, user) it
keeps the turns as they were added, the memories extracted from them (before consolidation, so a
reopen consolidates exactly as evaluation does), the embedding of every memory content (so a
reopen embeds nothing), and the traces of served searches and answers.

An add is one transaction: turns, memories and vectors are committed together before the add is
acknowledged, so a crash leaves every acknowledged add whole and an unacknowledged one absent.

A forget rewrites the file (`_rewrite`): DuckDB's DELETE only marks rows, and a CHECKPOINT frees
their blocks without overwriting them (VACUUM does not reclaim deletes either), so the deleted text
would stay readable in the file. Copying the live rows into a fresh file and swapping it in leaves
it in no file, WAL included. The copy costs time in proportion to the store, on a forget only.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.errors import EvolveMemError
from evolvemem.memory.store_cache import unit_from_dict, unit_to_dict
from evolvemem.store.columnar import Column, create_table, equal_to, insert_columns

if TYPE_CHECKING:
    import duckdb

FORMAT_VERSION = "1"

_V, _BIG = "VARCHAR", "BIGINT"
# `said_at` is kept as the ISO text it was given, so a time zone (or its absence) survives a reopen
TURNS: tuple[Column, ...] = (
    ("ns", _V),
    ("user_id", _V),
    ("seq", _BIG),
    ("turn_id", _V),
    ("session_id", _V),
    ("speaker", _V),
    ("text", _V),
    ("image_caption", _V),
    ("said_at", _V),
    ("added_at", "TIMESTAMP"),
)
UNITS: tuple[Column, ...] = (
    ("ns", _V),
    ("user_id", _V),
    ("position", _BIG),
    ("extractor", _V),
    ("content_hash", _V),
    ("unit", "JSON"),
)
VECTORS: tuple[Column, ...] = (("model", _V), ("content_hash", _V), ("vector", "BLOB"))
TRACES: tuple[Column, ...] = (
    ("trace_id", _V),
    ("ns", _V),
    ("user_id", _V),
    ("kind", _V),
    ("query", _V),
    ("question_type", _V),
    ("question_date", _V),
    ("config_hash", _V),
    ("memory_ids", "JSON"),
    ("turn_ids", "JSON"),
    ("latency_ms", "DOUBLE"),
    ("answer", _V),
    ("traced_at", "TIMESTAMP"),
)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    create_table("turns", TURNS),
    create_table("units", UNITS),
    create_table("vectors", VECTORS),
    create_table("traces", TRACES),
)


class StoreLockedError(EvolveMemError):
    """Another process has the store open for writing."""


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


@dataclass(frozen=True)
class StoredTurn:
    """One added turn as the store keeps it (`at`: ISO text or None)."""

    turn_id: str
    session_id: str
    speaker: str
    text: str
    image_caption: str | None
    at: str | None


@dataclass(frozen=True)
class TraceRow:
    """One served search, context or answer."""

    trace_id: str
    ns: str
    user_id: str
    kind: str  # "search", "context" or "answer"
    query: str
    question_type: str
    question_date: str | None
    config_hash: str
    memory_ids: tuple[str, ...]
    turn_ids: tuple[str, ...]
    latency_ms: float
    answer: str | None
    at: datetime


def wal_of(path: Path) -> Path:
    """DuckDB's write-ahead log of the database file `path`."""
    return path.with_name(path.name + ".wal")


def replies_of(path: Path) -> Path:
    """The model replies a served memory of the store file `path` keeps (one reply cache per store:
    a forget clears it whole, since a reply cannot say whose turns its prompt held)."""
    return path.with_name(path.name + ".replies")


def rewrite_path(path: Path) -> Path:
    """Where a store file is copied to before it replaces the original (see `_rewrite`)."""
    return path.with_name(f".{path.name}.rewrite")


class MemoryStore:
    """A memory store file, opened for writing by this process alone. Thread-safe: one lock
    serialises every statement on the one connection."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.is_dir():
            raise EvolveMemError(f"{self.path}: is a directory; a memory store is one file (e.g. memory.duckdb)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = self._connect()
        self._lock = threading.RLock()
        self._closed = False
        for statement in _SCHEMA:
            self.con.execute(statement)
        found = self.con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if found is None:
            self.con.execute("INSERT INTO meta VALUES ('format', ?)", [FORMAT_VERSION])
        elif found[0] != FORMAT_VERSION:
            raise EvolveMemError(f"{self.path}: memory store format {found[0]}, this version reads {FORMAT_VERSION}")

    def _connect(self) -> duckdb.DuckDBPyConnection:
        import duckdb

        try:
            return duckdb.connect(str(self.path))
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise StoreLockedError(
                    f"{self.path}: the memory store is open for writing in another process "
                    "(one writer per store); stop it or use another store file"
                ) from None
            raise EvolveMemError(f"{self.path}: cannot open memory store ({str(exc).splitlines()[0]})") from None
        except duckdb.Error as exc:
            raise EvolveMemError(f"{self.path}: not a memory store ({str(exc).splitlines()[0]})") from None

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self.con.close()
                self._closed = True

    # ---- reads --------------------------------------------------------------------------------
    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """All rows of one query, under the connection's lock (one connection serves every thread)."""
        with self._lock:
            return self.con.execute(sql, params).fetchall()

    def users(self, ns: str) -> list[str]:
        rows = self._rows("SELECT user_id, min(seq) FROM turns WHERE ns = ? GROUP BY user_id ORDER BY user_id", [ns])
        return [r[0] for r in rows]

    def namespaces(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT DISTINCT ns FROM turns ORDER BY ns")]

    def turns(self, ns: str, user: str) -> list[StoredTurn]:
        rows = self._rows(
            "SELECT turn_id, session_id, speaker, text, image_caption, said_at FROM turns "
            "WHERE ns = ? AND user_id = ? ORDER BY seq",
            [ns, user],
        )
        return [StoredTurn(*row) for row in rows]

    def units(self, ns: str, user: str) -> tuple[list[MemoryUnit], set[str]]:
        """The user's extracted memories in order, and the extractor keys they were made with."""
        rows = self._rows(
            "SELECT extractor, unit FROM units WHERE ns = ? AND user_id = ? ORDER BY position", [ns, user]
        )
        return [unit_from_dict(json.loads(r[1])) for r in rows], {r[0] for r in rows}

    def vectors(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        rows = self._rows(
            "SELECT content_hash, vector FROM vectors WHERE model = ? AND content_hash "
            "IN (SELECT unnest(?::VARCHAR[]))",
            [model, wanted],
        )
        return {h: np.frombuffer(blob, dtype=np.float32) for h, blob in rows}

    def counts(self) -> dict[str, int]:
        with self._lock:
            one = self.con.execute(
                "SELECT (SELECT count(*) FROM turns), (SELECT count(*) FROM units), "
                "(SELECT count(*) FROM vectors), (SELECT count(*) FROM traces)"
            ).fetchone()
        assert one is not None
        return dict(zip(("turns", "memories", "vectors", "traces"), one))

    def traces(self, ns: str | None = None, user: str | None = None) -> list[TraceRow]:
        where, params = equal_to(ns=ns, user_id=user)
        sql = (
            "SELECT trace_id, ns, user_id, kind, query, question_type, question_date, config_hash, memory_ids, "
            "turn_ids, latency_ms, answer, traced_at FROM traces"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + " ORDER BY traced_at, trace_id"
        )
        rows = self._rows(sql, params)
        return [
            TraceRow(
                trace_id=r[0],
                ns=r[1],
                user_id=r[2],
                kind=r[3],
                query=r[4],
                question_type=r[5],
                question_date=r[6],
                config_hash=r[7],
                memory_ids=tuple(json.loads(r[8])),
                turn_ids=tuple(json.loads(r[9])),
                latency_ms=r[10],
                answer=r[11],
                at=r[12],
            )
            for r in rows
        ]

    # ---- writes -------------------------------------------------------------------------------
    def _transaction(self) -> "_Transaction":
        return _Transaction(self)

    def commit_add(
        self,
        ns: str,
        user: str,
        turns: Sequence[StoredTurn],
        units: Sequence[MemoryUnit],
        extractor_key: str,
        replace_units: bool,
        model: str,
        vectors: dict[str, np.ndarray],
    ) -> None:
        """One add, atomically: new turns, the user's memories (all of them when `replace_units`,
        else appended), and the vectors of contents not stored yet."""
        with self._lock, self._transaction():
            first = self.con.execute(
                "SELECT coalesce(max(seq), -1) + 1 FROM turns WHERE ns = ? AND user_id = ?", [ns, user]
            ).fetchone()
            start = first[0] if first else 0
            now = utcnow()
            if turns:
                insert_columns(
                    self.con,
                    "turns",
                    TURNS,
                    [
                        (ns, user, start + i, t.turn_id, t.session_id, t.speaker, t.text, t.image_caption, t.at, now)
                        for i, t in enumerate(turns)
                    ],
                )
            self._write_units(ns, user, units, extractor_key, replace_units)
            self._write_vectors(model, vectors)

    def replace_units(
        self,
        ns: str,
        user: str,
        units: Sequence[MemoryUnit],
        extractor_key: str,
        model: str,
        vectors: dict[str, np.ndarray],
    ) -> None:
        """Re-extracted memories of a user (its extractor or its speakers changed)."""
        with self._lock, self._transaction():
            self._write_units(ns, user, units, extractor_key, True)
            self._write_vectors(model, vectors)

    def _write_units(self, ns: str, user: str, units: Sequence[MemoryUnit], extractor_key: str, replace: bool) -> None:
        if replace:
            self.con.execute("DELETE FROM units WHERE ns = ? AND user_id = ?", [ns, user])
            start = 0
        else:
            first = self.con.execute(
                "SELECT coalesce(max(position), -1) + 1 FROM units WHERE ns = ? AND user_id = ?", [ns, user]
            ).fetchone()
            start = first[0] if first else 0
        if units:
            insert_columns(
                self.con,
                "units",
                UNITS,
                [
                    (
                        ns,
                        user,
                        start + i,
                        extractor_key,
                        u.content_hash,
                        json.dumps(unit_to_dict(u), ensure_ascii=False),
                    )
                    for i, u in enumerate(units)
                ],
            )

    def _write_vectors(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        if not vectors:
            return
        known = {
            r[0]
            for r in self.con.execute(
                "SELECT content_hash FROM vectors WHERE model = ? AND content_hash IN (SELECT unnest(?::VARCHAR[]))",
                [model, sorted(vectors)],
            ).fetchall()
        }
        insert_columns(
            self.con,
            "vectors",
            VECTORS,
            [
                (model, h, np.ascontiguousarray(v, dtype=np.float32).tobytes())
                for h, v in vectors.items()
                if h not in known
            ],
        )

    def forget(
        self,
        ns: str,
        user: str,
        turn_ids: Sequence[str] | None,
        units: Sequence[MemoryUnit] = (),
        extractor_key: str = "",
        model: str = "",
        vectors: dict[str, np.ndarray] | None = None,
    ) -> int:
        """Delete all of a user's turns, memories and traces (`turn_ids` None), or some turns and
        the traces that cite them, the user's memories then being `units` (extracted again from the
        turns left). Vectors that no memory refers to any more go too. Then the file is rewritten,
        so what was deleted is in no file (the module docstring says why). Returns the turns deleted."""
        with self._lock:
            with self._transaction():
                if turn_ids is None:
                    found = self.con.execute(
                        "SELECT count(*) FROM turns WHERE ns = ? AND user_id = ?", [ns, user]
                    ).fetchone()
                    for table in ("turns", "units", "traces"):
                        self.con.execute(f"DELETE FROM {table} WHERE ns = ? AND user_id = ?", [ns, user])
                else:
                    found = self._forget_turns(ns, user, turn_ids)
                    self._write_units(ns, user, units, extractor_key, True)
                    self._write_vectors(model, vectors or {})
                self.con.execute("DELETE FROM vectors WHERE content_hash NOT IN (SELECT content_hash FROM units)")
            self._rewrite()
        return int(found[0]) if found else 0

    def referenced(self, hashes: Iterable[str]) -> list[str]:
        """Those of `hashes` some stored memory (of any user) or stored vector still has."""
        wanted = sorted(set(hashes))
        if not wanted:
            return []
        rows = self._rows(
            "SELECT content_hash FROM units WHERE content_hash IN (SELECT unnest(?::VARCHAR[])) "
            "UNION SELECT content_hash FROM vectors WHERE content_hash IN (SELECT unnest(?::VARCHAR[]))",
            [wanted, wanted],
        )
        return [r[0] for r in rows]

    def _forget_turns(self, ns: str, user: str, turn_ids: Sequence[str]) -> tuple[Any, ...] | None:
        """Delete some turns of a user and the traces that cite any of them; (count,) of the turns."""
        params = [ns, user, list(turn_ids)]
        found = self.con.execute(
            "SELECT count(*) FROM turns WHERE ns = ? AND user_id = ? AND turn_id IN (SELECT unnest(?::VARCHAR[]))",
            params,
        ).fetchone()
        self.con.execute(
            "DELETE FROM turns WHERE ns = ? AND user_id = ? AND turn_id IN (SELECT unnest(?::VARCHAR[]))", params
        )
        gone = set(turn_ids)
        traced = self.con.execute("SELECT trace_id, turn_ids FROM traces WHERE ns = ? AND user_id = ?", [ns, user])
        citing = [r[0] for r in traced.fetchall() if gone & set(json.loads(r[1]))]
        if citing:
            self.con.execute("DELETE FROM traces WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))", [citing])
        return found

    def _rewrite(self) -> None:
        """Copy the live rows into a fresh file and put it in this file's place (held: the lock).

        The old WAL is removed before the swap (the copy holds everything committed, and a WAL
        left beside the new file would be replayed onto it); a crash before the swap leaves the
        old file whole, after it the new one."""
        fresh = rewrite_path(self.path)
        for leftover in (fresh, wal_of(fresh)):
            leftover.unlink(missing_ok=True)
        self.con.execute("CHECKPOINT")
        one = self.con.execute("SELECT current_database()").fetchone()
        name = str(one[0]) if one else ""
        target = str(fresh).replace("'", "''")
        self.con.execute(f"ATTACH '{target}' AS evolvemem_rewrite")
        try:
            self.con.execute(f'COPY FROM DATABASE "{name.replace(chr(34), chr(34) * 2)}" TO evolvemem_rewrite')
        finally:
            self.con.execute("DETACH evolvemem_rewrite")
        self.con.close()
        wal_of(self.path).unlink(missing_ok=True)
        os.replace(fresh, self.path)
        self.con = self._connect()

    def record_traces(self, rows: Sequence[TraceRow]) -> None:
        if not rows:
            return
        with self._lock, self._transaction():
            insert_columns(
                self.con,
                "traces",
                TRACES,
                [
                    (
                        r.trace_id,
                        r.ns,
                        r.user_id,
                        r.kind,
                        r.query,
                        r.question_type,
                        r.question_date,
                        r.config_hash,
                        json.dumps(list(r.memory_ids)),
                        json.dumps(list(r.turn_ids)),
                        r.latency_ms,
                        r.answer,
                        r.at,
                    )
                    for r in rows
                ],
            )


class _Transaction:
    """BEGIN … COMMIT, rolled back when the body raises."""

    def __init__(self, store: MemoryStore):
        self.con = store.con

    def __enter__(self) -> None:
        self.con.execute("BEGIN TRANSACTION")

    def __exit__(self, kind: Any, *_: Any) -> None:
        self.con.execute("ROLLBACK" if kind is not None else "COMMIT")
