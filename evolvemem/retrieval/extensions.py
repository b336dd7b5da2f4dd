"""Extension point for retrieval mechanisms that add candidate views (scenes, cue graphs, …).

A mechanism module exposes `SOURCE`, an object with `name`, `enabled(config) -> bool` and
`hits(request, cache) -> (list[ViewHits], Usage)`. The retriever calls every enabled source
after its built-in views and fuses what they return like any other view. `cache` is a dict
private to (source, index state): build per-conversation structures there once, lazily — it is
dropped when re-extraction changes the index. The composition root hands the retriever its
sources (`evolvemem.mechanisms.candidate_sources()`, passed by the workspace): retrieval never
loads a mechanism by name. Its dimensions live in action_space/ like every other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

import numpy as np

from evolvemem.data.models import Question
from evolvemem.retrieval.fusion import ViewHits
from evolvemem.retrieval.source_cache import SourceCache
from evolvemem.contracts.usage import Usage

if TYPE_CHECKING:
    from evolvemem.llm.client import LLMClient
    from evolvemem.retrieval.index import IndexState
    from evolvemem.space.config import RetrievalConfig


@dataclass(frozen=True)
class ViewRequest:
    """What a candidate source may read for one question."""

    state: IndexState  # memories, embeddings, keyword, structured, ...
    question: Question
    tokens: tuple[str, ...]  # the question's keyword tokens
    terms: tuple[str, ...]  # the question's persons / locations / entities, lowercased
    query_vector: np.ndarray  # the question's unit embedding
    config: RetrievalConfig  # the effective config
    embed: Callable[[Sequence[str]], np.ndarray]  # cached embedding of extra texts
    keyword_scores: Callable[[Sequence[str]], np.ndarray]  # BM25 scores of every memory for tokens
    llm: LLMClient | None = None  # the answer role's client, or None with offline roles (use the offline variant)


class CandidateSource(Protocol):
    name: str

    def enabled(self, config: RetrievalConfig) -> bool: ...

    def hits(self, request: ViewRequest, cache: SourceCache) -> tuple[list[ViewHits], Usage]: ...
