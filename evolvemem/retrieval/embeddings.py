"""Sentence embeddings with an on-disk cache keyed by (model, encoder backend, content hash).

A run embeds every memory once, ever: vectors are stored per model and backend under
`cache_dir()/embeddings/<model-slug>[@<backend>]/` as shards (`<id>.vectors.npy` + `<id>.keys.npy`), each
written atomically, so concurrent processes never clash and a crash leaves no half shard. Many
small shards are compacted into one when the cache is opened, so loading ~10k vectors takes
milliseconds. `forget` rewrites the shards holding given contents without them (a served memory
forgetting a user leaves no vector of its memories behind). Only texts missing from the cache reach the model, and the model itself (and
its runtime) is loaded only when the first such text appears (retrieval/encoder.py).
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from evolvemem.contracts.local_models import Encoder, default_encoder
from evolvemem.contracts.memory import content_hash
from evolvemem.paths import cache_dir
from evolvemem.retrieval.encoder import SentenceEncoder, load_encoder
from evolvemem.retrieval.model_files import BUNDLED_NAMES as BUNDLED_NAMES
from evolvemem.retrieval.model_files import DEFAULT_EMBEDDING_MODEL as DEFAULT_EMBEDDING_MODEL
from evolvemem.retrieval.model_files import THREADS_ENV as THREADS_ENV
from evolvemem.retrieval.model_files import bundled_model_path as bundled_model_path
from evolvemem.retrieval.model_files import load_torch_model as load_torch_model
from evolvemem.retrieval.model_files import model_slug as model_slug
from evolvemem.retrieval.model_files import torch_threads as torch_threads
from evolvemem.retrieval.token_vectors import TokenVectors

_KEY_DTYPE = "S24"  # content_hash() is 24 hex characters
_COMPACT_ABOVE = 8  # shards; more than this are merged into one when the cache is opened


def cache_slug(model_name: str, encoder: Encoder) -> str:
    """The cache folder of a model's vectors on one backend: torch keeps the folder it always
    had; the ONNX backends get their own (their vectors differ from torch's in the last bits, or
    more for int8, and one folder holds one backend's vectors)."""
    slug = model_slug(model_name)
    return slug if encoder is Encoder.TORCH else f"{slug}@{encoder.value}"


class _ShardCache:
    """Vectors of one model on disk, mirrored in memory as hash -> row of a shard matrix."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.rows: dict[bytes, np.ndarray] = {}
        self.dimension: int | None = None
        self._loaded = False

    def load(self) -> None:
        if self._loaded:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        shards = sorted(self.folder.glob("*.keys.npy"))
        blocks = [block for block in (self._read(p) for p in shards) if block is not None]
        for keys, vectors in blocks:
            self.remember(keys, vectors)
        if len(blocks) > _COMPACT_ABOVE and self.rows:
            self._compact(shards)
        self._loaded = True

    def _read(self, keys_path: Path) -> tuple[np.ndarray, np.ndarray] | None:
        vectors_path = keys_path.with_name(keys_path.name.replace(".keys.npy", ".vectors.npy"))
        try:
            keys = np.load(keys_path)
            vectors = np.load(vectors_path)
        except (OSError, ValueError):  # removed by a concurrent compaction, or unreadable
            return None
        if vectors.ndim != 2 or len(keys) != len(vectors):
            return None
        return keys, vectors

    def remember(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        if self.dimension is None and len(vectors):
            self.dimension = int(vectors.shape[1])
        if len(vectors) and vectors.shape[1] != self.dimension:
            return  # a shard of another dimension cannot belong to this model; ignore it
        self.rows.update(zip(keys.tolist(), vectors))

    def _compact(self, old_shards: list[Path]) -> None:
        keys = np.array(list(self.rows), dtype=_KEY_DTYPE)
        vectors = np.stack(list(self.rows.values())).astype(np.float32, copy=False)
        self.write(keys, vectors)
        for path in old_shards:
            for stale in (path, path.with_name(path.name.replace(".keys.npy", ".vectors.npy"))):
                stale.unlink(missing_ok=True)

    def forget(self, keys: set[bytes]) -> int:
        """Drop `keys` here and from every shard on disk that holds one (rewritten without them,
        then removed); returns the rows removed from disk."""
        for key in keys:
            self.rows.pop(key, None)
        removed = 0
        for keys_path in sorted(self.folder.glob("*.keys.npy")) if self.folder.is_dir() else []:
            block = self._read(keys_path)
            if block is None:
                continue
            stored, vectors = block
            keep = np.array([key not in keys for key in stored.tolist()], dtype=bool)
            if keep.all():
                continue
            if keep.any():
                self.write(stored[keep], vectors[keep])
            keys_path.unlink(missing_ok=True)  # keys first: a shard without keys is never read
            keys_path.with_name(keys_path.name.replace(".keys.npy", ".vectors.npy")).unlink(missing_ok=True)
            removed += int((~keep).sum())
        return removed

    def write(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Write one shard atomically: vectors first, then keys (whose presence marks it complete)."""
        stem = uuid.uuid4().hex
        for suffix, array in ((".vectors.npy", vectors), (".keys.npy", keys)):
            final = self.folder / f"{stem}{suffix}"
            tmp = self.folder / f".{stem}{suffix}.tmp"
            with open(tmp, "wb") as handle:
                np.save(handle, array)
            os.replace(tmp, final)


class Embedder:
    """L2-normalised float32 sentence embeddings, cached on disk by content hash.

    Thread-safe: one lock guards the cache and another the model, so a caller whose texts are
    cached (a served search) never waits while the model embeds someone else's; concurrent
    callers asking for the same new text embed it once. Lock order: model, then cache."""

    def __init__(
        self,
        model_name: str = DEFAULT_EMBEDDING_MODEL,
        *,
        batch_size: int = 64,
        device: str = "cpu",
        cache_root: Path | None = None,
        encoder: Encoder | None = None,
        keep_memory_tokens: bool = False,
    ):
        """`encoder`: the backend that runs the model (None: `default_encoder()`);
        `keep_memory_tokens`: see `encode_memories` (a workspace turns it on once a config it
        serves reads the late view)."""
        self.model_name = model_name
        self.backend = encoder or default_encoder()
        self.batch_size = batch_size
        self.device = device
        root = cache_root if cache_root is not None else cache_dir() / "embeddings"
        self._cache = _ShardCache(Path(root) / cache_slug(model_name, self.backend))
        self._root = Path(root)
        self._encoder: SentenceEncoder | None = None
        self._lock = threading.RLock()  # the cache
        self._model_lock = threading.RLock()
        self.texts_embedded = 0  # how many texts reached the model (cache misses), for reports
        self._tokens: TokenVectors | None = None
        self.keep_memory_tokens = keep_memory_tokens

    # ------------------------------------------------------------------------------- model
    @property
    def encoder(self) -> SentenceEncoder:
        """The model on this embedder's backend, loaded on first use (once per process)."""
        with self._model_lock:
            if self._encoder is None:
                self._encoder = load_encoder(self.model_name, self.backend, self.device)
            return self._encoder

    @property
    def vectors_key(self) -> str:
        """Names whose vectors these are where a store keeps them beside others' (a served
        memory's vectors table): the model's name on torch, as always; `<model>@<backend>` else."""
        return self.model_name if self.backend is Encoder.TORCH else f"{self.model_name}@{self.backend.value}"

    @property
    def model_lock(self) -> threading.RLock:
        """Held while the model runs (a forward pass on a 2-core machine is not worth running
        twice at once; a torch tokenizer is not safe in two threads)."""
        return self._model_lock

    @property
    def tokens(self) -> TokenVectors:
        """The same model's per-token vectors, cached by content (late interaction reads them)."""
        with self._lock:
            if self._tokens is None:
                self._tokens = self.token_vectors()
            return self._tokens

    def token_vectors(self, query_forward: Callable[[list[str]], list[np.ndarray]] | None = None) -> TokenVectors:
        """Per-token vectors sharing this embedder's disk cache; see TokenVectors for `query_forward`."""
        return TokenVectors(self, self._root / "tokens", query_forward)

    @property
    def dimension(self) -> int:
        with self._lock:
            self._cache.load()
            known = self._cache.dimension
        if known is not None:
            return known
        dimension = self.encoder.dimension  # loaded outside the cache lock
        with self._lock:
            self._cache.dimension = dimension
        return dimension

    # ------------------------------------------------------------------------------- encode
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of `texts` as an (n, d) float32 array with unit-length rows.

        Texts already in the cache (this process or an earlier one) are not re-embedded."""
        return self._vectors(texts, with_tokens=False)

    def encode_memories(self, texts: Sequence[str]) -> np.ndarray:
        """`encode` for memory contents. With `keep_memory_tokens`, a text the model reads here also
        has its token vectors cached from the same forward pass: late interaction reads them, and
        asking for them later ran the model over every memory a second time. Off, nothing else is
        kept (a long memory's token vectors take ~200 KB on disk; a run that never reads them should
        not pay that). Queries go through `encode`: their token vectors are kept differently."""
        return self._vectors(texts, with_tokens=self.keep_memory_tokens)

    def _vectors(self, texts: Sequence[str], *, with_tokens: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        keys = [content_hash(text).encode("ascii") for text in texts]
        outputs: dict[bytes, np.ndarray] = {}
        if self._missing(keys, texts):
            with self._model_lock:
                missing = self._missing(keys, texts)  # another caller may have embedded them meanwhile
                if missing:
                    outputs = self._embed_and_store(missing, with_tokens=with_tokens)
        if outputs:  # outside the model lock: token vectors take their lock first, then the model's
            self.tokens.remember_outputs(outputs)
        with self._lock:
            rows = self._cache.rows
            return np.stack([rows[key] for key in keys])

    def _missing(self, keys: list[bytes], texts: Sequence[str]) -> dict[bytes, str]:
        with self._lock:
            self._cache.load()
            rows = self._cache.rows
            return {key: text for key, text in zip(keys, texts) if key not in rows}

    def _embed_and_store(self, missing: dict[bytes, str], *, with_tokens: bool = False) -> dict[bytes, np.ndarray]:
        """The model's vectors of `missing` (held: the model lock), written to the cache; with
        `with_tokens`, also each text's raw token outputs from the same pass, by key."""
        texts = list(missing.values())
        outputs: list[np.ndarray] = []
        if with_tokens:
            vectors, outputs = self.encoder.sentences_and_tokens(texts, self.batch_size)
        else:
            vectors = self.encoder.sentences(texts, self.batch_size)
        keys = np.array(list(missing), dtype=_KEY_DTYPE)
        with self._lock:
            self._cache.write(keys, vectors)
            self._cache.remember(keys, vectors)
        self.texts_embedded += len(missing)
        return dict(zip(missing, outputs))

    def forget(self, hashes: Iterable[str]) -> int:
        """Remove the vectors (sentence and token) of contents with these hashes from the cache,
        on disk and in memory; returns the sentence vectors removed from disk."""
        keys = {h.encode("ascii") for h in hashes}
        if not keys:
            return 0
        with self._model_lock, self._lock:  # no embedding writes a shard meanwhile
            removed = self._cache.forget(keys)
            tokens = self._tokens or self.token_vectors()
        tokens.forget(keys)  # outside the model lock: token vectors take theirs first, then the model's
        return removed

    def cached(self, text: str) -> bool:
        """Whether `text` would be served from the cache."""
        with self._lock:
            self._cache.load()
            return content_hash(text).encode("ascii") in self._cache.rows
