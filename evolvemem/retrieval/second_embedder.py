"""A second embedding model: its own dense view of every memory, fused beside the first.

Why a view and not a swap: which sentence model ranks a user's memories best depends on their
text, so the model is a dimension the loop can try — with `semantic_top_k = 0` and
`second_semantic_top_k > 0` the run has switched embedding model; with both on it fuses the two.
The view covers the question itself (entity swap, sub-queries and reflection keep the first model).

Memory vectors are an index beside the first one, cached on disk by (model, content hash) like
the first (`Embedder`): a round, a re-extraction or a reopened served store embeds only texts it
has never seen. Question vectors go through `queries`, which a server replaces with its batching
encoder (serving/embedding.py) so queries are not written to the disk cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

import numpy as np

from evolvemem.contracts.local_models import Encoder
from evolvemem.errors import ConfigError
from evolvemem.retrieval.embeddings import Embedder

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig

VIEW = "second_semantic_top_k"  # the dimension that turns the view on


class TextEncoder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class SecondEmbedder:
    """The second model's vectors: of memory contents (cached on disk) and of questions."""

    def __init__(self, embedder: Embedder, queries: TextEncoder | None = None):
        self.embedder = embedder
        self.queries: TextEncoder = queries if queries is not None else embedder

    @property
    def model_name(self) -> str:
        return self.embedder.model_name

    @property
    def texts_embedded(self) -> int:
        """Memory (and, outside a server, question) texts that reached the model: cache misses."""
        return self.embedder.texts_embedded

    def of_memories(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of memory contents; only texts the cache lacks reach the model."""
        return self.embedder.encode(texts)

    def of_questions(self, texts: Sequence[str]) -> np.ndarray:
        return self.queries.encode(texts)


NO_SECOND_EMBEDDER = (
    "the config turns on the second dense view (second_semantic_top_k > 0) but no second embedding model "
    "was given: pass --second-embedding-model PATH_OR_NAME, or set second_semantic_top_k = 0"
)


def uses_second_view(config: RetrievalConfig) -> bool:
    """Whether `config`, one of its per-type overrides or a lever it switches on turns the view on."""
    return any(config.for_type(qtype).second_semantic_top_k > 0 for qtype in (None, *config.overrides()))


def require_second_embedder(config: RetrievalConfig, second: SecondEmbedder | None) -> None:
    """Refuse in one line a config that uses the second dense view when there is no second model:
    its figures (or a served context) would silently lack the view (entry points call it through
    stage_models)."""
    if second is None and uses_second_view(config):
        raise ConfigError(NO_SECOND_EMBEDDER)


def load_second_embedder(model: str | None, encoder: Encoder | None = None) -> SecondEmbedder | None:
    """The second embedding model `model` names on `encoder` (the first model's backend), loaded
    now so a wrong one fails before any work (None: none)."""
    if not model:
        return None
    embedder = Embedder(model, encoder=encoder)
    _ = embedder.encoder  # a ConfigError in one line when it cannot be loaded
    return SecondEmbedder(embedder)
