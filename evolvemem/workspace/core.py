"""Everything a run builds once: memories per conversation, their indexes and retrievers.

Indexes are built once per run (not once per round); embeddings come from the on-disk cache,
so a second run over the same data embeds nothing. Targeted re-extraction adds memories to one
conversation's index without touching the others.

The `fact` store (the run's extractor) is built up front; other stores (evolvemem/memory/stores.py:
raw turns, episodes, RecMem's recurrence store) only when a config first needs them, and then
cached on disk like the fact store."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Collection, TypeVar

from evolvemem.mechanisms import candidate_sources
from evolvemem.contracts.local_models import Encoder, LocalModels
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.usage import Usage
from evolvemem.data.models import Conversation, Dataset, Question
from evolvemem.memory.consolidate import consolidate
from evolvemem.memory.store_cache import load_or_extract
from evolvemem.memory.stores import FACT, RAW
from evolvemem.retrieval.embeddings import DEFAULT_EMBEDDING_MODEL, Embedder
from evolvemem.retrieval.index import ConversationIndex
from evolvemem.retrieval.late_interaction import reads_token_vectors
from evolvemem.retrieval.rerank import CrossEncoderReranker
from evolvemem.retrieval.retriever import Retriever
from evolvemem.retrieval.second_embedder import SecondEmbedder
from evolvemem.roles.factory import Roles
from evolvemem.workspace.stores import MemoryStores, ProgressFn, StoreBuilt

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig

T = TypeVar("T")


@dataclass
class SetupStats:
    extraction_seconds: float = 0.0
    index_seconds: float = 0.0
    conversations_from_cache: int = 0
    memories: int = 0
    usage: Usage = field(default_factory=Usage)


def consolidated(units: list[MemoryUnit], conversation: Conversation) -> list[MemoryUnit]:
    """A conversation's extracted memories consolidated; decay is counted back from its last
    session: "now" for its questions."""
    last = max((s.timestamp for s in conversation.sessions if s.timestamp), default=None)
    return consolidate(units, reference=last)


class Workspace:
    """Memories, indexes and retrievers for the conversations of one dataset."""

    def __init__(
        self,
        dataset: Dataset,
        roles: Roles,
        embedding_model: str | None = None,
        embedder: Embedder | None = None,
        reranker: CrossEncoderReranker | None = None,
        second_embedder: SecondEmbedder | None = None,
        encoder: Encoder | None = None,
    ) -> None:
        """`encoder`: the backend of the embedding model when `embedder` is not given."""
        self.dataset = dataset
        self.roles = roles
        self.embedder = embedder or Embedder(embedding_model or DEFAULT_EMBEDDING_MODEL, encoder=encoder)
        self.reranker = reranker  # the cross-encoder of the rerank stage, if the user gave one
        self.second_embedder = second_embedder  # the model of the second dense view, if the user gave one
        self.memories: dict[str, list[MemoryUnit]] = {}
        self.indexes: dict[str, ConversationIndex] = {}
        self.retrievers: dict[str, Retriever] = {}
        self.covered_turns: dict[str, set[str]] = {}
        self.stats = SetupStats()
        self.stores = MemoryStores(self)  # the other stores (never changed once built)
        self._memo: dict[str, object] = {}
        self._memo_lock = threading.Lock()

    @property
    def local_models(self) -> LocalModels:
        """The local models this workspace loaded (what a Ray worker loads to make the same one)."""
        return LocalModels(
            self.embedder.model_name,
            self.reranker.model_name if self.reranker is not None else None,
            self.second_embedder.model_name if self.second_embedder is not None else None,
            self.embedder.backend,
        )

    def build(self, progress: ProgressFn | None = None) -> SetupStats:
        """Extract (or load cached) memories, consolidate them and index each conversation."""

        conversations = list(self.dataset.conversations.values())
        started = time.perf_counter()
        for i, conv in enumerate(conversations):
            units, cost, from_cache = load_or_extract(self.roles.extractor, conv)
            self.memories[conv.conversation_id] = consolidated(units, conv)
            self.stats.usage = self.stats.usage + cost
            self.stats.conversations_from_cache += int(from_cache)
            if progress:
                progress("extract", i + 1, len(conversations))
        self.stats.extraction_seconds = time.perf_counter() - started

        started = time.perf_counter()
        for i, conv in enumerate(conversations):
            self.index_conversation(conv.conversation_id)
            if progress:
                progress("index", i + 1, len(conversations))
        self.stats.index_seconds = time.perf_counter() - started
        self.stats.memories = sum(len(v) for v in self.memories.values())
        return self.stats

    def load_conversation(self, conversation_id: str, units: list[MemoryUnit]) -> None:
        """Consolidate and index one conversation's extracted `units` exactly as `build` does, for
        a caller that extracted them itself (the serving path extracts turns as they are added)."""
        self.memories[conversation_id] = consolidated(units, self.dataset.conversations[conversation_id])
        self.index_conversation(conversation_id)
        self.stats.memories = sum(len(v) for v in self.memories.values())

    def retriever_over(self, conversation_id: str, units: list[MemoryUnit]) -> Retriever:
        conv = self.dataset.conversations[conversation_id]
        return self.retriever_on(
            conversation_id, ConversationIndex.build(units, self.embedder, known_persons=conv.speakers)
        )

    def retriever_on(self, conversation_id: str, index: ConversationIndex) -> Retriever:
        conv = self.dataset.conversations[conversation_id]
        return Retriever(
            index,
            self.embedder,
            decomposer=self.roles.decomposer,
            known_persons=conv.speakers,
            llm=self.roles.mechanism_client,
            reranker=self.reranker,
            sources=candidate_sources(),
            second_embedder=self.second_embedder,
        )

    def index_conversation(self, conversation_id: str, index: ConversationIndex | None = None) -> None:
        units = self.memories[conversation_id]
        retriever = (
            self.retriever_over(conversation_id, units) if index is None else self.retriever_on(conversation_id, index)
        )
        self.indexes[conversation_id] = retriever.index
        self.retrievers[conversation_id] = retriever
        self.covered_turns[conversation_id] = {t for u in units for t in u.source_turn_ids}

    def expect(self, config: RetrievalConfig) -> None:
        """The stores built from now on serve `config`: when it reads the late view, an index keeps
        its memories' token vectors from the pass that embeds them (Embedder.encode_memories)."""
        if reads_token_vectors(config):
            self.embedder.keep_memory_tokens = True

    def ensure_stores(
        self, names: set[str], progress: ProgressFn | None = None, conversations: Collection[str] | None = None
    ) -> list[StoreBuilt]:
        """Build (or load from the memory cache) every store in `names` not built yet, for each of
        `conversations` (None: every one; an evaluation passes its questions' own, so a store a
        later round reads is not built for the held-out conversations until they are scored);
        returns what was built."""
        return self.stores.ensure(names, progress, conversations)

    def retriever(self, conversation_id: str, store: str = FACT) -> Retriever:
        """The retriever over one store of a conversation (call `ensure_stores` first)."""
        return self.retrievers[conversation_id] if store == FACT else self.stores.retriever(conversation_id, store)

    def has_store(self, conversation_id: str, store: str) -> bool:
        return store == FACT or self.stores.has(conversation_id, store)

    def store_memories(self, conversation_id: str, store: str = FACT) -> list[MemoryUnit]:
        return self.memories[conversation_id] if store == FACT else self.stores.memories(conversation_id, store)

    def covered(self, conversation_id: str, store: str = FACT) -> set[str]:
        """The turns some memory of one store of a conversation comes from."""
        return self.covered_turns[conversation_id] if store == FACT else self.stores.covered(conversation_id, store)

    def add_memories(self, conversation_id: str, units: list[MemoryUnit]) -> list[MemoryUnit]:
        """Add re-extracted memories to one conversation (only new contents); returns those added."""
        existing = {u.content for u in self.memories[conversation_id]}
        fresh = [u for u in units if u.content not in existing]
        if not fresh:
            return []
        self.memories[conversation_id] = self.memories[conversation_id] + fresh
        self.indexes[conversation_id].add(fresh)
        self.covered_turns[conversation_id].update(t for u in fresh for t in u.source_turn_ids)
        return fresh

    def memory_version(self, conversation_id: str) -> int:
        """Changes whenever the conversation's memories change (re-extraction only adds)."""
        return len(self.memories[conversation_id])

    def prepare(self, questions: list[Question], config: RetrievalConfig | None = None) -> None:
        """Batch-embed every question (and, given the config, its late-interaction scores and, with
        offline roles, its sub-queries) up front, for the fact store and every other store built so
        far (the embedding cache makes repeats cheap). A model's decompositions are left to the
        answer path, which asks them concurrently."""
        decompose = not self.roles.uses_llm
        by_conv: dict[str, list[Question]] = {}
        for q in questions:
            by_conv.setdefault(q.conversation_id, []).append(q)
        for conv_id, qs in by_conv.items():
            self.retrievers[conv_id].prepare(qs, config, decompose=decompose)
            for _, _, retriever in self.stores.of_conversation(conv_id):
                retriever.prepare(qs, config, decompose=decompose)

    # ---- derived data later rounds reuse ------------------------------------------------------
    def memo(self, key: str, make: Callable[[], T]) -> T:
        """A value derived from this workspace, made once and kept as long as it lives (e.g. the
        answer path's plug-ins with the refresher's memoised rewrites)."""
        with self._memo_lock:
            if key not in self._memo:
                self._memo[key] = make()
            return self._memo[key]  # type: ignore[return-value]

    def raw_unit_by_turn(self, conversation_id: str) -> dict[str, MemoryUnit]:
        """turn id → its raw unit (the raw store never changes once built)."""

        def make() -> dict[str, MemoryUnit]:
            found: dict[str, MemoryUnit] = {}
            for unit in self.store_memories(conversation_id, RAW):
                for turn_id in unit.source_turn_ids:
                    found.setdefault(turn_id, unit)
            return found

        return self.memo(f"raw-by-turn:{conversation_id}", make)

    def turn_neighbours(self, conversation_id: str) -> dict[str, tuple[str, ...]]:
        """turn id → the turns just before and after it in its session."""

        def make() -> dict[str, tuple[str, ...]]:
            found: dict[str, tuple[str, ...]] = {}
            for session in self.dataset.conversations[conversation_id].sessions:
                ids = [t.turn_id for t in session.turns]
                for i, turn_id in enumerate(ids):
                    found[turn_id] = tuple(ids[j] for j in (i - 1, i + 1) if 0 <= j < len(ids))
            return found

        return self.memo(f"neighbours:{conversation_id}", make)
