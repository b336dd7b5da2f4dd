"""The one seam between the loop and whatever scores a config (the session's round bracket):
one evaluation at a time (`score_round`) or several together (`score_rounds`: a round's
candidates, which a remote executor evaluates in parallel)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from evolvemem.contracts.records import QuestionRecord
from evolvemem.contracts.vocab import ContextMode
from evolvemem.data.models import Question
from evolvemem.space.budget import TokenBudget
from evolvemem.space.config import RetrievalConfig
from evolvemem.store.rows import RoundSummary

RecordFn = Callable[[QuestionRecord], None]
StageFn = Callable[[str, int, int], None]
ProgressFn = Callable[[str, QuestionRecord, int], None]  # (label, record, total): what the progress bars see


def round_progress(hook: ProgressFn | None, round_no: int, phase: str, total: int) -> RecordFn | None:
    """`hook` bound to one evaluation's label ("round N phase") and size; None without a hook."""
    if hook is None:
        return None
    label = f"round {round_no} {phase}"
    return lambda record: hook(label, record, total)


@dataclass(frozen=True)
class Scoring:
    """How a session scores every job: the adversarial protocol, answers asked at once, and whether
    an answer to an unchanged context is reused (a run's come from its spec)."""

    protocol: str = "official"
    concurrency: int = 8
    context_reuse: bool = True


@dataclass
class RoundJob:
    """One evaluation: `config` on `questions`, recorded as (`round_no`, `phase`)."""

    config: RetrievalConfig
    questions: list[Question]
    round_no: int
    phase: str
    on_record: RecordFn | None = None  # sees each record as it is written (progress bars)
    contexts_only: bool = False  # record each question's context and evidence figures, no answer
    context: ContextMode = ContextMode.RETRIEVED  # what the reader is handed (`evolve eval --context`)
    # contexts-only, `--budgets`: (phase, budget) — the same ranking also cut at each further
    # budget and recorded as that phase of the same round (answering/contexts.py)
    cuts: tuple[tuple[str, TokenBudget], ...] = ()


class RoundScorer(Protocol):
    """Scores a config on questions as one (round, phase) of the run store: begin → build the
    stores it reads → evaluate → usage → finish. `contexts_only`: build each question's answer
    context and record its evidence figures without asking the reader (rung 0, the `evidence`
    objective); every context is cut at the token budget the config carries (`config.budget`)."""

    def score_round(self, job: RoundJob, on_stage: StageFn | None = None) -> RoundSummary:
        """One evaluation: its finished `rounds` row (scores and wall seconds)."""
        ...

    def score_rounds(self, jobs: list[RoundJob], on_stage: StageFn | None = None) -> list[RoundSummary]:
        """Several evaluations, each as `score_round`, in the jobs' order."""
        ...
