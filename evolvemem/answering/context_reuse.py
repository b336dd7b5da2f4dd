"""Context-level reuse: one answer per (question, answer context, answer-side settings).

Retrieval costs well under a millisecond per question; the answer model is the cost. A config
change that leaves a question's answer context as it was (the same memories, in the same order,
with the same text) and agrees on the settings that act on a built context (the action space's
`stage = "answer"` dimensions: the answer prompt and its check) gets the same answer, so the
answer path asks this memo before it asks the answer role, whatever else in the config changed.

The memo is kept per run: filled by every answer the run's evaluations give, and refilled from
the run store's records on resume (`restore`), so a resumed run reuses what it paid for before.
Only answers that did not fail are kept (a failed one is asked again)."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.records import QuestionRecord
from evolvemem.contracts.roles import AnswerResult

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig

CONTEXT_REUSE = "context"  # `question_records.reused` of a record whose answer came from this memo
CONFIG_REUSE = "config"  # ... and of a record copied whole (same effective config and memories)


def _memory_text(memory: MemoryUnit) -> str:
    """Everything an answerer may read of a memory (its repr leaves the embedding out)."""
    return repr(memory)


def context_key(question_id: str, context: Sequence[MemoryUnit], effective: RetrievalConfig) -> str:
    """The key of one answer step: the question, its ordered context (ids and text) and the
    effective config's answer-stage settings (taken from its action space, not listed here)."""
    settings = ";".join(f"{name}={getattr(effective, name)!r}" for name in effective.space.answer_stage())
    digest = hashlib.sha256()
    for part in (question_id, settings, *(_memory_text(m) for m in context)):
        digest.update(part.encode("utf-8"))
        digest.update(b"\x1f")
    return digest.hexdigest()[:32]


@dataclass(frozen=True)
class MemoEntries:
    """A memo's content as plain data: what a worker process starts from and sends back."""

    answers: dict[str, AnswerResult] = field(default_factory=dict)
    verdicts: dict[str, float] = field(default_factory=dict)


class AnswerMemo:
    """Answers by context key, shared by the concurrent answer threads of a run."""

    def __init__(self, entries: MemoEntries | None = None) -> None:
        self._answers: dict[str, AnswerResult] = dict(entries.answers) if entries else {}
        # the LLM-judge metric of a final answer, by its key
        self._verdicts: dict[str, float] = dict(entries.verdicts) if entries else {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._answers)

    def entries(self) -> MemoEntries:
        with self._lock:
            return MemoEntries(dict(self._answers), dict(self._verdicts))

    def added_since(self, earlier: MemoEntries) -> MemoEntries:
        """What this memo holds that `earlier` did not (a worker's answers, sent back)."""
        with self._lock:
            return MemoEntries(
                {k: v for k, v in self._answers.items() if k not in earlier.answers},
                {k: v for k, v in self._verdicts.items() if k not in earlier.verdicts},
            )

    def merge(self, entries: MemoEntries) -> None:
        """Add another memo's entries (an answer already known for a key is kept)."""
        with self._lock:
            for key, answer in entries.answers.items():
                self._answers.setdefault(key, answer)
            for key, verdict in entries.verdicts.items():
                self._verdicts.setdefault(key, verdict)

    def get(self, key: str) -> AnswerResult | None:
        """The answer given for this key before, at no cost (None: never given)."""
        with self._lock:
            return self._answers.get(key)

    def put(self, key: str, answer: AnswerResult) -> None:
        if answer.failed:
            return
        with self._lock:
            self._answers.setdefault(key, AnswerResult(answer.text, notes=dict(answer.notes)))

    def verdict(self, key: str) -> float | None:
        """The judge metric already given to the final answer of this key (None: never given)."""
        with self._lock:
            return self._verdicts.get(key)

    def put_verdict(self, key: str, verdict: float | None) -> None:
        if verdict is not None:
            with self._lock:
                self._verdicts.setdefault(key, verdict)

    def restore(self, records: Iterable[QuestionRecord]) -> int:
        """Refill from stored records (a resume): each scored record's final answer step (what its
        prompt left out is kept only for a single-answer path, where it was that step's). Returns
        how many keys were added."""
        added = 0
        for record in records:
            key = record.context_key
            if not key or record.failed:
                continue
            trimmed = record.prompt_trimmed
            single = not record.retries
            notes: dict[str, object] = {"trimmed": [str(t) for t in trimmed]} if single and trimmed else {}
            if record.judge is not None:
                self.put_verdict(key, float(record.judge))
            with self._lock:
                if key not in self._answers:
                    self._answers[key] = AnswerResult(record.prediction or "", notes=notes)
                    added += 1
        return added
