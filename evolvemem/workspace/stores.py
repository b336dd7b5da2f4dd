"""The memory stores of a workspace beside its `fact` store (memory/stores.py: raw turns, episodes,
RecMem's recurrence store): each built for every conversation the first time a config needs it,
loaded from the memory cache when it can be, and never changed afterwards."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Collection

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.memory.consolidate import decay_importance
from evolvemem.memory.store_cache import load_or_extract
from evolvemem.memory.stores import FACT, store_extractor
from evolvemem.retrieval.retriever import Retriever

if TYPE_CHECKING:
    from evolvemem.workspace.core import Workspace

ProgressFn = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass(frozen=True)
class StoreBuilt:
    """One store built for a round's config: its name, conversations and wall time (the round line
    says it, so a slow round is explained by the store it built rather than hidden in its time)."""

    name: str
    conversations: int
    seconds: float

    def describe(self) -> str:
        return f"{self.name} store built ({self.conversations} conversations, {self.seconds:.1f}s)"


class MemoryStores:
    """(store, conversation id) -> its memories, their retriever and the turns they come from."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._built: dict[tuple[str, str], tuple[list[MemoryUnit], Retriever, set[str]]] = {}
        self._lock = threading.Lock()

    def ensure(
        self, names: set[str], progress: ProgressFn | None = None, conversations: Collection[str] | None = None
    ) -> list[StoreBuilt]:
        """Build (or load from the memory cache) every store in `names` not built yet, for each of
        `conversations` (None: every one); returns what was built. Their extraction cost is added
        to the workspace's setup stats."""
        ws = self.ws
        built: list[StoreBuilt] = []
        wanted = [
            c for c in ws.dataset.conversations.values() if conversations is None or c.conversation_id in conversations
        ]
        with self._lock:
            for name in sorted(set(names) - {FACT}):
                todo = [c for c in wanted if (name, c.conversation_id) not in self._built]
                if not todo:
                    continue
                started = time.perf_counter()
                extractor = store_extractor(name, ws.roles.extract_client, ws.embedder)
                # shown at once: the first conversation of a store like `episode` can take minutes
                label = f"building the {name} memory store (once per run, then cached)"
                if progress:
                    progress(label, 0, len(todo))
                for i, conv in enumerate(todo):
                    units, cost, _ = load_or_extract(extractor, conv)
                    last = max((s.timestamp for s in conv.sessions if s.timestamp), default=None)
                    # each store consolidates in its own way (raw: never); only the decay is shared
                    units = decay_importance(units, last) if last is not None else units
                    self.put(name, conv.conversation_id, units, ws.retriever_over(conv.conversation_id, units))
                    ws.stats.usage = ws.stats.usage + cost
                    if progress:
                        progress(label, i + 1, len(todo))
                built.append(StoreBuilt(name, len(todo), time.perf_counter() - started))
        return built

    def put(self, name: str, conversation_id: str, units: list[MemoryUnit], retriever: Retriever) -> None:
        self._built[(name, conversation_id)] = (units, retriever, {t for u in units for t in u.source_turn_ids})

    def has(self, conversation_id: str, store: str) -> bool:
        return (store, conversation_id) in self._built

    def _entry(self, conversation_id: str, store: str) -> tuple[list[MemoryUnit], Retriever, set[str]]:
        try:
            return self._built[(store, conversation_id)]
        except KeyError:
            raise RuntimeError(
                f"memory store {store!r} of {conversation_id} was not built; call ensure_stores first"
            ) from None

    def retriever(self, conversation_id: str, store: str) -> Retriever:
        return self._entry(conversation_id, store)[1]

    def memories(self, conversation_id: str, store: str) -> list[MemoryUnit]:
        return self._entry(conversation_id, store)[0]

    def covered(self, conversation_id: str, store: str) -> set[str]:
        return self._entry(conversation_id, store)[2]

    def of_conversation(self, conversation_id: str) -> list[tuple[str, list[MemoryUnit], Retriever]]:
        """(store, memories, retriever) of every store built for one conversation, by store name."""
        return [
            (name, units, retriever)
            for (name, conv_id), (units, retriever, _) in sorted(self._built.items())
            if conv_id == conversation_id
        ]
