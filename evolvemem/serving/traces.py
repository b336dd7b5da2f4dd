"""Traces: every served search, context and answer, recorded so it can become tomorrow's dev set.

Searches are recorded in batches (a write per search would cost more than the search): a trace
reaches the store within `FLUSH_SECONDS`, soon after `FLUSH_ROWS` traces are buffered, or when the
memory closes. The writing is always the flush thread's: a search never waits for it. A forget
drops its user's buffered traces (`drop`) after waiting out any write under way, so no trace of a
forgotten user reaches the store after the forget. `export_dataset` writes the stored conversations with the traced queries as questions
in the custom benchmark format, with no gold answer yet: label them, then `evolve run` on them.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Collection, Sequence, TypedDict

from evolvemem.data.custom import custom_records
from evolvemem.data.models import Dataset, Question
from evolvemem.serving.store import MemoryStore, TraceRow

if TYPE_CHECKING:
    from evolvemem.serving.memory import Memory

FLUSH_SECONDS = 1.0
FLUSH_ROWS = 256


class _ServedRequired(TypedDict):
    served_kind: str
    served_turn_ids: list[str]
    served_config_hash: str
    served_latency_ms: float
    served_at: str


class ServedNotes(_ServedRequired, total=False):
    """What was served for a traced query: notes on its exported question (the loader skips them)."""

    served_answer: str


class TraceBuffer:
    """Traces waiting to be written; a daemon thread flushes them every FLUSH_SECONDS, or when
    FLUSH_ROWS are waiting."""

    def __init__(self, store: MemoryStore):
        self.store = store
        self._rows: list[TraceRow] = []
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # held from taking rows to their commit (a drop waits for it)
        self._stop = threading.Event()
        self._full = threading.Event()
        self._thread = threading.Thread(target=self._run, name="evolvemem-traces", daemon=True)
        self._thread.start()

    def add(self, row: TraceRow) -> None:
        with self._lock:
            self._rows.append(row)
            full = len(self._rows) >= FLUSH_ROWS
        if full:
            self._full.set()

    def flush(self) -> None:
        with self._writing:
            with self._lock:
                rows, self._rows = self._rows, []
            if rows:
                self.store.record_traces(rows)

    def drop(self, ns: str, user: str, citing: Collection[str] | None = None) -> None:
        """Forget the buffered traces of a user (only those citing one of the turns `citing`, if
        given). Returns once no write taken before it is still under way."""
        with self._writing, self._lock:
            self._rows = [
                row
                for row in self._rows
                if not (
                    row.ns == ns
                    and row.user_id == user
                    and (citing is None or any(turn in citing for turn in row.turn_ids))
                )
            ]

    def _run(self) -> None:
        while not self._stop.is_set():
            self._full.wait(FLUSH_SECONDS)
            self._full.clear()
            if not self._stop.is_set():
                self.flush()

    def close(self) -> None:
        self._stop.set()
        self._full.set()
        self._thread.join(timeout=5)
        self.flush()


def trace_question(row: TraceRow, conversation_id: str) -> tuple[Question, ServedNotes]:
    """A traced query as an unlabelled question, and what was served for it."""
    from evolvemem.data.dates import parse_iso_datetime

    question = Question(
        question_id=f"trace-{row.trace_id}",
        conversation_id=conversation_id,
        text=row.query,
        category=row.question_type,
        question_type=row.question_type,
        answers=(),
        question_date=parse_iso_datetime(row.question_date) if row.question_date else None,
    )
    served: ServedNotes = {
        "served_kind": row.kind,
        "served_turn_ids": list(row.turn_ids),
        "served_config_hash": row.config_hash,
        "served_latency_ms": round(row.latency_ms, 3),
        "served_at": row.at.isoformat(),
    }
    if row.answer is not None:
        served["served_answer"] = row.answer
    return question, served


def export_dataset(
    memory: Memory, namespace: str, users: Sequence[str], *, with_traces: bool, name: str = "evolvemem-traces"
) -> dict[str, Any]:
    """Users' conversations (and, `with_traces`, their traced queries) as one custom-format document.
    A question's `answer` is an empty list until someone labels it; the loader reads the extra
    `served_*` fields as notes and ignores them."""
    conversations = {}
    questions: list[Question] = []
    served: dict[str, ServedNotes] = {}
    for user in users:
        conversation = memory.conversation(user, namespace)
        if conversation is None:
            continue
        conversations[user] = conversation
        if with_traces:
            for row in memory.store.traces(namespace, user):
                question, extra = trace_question(row, user)
                questions.append(question)
                served[question.question_id] = extra
    header, conversation_records, question_records = custom_records(Dataset(name, conversations, questions))
    noted: list[dict[str, object]] = [{**record, **served.get(record["id"], {})} for record in question_records]
    return {**header, "conversations": conversation_records, "questions": noted}
