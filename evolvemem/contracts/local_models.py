"""`LocalModels`: the sentence-transformers models a workspace loads beside the LLM roles.

They travel together from the command line through a run's spec, its workspace and its Ray workers
to `evolve transfer` and `evolve serve`, which fall back to the models a run evolved with: a
config's dense weights were tuned against that embedding model, and its rerank and second-view
levers exist only with their models. A run's manifest keeps them as three flat keys
(`embedding_model`, `rerank_model`, `second_embedding_model`), as it always has."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SPEC_KEYS = ("embedding_model", "rerank_model", "second_embedding_model")
DEFAULT_MARK = "default"  # what an eval manifest writes for the default embedding model


@dataclass(frozen=True)
class LocalModels:
    """A local folder or a cached model name for each; None: the default embedding model, no
    rerank stage, no second dense view."""

    embedding: str | None = None
    rerank: str | None = None  # a CrossEncoder; its levers (rerank_top_k, ...) join the space only with one
    second_embedding: str | None = None  # the second dense view's model (second_semantic_top_k, ...)

    @classmethod
    def from_spec(cls, spec: Mapping[str, object]) -> LocalModels:
        """The models a manifest (or its spec) names; absent, empty or `default`: None."""
        named = [
            value if isinstance(value, str) and value not in ("", DEFAULT_MARK) else None
            for value in (spec.get(k) for k in SPEC_KEYS)
        ]
        return cls(*named)

    def as_spec(self) -> dict[str, str | None]:
        """The three flat keys a manifest stores."""
        return dict(zip(SPEC_KEYS, (self.embedding, self.rerank, self.second_embedding), strict=True))

    def or_else(self, fallback: LocalModels) -> LocalModels:
        """Each model given here, else `fallback`'s (a run's own, for transfer and serving)."""
        return LocalModels(
            self.embedding or fallback.embedding,
            self.rerank or fallback.rerank,
            self.second_embedding or fallback.second_embedding,
        )
