"""The answer path's plug-ins: a router picks the store the first answer reads, a judge says
Pass / Retry / Refresh after each answer, a refresher rewrites conflicting memories in one
question's context. The mechanisms implement them (AMA's router, judge and refresher); with an
answer model they ask it, otherwise they use their rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.usage import Usage
from evolvemem.data.models import Question
from evolvemem.mechanisms.ama_judge import RetryJudge
from evolvemem.mechanisms.ama_refresh import Refresher, RefreshResult
from evolvemem.mechanisms.ama_router import GranularityRouter

if TYPE_CHECKING:
    from evolvemem.llm.client import LLMClient
    from evolvemem.space.config import RetrievalConfig


class Router(Protocol):
    def route(self, question: Question, effective: RetrievalConfig) -> tuple[str, str, Usage]:
        """(granularity, how it was chosen, cost)."""
        ...


class Judge(Protocol):
    def verdict(
        self, question: Question, context: Sequence[MemoryUnit], answer: str, unresolved_conflict: bool
    ) -> tuple[str, Usage]:
        """("pass" | "retry" | "refresh", cost)."""
        ...


class ContextRefresher(Protocol):
    def refresh(self, question: Question, context: Sequence[MemoryUnit]) -> RefreshResult:
        """The context with conflicts refreshed (from the memories as stored)."""
        ...


@dataclass(frozen=True)
class AnswerPlugins:
    router: Router
    judge: Judge
    refresher: ContextRefresher
    client: LLMClient | None  # the answer model the plug-ins ask (None: their rules)


def default_plugins(client: LLMClient | None) -> AnswerPlugins:
    """AMA's router, judge and refresher, asking `client` when there is one."""
    return AnswerPlugins(GranularityRouter(client), RetryJudge(client), Refresher(client), client)
