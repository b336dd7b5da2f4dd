"""`LocalModels`: the sentence-transformers models a workspace loads beside the LLM roles, and
the encoder backend that runs the embedding models.

They travel together from the command line through a run's spec, its workspace and its Ray workers
to `evolve transfer` and `evolve serve`, which fall back to the models a run evolved with: a
config's dense weights were tuned against that embedding model, and its rerank and second-view
levers exist only with their models. A run's manifest keeps them as flat keys (`embedding_model`,
`rerank_model`, `second_embedding_model`, and `encoder` since the ONNX backend exists)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from evolvemem.errors import ConfigError

SPEC_KEYS = ("embedding_model", "rerank_model", "second_embedding_model", "encoder")
DEFAULT_MARK = "default"  # what an eval manifest writes for the default embedding model
ENCODER_ENV = "EVOLVEMEM_ENCODER"


class Encoder(str, Enum):
    """What runs an embedding model. `torch` is sentence-transformers itself (the reference);
    `onnx` an fp32 ONNX export of the same model run by ONNX Runtime (vectors equal to torch's
    within float32 rounding); `onnx-int8` that export quantised to int8 (faster, vectors differ
    in the second decimal, so it keeps its own embedding cache)."""

    TORCH = "torch"
    ONNX = "onnx"
    ONNX_INT8 = "onnx-int8"


def default_encoder() -> Encoder:
    """`EVOLVEMEM_ENCODER` if set, else `onnx` where ONNX Runtime and onnx are installed (the same
    retrieval, a fraction of the time), else `torch`."""
    named = os.environ.get(ENCODER_ENV, "").strip()
    if named:
        return encoder_named(named, ENCODER_ENV)
    have_onnx = all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))
    return Encoder.ONNX if have_onnx else Encoder.TORCH


def encoder_named(name: str, where: str = "--encoder") -> Encoder:
    """The backend `name` names; anything else is refused in one line."""
    try:
        return Encoder(name.strip().lower())
    except ValueError:
        known = ", ".join(e.value for e in Encoder)
        raise ConfigError(f"{where}: unknown encoder {name!r} (one of: {known})") from None


@dataclass(frozen=True)
class LocalModels:
    """A local folder or a cached model name for each; None: the default embedding model, no
    rerank stage, no second dense view, the default encoder (`default_encoder()`)."""

    embedding: str | None = None
    rerank: str | None = None  # a CrossEncoder; its levers (rerank_top_k, ...) join the space only with one
    second_embedding: str | None = None  # the second dense view's model (second_semantic_top_k, ...)
    encoder: Encoder | None = None  # what runs the embedding models (both dense views)

    @classmethod
    def from_spec(cls, spec: Mapping[str, object]) -> LocalModels:
        """The models a manifest (or its spec) names; absent, empty or `default`: None. A manifest
        written before the encoder setting existed (it names the models but no encoder) was
        embedded by torch, the only backend then, so that is what its eval and serving use."""
        embedding, rerank, second = (
            value if isinstance(value, str) and value not in ("", DEFAULT_MARK) else None
            for value in (spec.get(k) for k in SPEC_KEYS[:3])
        )
        recorded = spec.get("encoder")
        encoder: Encoder | None = None
        if isinstance(recorded, str) and recorded:
            encoder = encoder_named(recorded, "the run's manifest")
        elif "embedding_model" in spec:
            encoder = Encoder.TORCH
        return cls(embedding, rerank, second, encoder)

    def as_spec(self) -> dict[str, str | None]:
        """The flat keys a manifest stores; the encoder resolved (a run records what it used)."""
        values = (self.embedding, self.rerank, self.second_embedding, self.resolved_encoder().value)
        return dict(zip(SPEC_KEYS, values, strict=True))

    def resolved_encoder(self) -> Encoder:
        """The encoder named here, else the default."""
        return self.encoder or default_encoder()

    def or_else(self, fallback: LocalModels) -> LocalModels:
        """Each model given here, else `fallback`'s (a run's own, for transfer and serving)."""
        return LocalModels(
            self.embedding or fallback.embedding,
            self.rerank or fallback.rerank,
            self.second_embedding or fallback.second_embedding,
            self.encoder or fallback.encoder,
        )
