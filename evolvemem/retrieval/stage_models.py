"""The one check every entry point makes before it retrieves with a config: a stage the config
turns on whose model is missing (a cross-encoder, a second embedding model) is refused in one line,
because its figures — or a served context — would silently lack that stage."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evolvemem.retrieval.rerank import CrossEncoderReranker, require_reranker
from evolvemem.retrieval.second_embedder import SecondEmbedder, require_second_embedder

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig


def require_stage_models(
    config: RetrievalConfig, reranker: CrossEncoderReranker | None, second_embedder: SecondEmbedder | None
) -> None:
    """Raise ConfigError (one line) for the first stage of `config` whose model is None."""
    require_reranker(config, reranker)
    require_second_embedder(config, second_embedder)
