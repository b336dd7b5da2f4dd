"""One conversation of a workspace, packed for another process (a Ray worker) and unpacked there."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.data.models import Dataset
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.retrieval.index import ConversationIndex, IndexState
from evolvemem.retrieval.rerank import CrossEncoderReranker
from evolvemem.retrieval.second_embedder import SecondEmbedder
from evolvemem.roles.factory import Roles
from evolvemem.workspace.core import Workspace


@dataclass(frozen=True)
class ConversationPack:
    """One conversation of a workspace as another process needs it to answer its questions
    exactly as this one would: the conversation (its questions typed as this run typed them),
    its memories, and the built index of every memory store, embeddings included — a worker
    neither extracts nor embeds a memory. `key` names the content: equal keys, equal packs."""

    key: str
    dataset: Dataset
    memories: tuple[MemoryUnit, ...]  # the fact store, as `memory_version` counts it
    fact_index: IndexState
    stores: dict[str, tuple[tuple[MemoryUnit, ...], IndexState]]  # other built stores


def pack_conversation(ws: Workspace, conversation_id: str) -> ConversationPack:
    """Conversation `conversation_id` with its memories and every store built so far."""
    stores = {
        name: (tuple(units), retriever.index.state)
        for name, units, retriever in ws.stores.of_conversation(conversation_id)
    }
    dataset = ws.dataset.subset({conversation_id})
    digest = hashlib.sha256(
        repr(
            (
                ws.dataset.content_hash,
                conversation_id,
                ws.memory_version(conversation_id),
                sorted(stores),
                ws.embedder.vectors_key,
                [(q.question_id, q.question_type) for q in dataset.questions],
            )
        ).encode()
    )
    return ConversationPack(
        digest.hexdigest()[:24], dataset, tuple(ws.memories[conversation_id]), ws.indexes[conversation_id].state, stores
    )


def workspace_from_pack(
    pack: ConversationPack,
    roles: Roles,
    embedder: Embedder,
    reranker: CrossEncoderReranker | None = None,
    second_embedder: SecondEmbedder | None = None,
) -> Workspace:
    """A workspace of the pack's one conversation, its indexes as the pack holds them (the
    embedder embeds questions: one per process reads its on-disk cache once; a second embedding
    model's memory vectors are not packed: they come from that model's cache by content)."""
    ws = Workspace(pack.dataset, roles, embedder=embedder, reranker=reranker, second_embedder=second_embedder)
    (conversation_id,) = pack.dataset.conversations
    speakers = pack.dataset.conversations[conversation_id].speakers
    ws.memories[conversation_id] = list(pack.memories)
    ws.index_conversation(conversation_id, ConversationIndex(pack.fact_index, ws.embedder, speakers))
    for name, (units, state) in pack.stores.items():
        retriever = ws.retriever_on(conversation_id, ConversationIndex(state, ws.embedder, speakers))
        ws.stores.put(name, conversation_id, list(units), retriever)
    ws.stats.memories = len(pack.memories)
    return ws
