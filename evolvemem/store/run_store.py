"""Open, lock, write and read a run's DuckDB file (`<run_dir>/run.duckdb`).

Rows are inserted column-wise (store/columnar.py: one `unnest` statement per batch), ~100x faster than
`executemany`. DuckDB holds a file lock while a read-write connection is open, so two
processes cannot write one run at once; we turn its error into a clear one-line message."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timezone
from pathlib import Path
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Protocol, Sequence, TypeVar

from evolvemem.store.reads import RunReads
from evolvemem.contracts.closing import Closing
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.records import QuestionRecord
from evolvemem.contracts.vocab import Phase
from evolvemem.errors import EvolveMemError
from evolvemem.store.columnar import equal_to, insert_columns
from evolvemem.store.rows import (
    DecisionRow,
    DiagnosisRow,
    Manifest,
    PhaseCalls,
    ProposedDimension,
    RoundSummary,
    ScreeningRow,
    SQLRow,
    UsageRow,
)
from evolvemem.store.schema import SCHEMA_VERSION, TABLES, create_statements
from evolvemem.store.usage_journal import JOURNAL_NAME, UsageJournal, usage_rows_of

if TYPE_CHECKING:
    from evolvemem.scoring.aggregate import EvaluationScores
    from evolvemem.space.config import RetrievalConfig

DB_NAME = "run.duckdb"
MEMORY_COLUMNS = tuple(name for name, _, _ in TABLES["memories"])  # `MemoryUnit` field names
JOURNAL_FOLDED = "usage_journal_bytes"  # manifest: how much of the usage journal `usage` holds


class Judged(Protocol):
    """A round the guard judged: its number and whether it won its paired comparison."""

    @property
    def round(self) -> int: ...

    @property
    def accepted(self) -> bool | None: ...


J = TypeVar("J", bound=Judged)


def incumbent(rounds: Sequence[J]) -> J:
    """The one best-round rule: the latest round that won its paired comparison with the incumbent,
    else the first (the start). Not the highest mean. The guard (loop/guard.py) decides with it
    while a run goes; `RunStore.best_round` reads it back from the decisions."""
    return next(r for r in reversed(rounds) if r.accepted or r.round == rounds[0].round)


@dataclass(frozen=True)
class JudgedRound:
    round: int
    accepted: bool | None


class RunLockedError(EvolveMemError):
    """Another process has this run open for writing."""


def _utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _jsonable(value: Any) -> Any:
    return json.dumps(value, default=str, sort_keys=True)


def _json_text(value: Any) -> str | None:
    """A JSON cell as the text `insert_columns` takes (text already JSON passes as it is)."""
    return None if value is None else (value if isinstance(value, str) else _jsonable(value))


class RunStore(RunReads, Closing):
    """A run's DuckDB file. Use as a context manager; `read_only=True` for inspection commands."""

    live = False  # opened from a snapshot of a run another process is writing
    writable = False  # a read-write connection (to the run, or to a copy of it)

    def __init__(self, run_dir: str | Path, read_only: bool = False):
        import duckdb

        self.run_dir = Path(run_dir)
        self.path = self.run_dir / DB_NAME
        if read_only and not self.path.is_file():
            raise EvolveMemError(f"{self.run_dir}: not a run directory (no {DB_NAME})")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # every LLM call's usage, appended as it returns; folded into `usage` (fold_usage_journal)
        self.journal = UsageJournal(self.run_dir / JOURNAL_NAME)
        if not read_only and not self.path.exists():
            self.journal.remove()  # lines left without their store must not be folded into a new one
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower() and read_only:
                self.con = self._live_snapshot(duckdb)
            elif "lock" in str(exc).lower():
                raise RunLockedError(
                    f"{self.run_dir}: the run is open in another evolvemem process; wait for it to finish or stop it"
                ) from None
            else:
                raise self._unreadable(exc) from None
        except duckdb.Error as exc:  # a file cut short or overwritten: its checksums fail
            raise self._unreadable(exc) from None
        self.read_only = read_only
        self._closed = False
        try:
            writable = not read_only or self.live  # a live snapshot is a writable copy
            if not writable and self._schema_behind():
                # a run written by an older version, opened for inspection: read an upgraded copy
                self.con.close()
                self.con = self._copy(duckdb, "evolvemem-upgraded-")
                writable = True
            self.writable = writable
            if writable:
                self._upgrade_schema()
                self.fold_usage_journal()  # what a killed process journaled and never wrote
        except duckdb.Error as exc:
            self.close()
            raise self._unreadable(exc) from None

    def _unreadable(self, exc: BaseException) -> EvolveMemError:
        """One line for a store that cannot be opened: why, and what to do."""
        from evolvemem.errors import environment_problem

        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        known = environment_problem(exc)
        if known and "damaged" not in known:  # a full disk, a read-only directory
            return EvolveMemError(f"{self.path}: {known}")
        return EvolveMemError(
            f"{self.path}: the run store cannot be read ({first[:200]}); it is damaged (a copy cut "
            "short?) — restore it from a copy, or start again with another --out"
        )

    @classmethod
    def create(cls, run_dir: str | Path, manifest: Manifest) -> "RunStore":
        """A new store that holds `manifest` from the moment it exists: built under a staging
        folder and moved into place whole, so a kill at any moment leaves either no store or one
        a resume can continue (never a store without its manifest)."""
        run_dir = Path(run_dir)
        staging = run_dir / ".creating"
        if staging.exists():
            import shutil

            shutil.rmtree(staging)
        with cls(staging) as fresh:
            fresh.set_manifest(manifest)
        wal = staging / (DB_NAME + ".wal")
        (run_dir / wal.name).unlink(missing_ok=True)  # a log left without its store must not be replayed
        (run_dir / JOURNAL_NAME).unlink(missing_ok=True)  # nor a usage journal
        (staging / DB_NAME).replace(run_dir / DB_NAME)
        if wal.exists():  # a clean close checkpoints; should a log remain, it follows its file
            wal.replace(run_dir / wal.name)
        staging.rmdir()
        return cls(run_dir)

    def _schema_behind(self) -> bool:
        """Whether this file lacks a table or column of the current schema."""
        have = {
            (t, c)
            for t, c in self.con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall()
        }
        return any((table, name) not in have for table, columns in TABLES.items() for name, _, _ in columns)

    def _upgrade_schema(self) -> None:
        """Create what is missing: tables, columns added since the file was written, the views."""
        statements = create_statements()
        tables = [s for s in statements if s.startswith("CREATE TABLE")]
        for statement in tables:
            self.con.execute(statement)
        self._add_missing_columns()  # before the views, which read the new columns
        for statement in statements:
            if statement not in tables:
                self.con.execute(statement)
        if not self.read_only and "schema_version" not in self.manifest():
            self.set_manifest({"schema_version": SCHEMA_VERSION})

    def _add_missing_columns(self) -> None:
        """A run made by an older version lacks columns added since: add them (NULL for old
        rows) so it can still be resumed, shown and compared."""
        for table, columns in TABLES.items():
            have = {
                row[0]
                for row in self.con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]
                ).fetchall()
            }
            for name, sql_type, _ in columns:
                if name not in have:
                    self.con.execute(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}")

    # ---- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        if not self._closed:
            self.journal.close()
            self.con.close()
            self._closed = True

    # ---- writes -------------------------------------------------------------------------------
    def _live_snapshot(self, duckdb: Any) -> Any:
        """A run that another process is writing holds DuckDB's lock, even against readers: inspect
        a copy of its file (and write-ahead log) instead, as of now. A copy taken mid-write may be
        unreadable; one more try, then a clear error."""
        for _ in range(3):
            try:
                con = self._copy(duckdb, "evolvemem-live-")
                self.live = True
                return con
            except (OSError, duckdb.Error):
                continue
        raise RunLockedError(
            f"{self.run_dir}: the run is being written by another process and no consistent "
            "copy could be read; try again in a moment"
        )

    def _copy(self, duckdb: Any, prefix: str) -> Any:
        """A writable connection to a fresh copy of the file (and its write-ahead log, replayed)."""
        import shutil
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix=prefix))
        copy = folder / DB_NAME
        try:
            shutil.copy2(self.path, copy)
            wal = self.path.with_name(self.path.name + ".wal")
            if wal.exists():
                shutil.copy2(wal, copy.with_name(copy.name + ".wal"))
            con = duckdb.connect(str(copy))
            con.execute("CHECKPOINT")
            return con
        except (OSError, duckdb.Error):
            shutil.rmtree(folder, ignore_errors=True)
            raise

    def _insert(self, table: str, rows: Iterable[SQLRow]) -> int:
        """Insert rows (dicts keyed by column; missing columns are NULL) in one statement."""
        rows = list(rows)
        if not rows:
            return 0
        columns = TABLES[table]
        unknown = set().union(*rows) - {name for name, _, _ in columns}
        if unknown:
            raise KeyError(f"{table}: unknown column(s) {sorted(unknown)}")
        spec = [(name, sql_type) for name, sql_type, _ in columns]
        cells = [
            tuple(_json_text(row.get(name)) if sql_type == "JSON" else row.get(name) for name, sql_type in spec)
            for row in rows
        ]
        return insert_columns(self.con, table, spec, cells)

    def record_questions(self, records: Iterable[QuestionRecord]) -> int:
        """Question records (each holds its round and phase), in one batch."""
        return self._insert("question_records", (record.as_row() for record in records))

    def record_usage(self, usage: Iterable[UsageRow]) -> int:
        """Add usage (one row per role with a non-zero difference; see loop/usage.py) to the
        (round, phase, role) totals: usage is recorded as it happens, batch by batch, and the table
        keeps one row per (round, phase, role)."""
        rows = [u.as_row() for u in usage]
        counters = [name for name, sql_type, _ in TABLES["usage"] if name not in ("round", "phase", "role")]
        new = []
        for row in rows:
            key = [row["round"], row["phase"], row["role"]]
            found = self.con.execute(
                "SELECT count(*) FROM usage WHERE round = ? AND phase = ? AND role = ?", key
            ).fetchone()
            if found and found[0]:
                assignments = ", ".join(f"{c} = coalesce({c}, 0) + ?" for c in counters)
                self.con.execute(
                    f"UPDATE usage SET {assignments} WHERE round = ? AND phase = ? AND role = ?",
                    [row.get(c) or 0 for c in counters] + key,
                )
            else:
                new.append(row)
        self._insert("usage", new)
        return len(rows)

    def fold_usage_journal(self) -> int:
        """Add the usage journal's lines not folded yet to `usage`, in one transaction with the
        offset folded so far: each line counts once, whether this process or a resume folds it.
        Returns the lines folded (0 for a store opened read-only)."""
        if self._closed or not self.writable:
            return 0
        row = self.con.execute("SELECT value FROM manifest WHERE key = ?", [JOURNAL_FOLDED]).fetchone()
        folded = int(json.loads(row[0])) if row else 0
        entries, end = self.journal.read_from(folded)
        if end == folded:
            return 0
        with self._transaction():
            self.record_usage(usage_rows_of(entries))
            self._put_manifest(JOURNAL_FOLDED, end)
        return len(entries)

    def record_memories(self, units: Iterable[MemoryUnit]) -> int:
        """Memories as rows of `memories` (its columns are `MemoryUnit` fields)."""
        return self._insert("memories", (_memory_row(unit) for unit in units))

    def record_decision(self, row: DecisionRow) -> None:
        """The guard's decision after one round (one row per round)."""
        self._insert("decisions", [row.as_row()])

    def record_diagnosis(self, row: DiagnosisRow, proposed_dimensions: Iterable[ProposedDimension] = ()) -> None:
        """What a diagnoser read and replied for one round, and the new dimensions it proposed."""
        self._insert("diagnoses", [row.as_row()])
        self.record_proposed_dimensions(proposed_dimensions)

    def record_screening(self, row: ScreeningRow) -> None:
        """One minibatch screening of a round's candidate and its verdict (loop/screening.py)."""
        self._insert("screenings", [row.as_row()])

    def record_proposed_dimensions(self, rows: Iterable[ProposedDimension]) -> None:
        self._insert("proposed_dimensions", (row.as_row() for row in rows))

    def extend_rounds(self, rounds: int) -> None:
        """A resume with a higher round limit extends a finished run: forget the 'stopped'
        decision taken before that limit so the loop goes on from there, and the pruning rounds
        after it (loop/pruning.py: they judged the old last round's best, and their round numbers
        are the new rounds'; the new end prunes again). Their calls stay in the usage table, under
        the round they followed."""
        stopped = self.query("SELECT max(round) AS r FROM decisions WHERE decision = 'stopped' AND round < ?", [rounds])
        last = stopped[0]["r"] if stopped else None
        if last is None:
            return
        with self._transaction():
            self.con.execute("DELETE FROM decisions WHERE decision = 'stopped' AND round < ?", [rounds])
            for table in ("decisions", "rounds", "question_records"):
                self.con.execute(f"DELETE FROM {table} WHERE round > ?", [last])
            self.con.execute("UPDATE usage SET round = ? WHERE round > ?", [last, last])

    # ---- reads -------------------------------------------------------------------------------
    def decision(self, round_no: int) -> DecisionRow | None:
        rows = self.query("SELECT * FROM decisions WHERE round = ?", [round_no])
        return DecisionRow.from_row(rows[0]) if rows else None

    def reextracted_sessions(self) -> set[str]:
        """Every session a round already re-extracted (never twice)."""
        return {
            s
            for r in self.query("SELECT reextracted_sessions FROM decisions")
            for s in (r["reextracted_sessions"] or [])
        }

    def has_memories(self) -> bool:
        return bool(self.query("SELECT 1 FROM memories LIMIT 1"))

    def added_memories(self) -> list[MemoryUnit]:
        """Memories that targeted re-extraction added (to restore them on resume)."""
        return [_memory_unit(row) for row in self.query("SELECT * FROM memories WHERE added_round > 0")]

    def scored_records(self) -> list[QuestionRecord]:
        """Every record that was scored (not failed), oldest round first: what a resumed run
        reuses instead of asking again."""
        return [
            QuestionRecord.from_row(row)
            for row in self.query("SELECT * FROM question_records WHERE NOT failed ORDER BY round, phase, question_id")
        ]

    def screenings(self, round_no: int | None = None) -> list[ScreeningRow]:
        """Screenings of one round (every round: None), in order."""
        if round_no is None:
            rows = self.query("SELECT * FROM screenings ORDER BY round, attempt")
        else:
            rows = self.query("SELECT * FROM screenings WHERE round = ? ORDER BY attempt", [round_no])
        return [ScreeningRow.from_row(r) for r in rows]

    def phase_usage(self, round_no: int, phase: str) -> PhaseCalls:
        """Calls and tokens of one (round, phase), over every role."""
        row = self.query(
            """SELECT coalesce(sum(calls), 0) AS calls,
                                   coalesce(sum(prompt_tokens) + sum(completion_tokens), 0) AS tokens
                            FROM usage WHERE round = ? AND phase = ?""",
            [round_no, phase],
        )[0]
        return PhaseCalls(int(row["calls"]), int(row["tokens"]))

    def round_records(self, round_no: int, phase: str) -> list[QuestionRecord]:
        """Every record of one evaluation, in question-id order."""
        return [
            QuestionRecord.from_row(row)
            for row in self.query(
                "SELECT * FROM question_records WHERE round = ? AND phase = ? ORDER BY question_id", [round_no, phase]
            )
        ]

    def query(self, sql: str, params: list[Any] | None = None) -> list[SQLRow]:
        """Run a read query and return its rows by column name (JSON columns come back as parsed
        values): the typed readers (store/reads.py) and ad-hoc SQL (benchmarks) are built on it."""
        cursor = self.con.execute(sql, params or [])
        names = [d[0] for d in cursor.description]
        json_cols = {d[0] for d in cursor.description if str(d[1]).upper() == "JSON"}
        out = []
        for row in cursor.fetchall():
            item = dict(zip(names, row))
            for name in json_cols:
                if isinstance(item[name], str):
                    item[name] = json.loads(item[name])
            out.append(item)
        return out

    # ---- manifest ----------------------------------------------------------------------------
    def set_manifest(self, values: Manifest) -> None:
        """Write manifest fields in one transaction: a kill leaves all of them or none."""
        with self._transaction():
            for key, value in values.items():
                self._put_manifest(key, value)

    def _put_manifest(self, key: str, value: Any) -> None:
        self.con.execute("DELETE FROM manifest WHERE key = ?", [key])
        self.con.execute("INSERT INTO manifest VALUES (?, ?::JSON)", [key, _jsonable(value)])

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """The writes of the block in one transaction, rolled back on any exception (Ctrl-C too)."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise

    def is_unstarted(self) -> bool:
        """Whether nothing was evaluated yet (no round, no question record): a directory left by a
        command stopped during its setup, which a new run may take over."""
        return not self.query("SELECT 1 FROM rounds LIMIT 1") and not self.query(
            "SELECT 1 FROM question_records LIMIT 1"
        )

    def manifest(self) -> Manifest:
        return {row["key"]: row["value"] for row in self.query("SELECT key, value FROM manifest")}

    # ---- rounds ------------------------------------------------------------------------------
    def begin_round(self, round_no: int, phase: str, config: RetrievalConfig) -> None:
        """Record that a round started with `config` (idempotent on resume)."""
        existing = self.query("SELECT status FROM rounds WHERE round = ? AND phase = ?", [round_no, phase])
        if existing:
            return
        self._insert(
            "rounds",
            [
                {
                    "round": round_no,
                    "phase": phase,
                    "config_fingerprint": config.fingerprint(),
                    "config": config.model_dump(),
                    "status": "running",
                    "started_at": _utcnow(),
                }
            ],
        )

    def note_stores_built(self, round_no: int, phase: str, built: str) -> None:
        """Say on (round, phase) which memory stores its config made the run build, and their time."""
        self.con.execute("UPDATE rounds SET stores_built = ? WHERE round = ? AND phase = ?", [built, round_no, phase])

    def note_retrieval_cost(self, round_no: int, phase: str, ms: float, bm25_ms: float) -> None:
        """Record on (round, phase) what its config's retrieval costs a question, beside BM25 alone."""
        self.con.execute(
            "UPDATE rounds SET retrieval_ms = ?, bm25_ms = ? WHERE round = ? AND phase = ?",
            [ms, bm25_ms, round_no, phase],
        )

    def note_stopped(self, round_no: int, phase: str, why: str) -> None:
        """Record that (round, phase) stopped before its last look, and why (loop/sequential.py)."""
        self.con.execute("UPDATE rounds SET stopped_at = ? WHERE round = ? AND phase = ?", [why, round_no, phase])

    def add_wall_seconds(self, round_no: int, phase: str, seconds: float) -> None:
        """Add the wall time of earlier looks to (round, phase), which `finish_round` set to the last one's."""
        self.con.execute(
            "UPDATE rounds SET wall_seconds = coalesce(wall_seconds, 0) + ? WHERE round = ? AND phase = ?",
            [seconds, round_no, phase],
        )

    def stores_built(self) -> dict[int, tuple[str, ...]]:
        """Round -> the stores its evaluations (screenings and dev) first built, in the order built."""
        rows = self.query(
            "SELECT round, stores_built FROM rounds WHERE stores_built IS NOT NULL ORDER BY round, started_at"
        )
        built: dict[int, tuple[str, ...]] = {}
        for row in rows:
            built[row["round"]] = (*built.get(row["round"], ()), str(row["stores_built"]))
        return built

    def finish_round(self, round_no: int, phase: str, scores: EvaluationScores, wall_seconds: float) -> RoundSummary:
        """Close (round, phase) with its scores; returns the round as the store now holds it (what a
        resume reads back, so a fresh and a resumed run go on from the same values)."""
        self.con.execute(
            """UPDATE rounds SET status = 'done', n_questions = ?, n_failed = ?, main_f1 = ?,
               adversarial_f1 = ?, all_f1 = ?, evidence_recall = ?, main_evidence_recall = ?,
               context_tokens = ?, by_category = ?::JSON, wall_seconds = ?, finished_at = ?
               WHERE round = ? AND phase = ?""",
            [
                scores.n_questions,
                scores.n_failed,
                scores.main_f1,
                scores.adversarial_f1,
                scores.all_f1,
                scores.evidence_recall,
                scores.main_evidence_recall,
                scores.context_tokens,
                _jsonable(scores.by_category_json()),
                wall_seconds,
                _utcnow(),
                round_no,
                phase,
            ],
        )
        finished = self.round_row(round_no, phase)
        assert finished is not None  # begun by begin_round
        return finished

    def round_row(self, round_no: int, phase: str) -> RoundSummary | None:
        """One evaluation's `rounds` row (None: not begun)."""
        rows = self.query("SELECT * FROM rounds WHERE round = ? AND phase = ?", [round_no, phase])
        return RoundSummary.from_row(rows[0]) if rows else None

    def best_round(self) -> int:
        """The guard's best round: the one a finished run scored on test as its best, else (a run still
        going, or stopped before its test) the incumbent after the latest decided round by `incumbent`;
        0 (the start) when there is neither."""
        final = self.query("SELECT min(round) AS r FROM rounds WHERE phase = ?", [Phase.TEST_BEST])[0]["r"]
        if final is not None:
            return int(final)
        decided = self.query("SELECT round, accepted, best_round FROM decisions ORDER BY round")
        if not decided:
            return 0
        if any(row["accepted"] is None for row in decided):  # written before verdicts were stored
            latest = [row["best_round"] for row in decided if row["best_round"] is not None]
            return int(latest[-1]) if latest else 0
        judged = [JudgedRound(0, True)] + [JudgedRound(row["round"], row["accepted"]) for row in decided]
        return incumbent(judged).round

    def finished_with_failures(self) -> list[RoundSummary]:
        """Finished evaluations that kept failed questions (a faulty server's), by round and phase."""
        rows = self.query("SELECT * FROM rounds WHERE status = 'done' AND n_failed > 0 ORDER BY round, phase")
        return [RoundSummary.from_row(row) for row in rows]

    def question_ids(self, round_no: int, phase: str) -> set[str]:
        """Every question an evaluation recorded, failed ones included."""
        rows = self.con.execute(
            "SELECT question_id FROM question_records WHERE round = ? AND phase = ?", [round_no, phase]
        ).fetchall()
        return {r[0] for r in rows}

    def finished_question_ids(self, round_no: int, phase: str) -> set[str]:
        """Questions already recorded (and not failed) for this round: a resume skips them."""
        rows = self.con.execute(
            "SELECT question_id FROM question_records WHERE round = ? AND phase = ? AND NOT failed",
            [round_no, phase],
        ).fetchall()
        return {r[0] for r in rows}

    def failure_causes(self, round_no: int | None = None, phase: str | None = None) -> list[tuple[str, int]]:
        """(cause, questions) of failed questions, most common first (a cause is the error's first line)."""
        where, params = equal_to(round=round_no, phase=phase)
        where.insert(0, "failed")
        rows = self.con.execute(
            f"""SELECT left(split_part(coalesce(error, 'no reason recorded'), chr(10), 1), 200) AS cause, count(*) AS n
                FROM question_records WHERE {" AND ".join(where)} GROUP BY cause ORDER BY n DESC, cause""",
            params,
        ).fetchall()
        return [(r[0], int(r[1])) for r in rows]

    def drop_failed(self, round_no: int, phase: str) -> None:
        """Forget failed records of a round so a resume retries them."""
        self.con.execute("DELETE FROM question_records WHERE round = ? AND phase = ? AND failed", [round_no, phase])


def _memory_row(unit: MemoryUnit) -> SQLRow:
    """A memory as its `memories` row (lists where the table holds lists)."""
    return {c: (list(v) if isinstance(v, tuple) else v) for c in MEMORY_COLUMNS for v in [getattr(unit, c)]}


def _memory_unit(row: SQLRow) -> MemoryUnit:
    """A `memories` row read back (NULL columns take the field's default)."""
    values: SQLRow = {k: (tuple(v) if isinstance(v, list) else v) for k, v in row.items() if v is not None}
    return MemoryUnit(**values)
