"""What the loop asks of the session: score a config on questions as one (round, phase) of the
run store — one at a time (`score_round`) or several together (`score_rounds`: a round's
candidates, which a remote executor evaluates in parallel)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from evolvemem.data.models import Question
from evolvemem.space.config import RetrievalConfig

RecordFn = Callable[[dict], None]
StageFn = Callable[[str, int, int], None]


@dataclass
class RoundJob:
    """One evaluation: `config` on `questions`, recorded as (`round_no`, `phase`)."""

    config: RetrievalConfig
    questions: list[Question]
    round_no: int
    phase: str
    on_record: RecordFn | None = None  # sees each record as it is written (progress bars)


class RoundScorer(Protocol):
    """The session's round bracket (begin → build the stores a config reads → evaluate → usage →
    finish); each evaluation returns (summary, wall seconds)."""

    def score_round(self, config: RetrievalConfig, questions: list[Question], round_no: int, phase: str,
                    on_record: RecordFn | None = None, on_stage: StageFn | None = None) -> tuple[dict, float]:
        ...

    def score_rounds(self, jobs: list[RoundJob], on_stage: StageFn | None = None) -> list[tuple[dict, float]]:
        ...
