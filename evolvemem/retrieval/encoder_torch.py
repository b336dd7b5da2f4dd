"""The reference backend: sentence-transformers on torch, exactly as the embedder always ran it
(same calls, same options), so torch runs keep their vectors bit for bit."""

from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np

from evolvemem.contracts.local_models import Encoder
from evolvemem.retrieval.model_files import load_torch_model, model_source


class TorchEncoder:
    """A SentenceTransformer behind the SentenceEncoder protocol."""

    backend = Encoder.TORCH

    def __init__(self, model: Any):
        self.model = model
        self.max_length = int(model.max_seq_length)
        self.special_ids = frozenset(int(i) for i in model.tokenizer.all_special_ids)
        # sentence-transformers 6 renamed the method (the old name warns)
        measure = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dimension = int(measure())

    @classmethod
    def load(cls, model_name: str, device: str = "cpu", *, attention: str | None = None) -> TorchEncoder:
        """`attention`: the transformers attention implementation to build the model with (the
        ONNX export asks for "eager"); None: the library's default."""
        source = model_source(model_name)
        options: dict[str, Any] = {"model_kwargs": {"attn_implementation": attention}} if attention else {}

        def build() -> Any:
            from sentence_transformers import SentenceTransformer

            return SentenceTransformer(source, device=device, **options)

        model = load_torch_model(
            build,
            f"embedding model {model_name!r}",
            "cannot be loaded (not cached locally and no download possible?)",
        )
        return cls(model)

    def token_ids(self, text: str) -> list[int]:
        return list(self.model.tokenizer(text, truncation=True, max_length=self.max_length)["input_ids"])

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return list(self.model.tokenizer.convert_ids_to_tokens(list(ids)))

    def sentences(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        vectors = self.model.encode(
            list(texts),
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors).astype(np.float32, copy=False)

    def token_outputs(self, texts: Sequence[str], batch_size: int) -> list[np.ndarray]:
        tensors = self.model.encode(
            list(texts),
            output_value="token_embeddings",
            batch_size=batch_size,
            convert_to_numpy=False,
            show_progress_bar=False,
        )
        return [t.detach().cpu().numpy().astype(np.float32) for t in tensors]

    def sentences_and_tokens(self, texts: Sequence[str], batch_size: int) -> tuple[np.ndarray, list[np.ndarray]]:
        """Unit sentence vectors equal bit for bit to `sentences` (the same normalisation of the
        same batch tensor), and token outputs cut at the last attended position, as
        `encode(output_value="token_embeddings")` cuts them."""
        import torch

        items = self.model.encode(list(texts), batch_size=batch_size, output_value=None, show_progress_bar=False)
        pooled = torch.nn.functional.normalize(torch.stack([item["sentence_embedding"] for item in items]), p=2, dim=1)
        tokens = []
        for item in items:
            attended = torch.nonzero(item["attention_mask"]).flatten()
            last = int(attended[-1]) if len(attended) else 0
            tokens.append(item["token_embeddings"][: last + 1].detach().cpu().numpy().astype(np.float32))
        return pooled.cpu().numpy().astype(np.float32, copy=False), tokens

    def worker_copy(self) -> TorchEncoder:
        """A deep copy: a SentenceTransformer's tokenizer and modules are not safe in two threads
        at once (the caller holds the original's lock while copying)."""
        return TorchEncoder(copy.deepcopy(self.model))
