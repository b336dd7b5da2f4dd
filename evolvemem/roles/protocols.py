"""The role Protocols the engine talks to. The engine never knows whether a role is `llm` or
`offline`; both return the same small result types."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from evolvemem.data.models import Conversation, Question
from evolvemem.memory.unit import MemoryUnit


@dataclass(frozen=True)
class CallCost:
    """LLM usage of one role call (all zero for offline roles)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: "CallCost") -> "CallCost":
        return CallCost(
            self.calls + other.calls,
            self.cache_hits + other.cache_hits,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cost_usd + other.cost_usd,
        )


@dataclass(frozen=True)
class AnswerResult:
    """An answer. `failed` means every call failed (recorded as failed, not scored as wrong)."""

    text: str
    cost: CallCost = CallCost()
    failed: bool = False
    error: str = ""
    notes: dict[str, Any] = field(default_factory=dict)


class Extractor(Protocol):
    name: str  # e.g. "offline" or "llm:openai/gpt-4o-mini"
    version: str  # changes when the prompt or rules change (part of the memory cache key)

    def extract(self, conversation: Conversation, turn_ids: set[str] | None = None) -> tuple[list[MemoryUnit], CallCost]:
        """Memories for a conversation (or only for the given turns, for re-extraction)."""
        ...


class Decomposer(Protocol):
    name: str

    def decompose(self, question: str, max_sub_queries: int) -> tuple[list[str], CallCost]:
        """Sub-queries for a question (the question itself when it does not split)."""
        ...


class Answerer(Protocol):
    name: str

    def answer(self, question: Question, context: Sequence[MemoryUnit], style: str) -> AnswerResult:
        """Answer from the ranked context in the given answer style."""
        ...


class Verifier(Protocol):
    name: str

    def verify(self, question: Question, context: Sequence[MemoryUnit], answer: AnswerResult, style: str) -> AnswerResult:
        """Second pass: keep, fix, or replace the answer with an abstention."""
        ...
