"""`evolve forget-audit`: where a string is still found in the files a served memory owns.

A forget should leave the forgotten text in no file: not the store, not its write-ahead log, not
the traces, not the caches outside the store. This checks that from the outside, as an operator
(or a test) would: every byte of every such file is searched for the text (as UTF-8, and as JSON
writes it with non-ASCII escaped), and, when the store is not open in a server, every text column
of every table too (DuckDB may compress a string so that its bytes are not in the file as such).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from evolvemem.errors import EvolveMemError
from evolvemem.paths import cache_dir
from evolvemem.serving.store import replies_of, rewrite_path, wal_of

CHUNK = 8 << 20  # bytes read at a time: model weights in the cache can be large


@dataclass(frozen=True)
class Finding:
    """Where the text was found and how many times (`where`: a file, or "table.column")."""

    where: str
    count: int


@dataclass(frozen=True)
class AuditReport:
    findings: tuple[Finding, ...]
    files_scanned: int
    tables_scanned: bool  # False: the store is open in a server (its files were still scanned)

    @property
    def found(self) -> int:
        return sum(f.count for f in self.findings)


def owned_files(store: Path) -> list[Path]:
    """Every file a served memory of `store` writes: the store, its WAL, a rewrite's leftovers, its
    model replies, and everything under the cache directory (embeddings, extractions, LLM replies)."""
    beside = [store, wal_of(store), rewrite_path(store), wal_of(rewrite_path(store))]
    replies = sorted(p for p in replies_of(store).rglob("*") if p.is_file())
    return [p for p in beside if p.is_file()] + replies + sorted(p for p in cache_dir().rglob("*") if p.is_file())


def forms(text: str) -> list[bytes]:
    """The byte strings `text` is written as: UTF-8, and JSON's ASCII escaping when that differs."""
    raw = text.encode("utf-8")
    escaped = json.dumps(text)[1:-1].encode("ascii")
    return [raw] if escaped == raw else [raw, escaped]


def count_in_file(path: Path, needles: Iterable[bytes]) -> int:
    """Occurrences of any of `needles` in the file, read in chunks (overlapping by a needle's length)."""
    wanted = [n for n in needles if n]
    overlap = max((len(n) for n in wanted), default=1) - 1
    found, tail = 0, b""
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(CHUNK):
                window = tail + chunk
                found += sum(window.count(n) - tail.count(n) for n in wanted)
                tail = window[-overlap:] if overlap else b""
    except OSError:  # removed while scanning (a cache shard rewritten): nothing left to find
        return found
    return found


def scan_tables(store: Path, text: str) -> tuple[Finding, ...] | None:
    """Rows of every text column of the store that contain `text`; None when the store is open
    for writing in another process (DuckDB lets no reader in then)."""
    import duckdb

    try:
        con = duckdb.connect(str(store), read_only=True)
    except duckdb.Error:
        return None
    try:
        columns = con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE data_type IN ('VARCHAR', 'JSON') ORDER BY table_name, column_name"
        ).fetchall()
        findings = []
        for table, column in columns:
            one = con.execute(
                f'SELECT count(*) FROM "{table}" WHERE contains(CAST("{column}" AS VARCHAR), ?)', [text]
            ).fetchone()
            if one and one[0]:
                findings.append(Finding(f"{table}.{column}", int(one[0])))
        return tuple(findings)
    finally:
        con.close()


def audit(store: str | Path, text: str) -> AuditReport:
    """Search every file a served memory of `store` owns, and the store's tables, for `text`."""
    if not text:
        raise EvolveMemError("give the text to look for (--text)")
    path = Path(store)
    if not path.is_file():
        raise EvolveMemError(f"{path}: no memory store there")
    files = owned_files(path)
    needles = forms(text)
    findings = [Finding(str(p), n) for p in files if (n := count_in_file(p, needles))]
    tables = scan_tables(path, text)
    return AuditReport(tuple(findings) + (tables or ()), len(files), tables is not None)
