"""The embedder a served memory hands its indexes and retrievers.

It is evaluation's `Embedder` (same model, same normalisation, same on-disk cache) with two
additions a server needs:

- **memory contents** come from vectors the memory store already holds (`supplying`), so
  reopening a store embeds nothing; only contents the store lacks reach the model.
- **queries** the cache does not know are embedded by one worker thread in batches: concurrent
  searches share one model call instead of queueing for the model lock one by one. Query
  vectors are not written to the on-disk cache (a server would leave a file per query there);
  the last QUERY_CACHE of them are kept in memory, shared by every user.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Iterator, Sequence

import numpy as np

from evolvemem.contracts.memory import content_hash
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.retrieval.token_vectors import TokenVectors

MAX_QUERY_BATCH = 64
QUERY_CACHE = 20_000  # query vectors kept in memory (~30 MB at 384 dimensions), least recently used dropped


class ServingEmbedder:
    """`encode` as the index and the retriever call it; see the module docstring."""

    def __init__(self, inner: Embedder):
        self.inner = inner
        self.model_name = inner.model_name
        self._local = threading.local()
        self._pending: list[tuple[str, Future]] = []
        self._pending_lock = threading.Condition()
        self._worker: threading.Thread | None = None
        self._closed = False
        self.query_batches = 0  # model calls made for queries (for metrics and benchmarks)
        self.queries_embedded = 0
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()
        self._recent_lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def tokens(self) -> TokenVectors:
        """Per-token vectors for late interaction: evaluation's, cached on disk by content."""
        return self.inner.tokens

    @contextlib.contextmanager
    def supplying(self, vectors: dict[str, np.ndarray]) -> Iterator[None]:
        """Within the block (this thread), contents whose hash is in `vectors` use that vector."""
        previous = getattr(self._local, "known", None)
        self._local.known = vectors
        try:
            yield
        finally:
            self._local.known = previous

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        known: dict[str, np.ndarray] | None = getattr(self._local, "known", None)
        if known is not None:  # building an index: memory contents
            hashes = [content_hash(t) for t in texts]
            missing = list(dict.fromkeys(t for t, h in zip(texts, hashes) if h not in known))
            if missing:
                for text, vector in zip(missing, self.inner.encode(missing)):
                    known[content_hash(text)] = vector
            return np.stack([known[h] for h in hashes]).astype(np.float32, copy=False)
        return self._encode_queries(texts)

    def embed_contents(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors of memory contents by content hash (evaluation's cache first, then the model)."""
        unique = list(dict.fromkeys(texts))
        if not unique:
            return {}
        return {content_hash(t): v for t, v in zip(unique, self.inner.encode(unique))}

    # ---- queries --------------------------------------------------------------------------------
    def _encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        vectors: dict[str, np.ndarray] = {}
        with self._recent_lock:
            for text in texts:
                if text in self._recent:
                    self._recent.move_to_end(text)
                    vectors[text] = self._recent[text]
        cached = [t for t in texts if t not in vectors and self.inner.cached(t)]
        if cached:
            vectors.update(zip(cached, self.inner.encode(cached)))
        futures = [(t, self._submit(t)) for t in dict.fromkeys(t for t in texts if t not in vectors)]
        for text, future in futures:
            vectors[text] = future.result()
        with self._recent_lock:
            for text in texts:
                self._recent[text] = vectors[text]
                self._recent.move_to_end(text)
            while len(self._recent) > QUERY_CACHE:
                self._recent.popitem(last=False)
        return np.stack([vectors[t] for t in texts])

    def _submit(self, text: str) -> Future:
        future: Future = Future()
        with self._pending_lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="evolvemem-query-embedder", daemon=True)
                self._worker.start()
            self._pending.append((text, future))
            self._pending_lock.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._pending_lock:
                while not self._pending and not self._closed:
                    self._pending_lock.wait()
                if self._closed and not self._pending:
                    return
                batch, self._pending = self._pending[:MAX_QUERY_BATCH], self._pending[MAX_QUERY_BATCH:]
            texts = list(dict.fromkeys(t for t, _ in batch))
            try:
                model = self.inner.model
                with self.inner._lock:  # the model is shared with content embedding
                    encoded = model.encode(
                        texts,
                        batch_size=MAX_QUERY_BATCH,
                        convert_to_numpy=True,
                        normalize_embeddings=True,
                        show_progress_bar=False,
                    )
                by_text = dict(zip(texts, np.asarray(encoded, dtype=np.float32)))
                self.query_batches += 1
                self.queries_embedded += len(texts)
                for text, future in batch:
                    future.set_result(by_text[text])
            except BaseException as exc:  # noqa: BLE001 - every waiting search gets the failure
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)

    def close(self) -> None:
        with self._pending_lock:
            self._closed = True
            self._pending_lock.notify_all()
        if self._worker is not None:
            self._worker.join(timeout=5)
