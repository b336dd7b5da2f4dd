"""The one seam between the loop and whatever scores a config (the session's round bracket)."""
from __future__ import annotations

from typing import Callable, Protocol

from evolvemem.data.models import Question
from evolvemem.space.config import RetrievalConfig


class RoundScorer(Protocol):
    """Scores a config on questions as one (round, phase) of the run store: begin → build the
    stores it reads → evaluate → usage → finish. `contexts_only`: build each question's answer
    context and record its evidence figures without asking the reader (rung 0, the `evidence`
    objective), each context cut at `token_cap` estimated tokens when given."""

    def score_round(self, config: RetrievalConfig, questions: list[Question], round_no: int, phase: str,
                    on_record: Callable[[dict], None] | None = None,
                    on_stage: Callable[[str, int, int], None] | None = None, *,
                    contexts_only: bool = False, token_cap: int | None = None) -> tuple[dict, float]:
        ...
