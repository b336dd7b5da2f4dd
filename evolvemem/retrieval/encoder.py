"""The encoder seam: what indexing, token vectors, queries and serving ask of an embedding model.

Two backends implement it (retrieval/encoder_torch.py, the sentence-transformers reference, and
retrieval/encoder_onnx.py, ONNX Runtime on an export of the same model), and everything that
embeds goes through `Embedder.encoder`, so a run is served by the backend it was evaluated with.
One encoder is loaded per (model, backend, device) in a process and shared."""

from __future__ import annotations

import threading
from typing import Protocol, Sequence

import numpy as np

from evolvemem.contracts.local_models import Encoder


class SentenceEncoder(Protocol):
    """A sentence model behind one backend. Sentence vectors are unit length; token outputs are a
    text's raw per-token vectors (special tokens included, padding cut)."""

    backend: Encoder
    max_length: int  # tokens a text is truncated to
    special_ids: frozenset[int]  # [CLS], [SEP], <s>, ... of the tokenizer
    dimension: int

    def token_ids(self, text: str) -> list[int]:
        """The ids `text` is fed to the model as (truncated, special tokens included)."""
        ...

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """The tokenizer's piece for each id ("##ing", "Ġthe", ...)."""
        ...

    def sentences(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """(n, d) float32 unit sentence vectors."""
        ...

    def token_outputs(self, texts: Sequence[str], batch_size: int) -> list[np.ndarray]:
        """Each text's (tokens, d) float32 raw token outputs."""
        ...

    def sentences_and_tokens(self, texts: Sequence[str], batch_size: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """Both from one forward pass (a served query needs both; asking twice ran the model twice)."""
        ...

    def worker_copy(self) -> SentenceEncoder:
        """An encoder another thread may run at the same time as this one."""
        ...


_LOADED: dict[tuple[str, Encoder, str], SentenceEncoder] = {}
_LOAD_LOCK = threading.Lock()


def load_encoder(model_name: str, backend: Encoder, device: str = "cpu") -> SentenceEncoder:
    """The encoder of `model_name` on `backend`, loaded once per process; a model that cannot be
    loaded is a ConfigError in one line."""
    key = (model_name, backend, device)
    with _LOAD_LOCK:
        if key not in _LOADED:
            _LOADED[key] = _load(model_name, backend, device)
        return _LOADED[key]


def _load(model_name: str, backend: Encoder, device: str) -> SentenceEncoder:
    if backend is Encoder.TORCH:
        from evolvemem.retrieval.encoder_torch import TorchEncoder

        return TorchEncoder.load(model_name, device)
    from evolvemem.retrieval.encoder_onnx import OnnxEncoder

    return OnnxEncoder.load(model_name, int8=backend is Encoder.ONNX_INT8)


def forget_loaded() -> None:
    """Drop the encoders loaded in this process (a test that changed a model's files on disk)."""
    with _LOAD_LOCK:
        _LOADED.clear()
