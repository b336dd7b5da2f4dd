"""Per-token vectors of the sentence embedder, cached on disk by content hash.

Late interaction (retrieval/late_interaction.py) compares every content word of a question with
every token of a memory, so it needs the embedder's token outputs rather than its pooled
sentence vector. They come from the same model (no second model to download) and are computed
once per memory text, ever: shards under `<embedding cache>/tokens/<model-slug>[@<backend>]/`
(`<id>.keys.npy`, `<id>.lengths.npy`, `<id>.vectors.npy`, float16), each written atomically
with the keys last, so a crash leaves no half shard.

What is kept of a text:
- a memory keeps every token but the model's special ones ([CLS], [SEP], <s>, …): the context of
  a word is part of its vector, and dropping a memory's function words cost recall on dev;
- a question keeps only its content pieces (no specials, punctuation or stopwords): "what",
  "did" and "?" match every memory equally well and only blur the comparison.

A benchmark's questions are the same in every run, so evaluation keeps their vectors on disk too
(`questions-<rule>/` beside the memories' shards, float32 as they are used, the folder named by
the content-piece rule so a changed stopword list never reads stale ones): a warm run that reads
the late view asks the model nothing. A server's queries (`query_forward` given) stay in memory: it
would leave a file per query on disk.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from evolvemem.contracts.memory import content_hash
from evolvemem.paths import cache_dir
from evolvemem.retrieval.memo import BoundedMemo

if TYPE_CHECKING:
    from evolvemem.retrieval.embeddings import Embedder

_KEY_DTYPE = "S24"
_PIECE_MARKERS = ("##", "Ġ", "▁")  # WordPiece continuation, byte-level BPE and SentencePiece word starts


def _stopwords() -> frozenset[str]:
    from evolvemem.memory.nlp import STOPWORDS

    return frozenset(STOPWORDS)


def content_piece(piece: str, stopwords: frozenset[str]) -> bool:
    """Whether a tokenizer piece carries meaning for matching: a continuation piece always does
    (it ends a longer word), a word piece unless it is punctuation or a stopword."""
    if piece.startswith("##"):
        return True
    word = piece
    for marker in _PIECE_MARKERS:
        word = word.replace(marker, "")
    word = word.lower()
    return any(ch.isalnum() for ch in word) and word not in stopwords


class TokenVectors:
    """L2-normalised float32 token vectors of texts, from `embedder`'s model, cached on disk."""

    def __init__(
        self,
        embedder: Embedder,
        cache_root: Path | None = None,
        query_forward: Callable[[list[str]], list[np.ndarray]] | None = None,
    ):
        """`query_forward` gives questions' raw token outputs (a server passes the forward pass
        that already made their sentence vectors); by default the model runs again for them."""
        from evolvemem.retrieval.embeddings import cache_slug

        self._embedder = embedder
        root = cache_root if cache_root is not None else cache_dir() / "embeddings" / "tokens"
        self.folder = Path(root) / cache_slug(embedder.model_name, embedder.backend)
        self._memories = _Shards(self.folder)
        # a server's queries: this process only; evaluation's questions: on disk as well
        self._question_shards = None if query_forward else _Shards(self.folder / f"questions-{question_rule_key()}")
        self._queries: BoundedMemo[str, np.ndarray] = BoundedMemo()
        self._query_forward = query_forward or self._forward
        self._lock = threading.RLock()
        self.texts_encoded = 0  # memories that reached the model (cache misses)
        self.queries_encoded = 0  # questions that reached the model

    # ------------------------------------------------------------------ memories (cached)
    def of_memories(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token vectors (special tokens dropped) of each text; only unseen texts reach the model."""
        keys = [content_hash(t).encode("ascii") for t in texts]
        with self._lock:
            rows = self._memories.loaded()
            missing = {k: t for k, t in zip(keys, texts) if k not in rows}
            if missing:
                self._memories.add(
                    list(missing), [self._memory_tokens(v) for v in self._forward(list(missing.values()))]
                )
                self.texts_encoded += len(missing)
            return [rows[k].astype(np.float32) for k in keys]

    def remember_outputs(self, outputs: dict[bytes, np.ndarray]) -> None:
        """Keep memories' raw token outputs (by content hash) that a sentence pass produced anyway
        (Embedder.encode_memories), so late interaction never runs the model for them again."""
        with self._lock:
            rows = self._memories.loaded()
            fresh = {k: self._memory_tokens(v) for k, v in outputs.items() if k not in rows}
            if fresh:
                self._memories.add(list(fresh), list(fresh.values()))

    # ------------------------------------------------------------------ questions (memoised)
    def of_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Vectors of each question's content pieces (all non-special pieces if none is content);
        a question seen before in this process (or, in evaluation, in an earlier one) is not
        encoded again."""
        with self._lock:
            todo = {t: content_hash(t).encode("ascii") for t in texts if t not in self._queries}
            if todo and self._question_shards is not None:
                stored = self._question_shards.loaded()
                self._queries.update((t, stored[k]) for t, k in todo.items() if k in stored)
                todo = {t: k for t, k in todo.items() if k not in stored}
            if todo:
                vectors = self._encode_queries(list(todo))
                self.queries_encoded += len(todo)
                if self._question_shards is not None:
                    self._question_shards.add(list(todo.values()), vectors)
                self._queries.update(zip(todo, vectors))
            return [self._queries[t] for t in texts]

    def _encode_queries(self, texts: list[str]) -> list[np.ndarray]:
        encoder = self._embedder.encoder
        outputs = self._query_forward(texts)
        stopwords = _stopwords()
        special = encoder.special_ids
        out = []
        for text, vectors in zip(texts, outputs):
            with self._embedder.model_lock:  # the tokenizer is the model's: a served query may be using it
                ids = encoder.token_ids(text)[: len(vectors)]
                pieces = encoder.pieces(ids)
            keep = np.array([i not in special and content_piece(p, stopwords) for i, p in zip(ids, pieces)], bool)
            if not keep.any():
                keep = np.array([i not in special for i in ids], bool)
            if not keep.any():
                keep[:] = True
            out.append(_unit_rows(vectors[: len(keep)][keep]))
        return out

    # ------------------------------------------------------------------ model and disk
    def _forward(self, texts: list[str]) -> list[np.ndarray]:
        encoder = self._embedder.encoder
        with self._embedder.model_lock:
            return encoder.token_outputs(texts, self._embedder.batch_size)

    def _memory_tokens(self, vectors: np.ndarray) -> np.ndarray:
        """Drop the first and last vector (the model's [CLS]/[SEP] or <s>/</s>) when the text had
        tokens of its own between them."""
        body = vectors[1:-1] if len(vectors) > 2 else vectors
        return _unit_rows(body).astype(np.float16)

    def forget(self, keys: set[bytes]) -> None:
        """Drop the token vectors of these content hashes, in memory and in every shard on disk
        (a shard holding one is rewritten without it, then removed)."""
        with self._lock:
            self._memories.forget(keys)
            if self._question_shards is not None:
                self._question_shards.forget(keys)
                self._queries.clear()  # a forgotten text is never served from this process's memo


@functools.cache
def question_rule_key() -> str:
    """A short hash of what decides which pieces of a question are kept (the stopword list and the
    piece markers): the on-disk question vectors of another rule are never read."""
    rule = "\n".join([*sorted(_stopwords()), *_PIECE_MARKERS])
    return hashlib.sha256(rule.encode()).hexdigest()[:12]


class _Shards:
    """Variable-length vector rows by key in one folder, mirrored in memory: shards of
    `<id>.keys.npy`, `<id>.lengths.npy` and `<id>.vectors.npy`, each written atomically, keys last
    (their presence marks a whole shard)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.rows: dict[bytes, np.ndarray] = {}
        self._loaded = False

    def loaded(self) -> dict[bytes, np.ndarray]:
        """The rows, read from disk on first use."""
        if not self._loaded:
            for keys_path in sorted(self.folder.glob("*.keys.npy")):
                stem = keys_path.name[: -len(".keys.npy")]
                try:
                    keys = np.load(keys_path)
                    lengths = np.load(self.folder / f"{stem}.lengths.npy")
                    flat = np.load(self.folder / f"{stem}.vectors.npy")
                except (OSError, ValueError):
                    continue  # unreadable or half-removed: those texts are encoded again
                if len(keys) != len(lengths) or int(lengths.sum()) != len(flat):
                    continue
                self.rows.update(zip(keys.tolist(), np.split(flat, np.cumsum(lengths)[:-1])))
            self._loaded = True
        return self.rows

    def add(self, keys: list[bytes], vectors: list[np.ndarray]) -> None:
        """New rows, written as one shard and kept in memory."""
        self._write(keys, vectors)
        self.loaded().update(zip(keys, vectors))

    def forget(self, keys: set[bytes]) -> None:
        for key in keys:
            self.rows.pop(key, None)
        for keys_path in sorted(self.folder.glob("*.keys.npy")) if self.folder.is_dir() else []:
            stem = keys_path.name[: -len(".keys.npy")]
            try:
                stored = np.load(keys_path).tolist()
                if not keys.intersection(stored):
                    continue
                lengths = np.load(self.folder / f"{stem}.lengths.npy")
                flat = np.load(self.folder / f"{stem}.vectors.npy")
            except (OSError, ValueError):
                continue
            rows = np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else []
            kept = [(k, v) for k, v in zip(stored, rows) if k not in keys]
            if kept:
                self._write([k for k, _ in kept], [v for _, v in kept])
            for name in ("keys", "lengths", "vectors"):  # keys first: a shard without keys is never read
                (self.folder / f"{stem}.{name}.npy").unlink(missing_ok=True)

    def _write(self, keys: list[bytes], vectors: list[np.ndarray]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        stem = uuid.uuid4().hex
        arrays = (
            ("vectors", np.concatenate(vectors) if vectors else np.zeros((0, 1), np.float16)),
            ("lengths", np.array([len(v) for v in vectors], np.int64)),
            ("keys", np.array(keys, dtype=_KEY_DTYPE)),
        )  # keys last: their presence marks a whole shard
        for name, array in arrays:
            final = self.folder / f"{stem}.{name}.npy"
            tmp = self.folder / f".{stem}.{name}.npy.tmp"
            with open(tmp, "wb") as handle:
                np.save(handle, array)
            os.replace(tmp, final)


def _unit_rows(vectors: Any) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    unit: np.ndarray = array / np.maximum(norms, 1e-12)
    return unit
