"""The first answer context of one question: route, pick the store, retrieve.

Four readers hand a reader this context: the answer path's first attempt, the evidence-only
context records (`--objective evidence`, rung 0), the served `Memory` and the labeller's checks.
Serving promises the exact context evaluation measured, and a label check's "unanswerable
against the best context" means what a tuned memory would hand a reader; both hold only while
every reader builds it the same way, so they all build it here.

Each caller keeps its own router: the answer path and serving ask their plug-ins' router (the
answer model's choice when there is one), while context records and the labeller use the
router's rules, never a model (`RULES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence

from evolvemem.answering.plugins import Router
from evolvemem.answering.stores import base_store
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.usage import Usage
from evolvemem.data.models import Question
from evolvemem.mechanisms.ama_router import FACT, GranularityRouter
from evolvemem.retrieval.retriever import RetrievalResult

if TYPE_CHECKING:
    from evolvemem.retrieval.retriever import Retriever
    from evolvemem.space.config import RetrievalConfig

RULES: Router = GranularityRouter(None)  # the configured granularity, or the routing rules: no model


class RetrieverSource(Protocol):
    """Where a store's retriever comes from: a `Workspace`, or one that builds a store on first use."""

    def retriever(self, conversation_id: str, store: str) -> Retriever: ...


@dataclass(frozen=True)
class FirstContext:
    """The first context of a question and how it was chosen."""

    store: str  # the store read: "fact" granularity is the config's base store (facts or recurrence)
    route: str  # how the granularity was chosen: "config", "rules", "llm" or "rules-fallback"
    route_cost: Usage  # what a model router spent (nothing with the rules)
    retrieval: RetrievalResult  # the context (`items`), what its budget cut, sub-queries, cost

    @property
    def memories(self) -> tuple[MemoryUnit, ...]:
        """The context's memories, in context order."""
        return tuple(item.memory for item in self.retrieval.items)


def store_of(granularity: str, effective: RetrievalConfig) -> str:
    """The store a granularity reads under `effective` ("fact" is its base store)."""
    return base_store(effective) if granularity == FACT else granularity


def first_context(
    source: RetrieverSource, question: Question, effective: RetrievalConfig, router: Router
) -> FirstContext:
    """Route `question` with `router`, pick the store, and retrieve from it under `effective`."""
    return first_contexts(source, question, [effective], router)[0]


def first_contexts(
    source: RetrieverSource, question: Question, cuts: Sequence[RetrievalConfig], router: Router
) -> list[FirstContext]:
    """`first_context` under each of `cuts` — one effective config at several token budgets
    (`--budgets`): routed once and ranked once, the ranking cut at each budget."""
    granularity, how, cost = router.route(question, cuts[0])
    store = store_of(granularity, cuts[0])
    results = source.retriever(question.conversation_id, store).retrieve_cuts(question, cuts)
    return [FirstContext(store, how, cost, retrieval) for retrieval in results]
