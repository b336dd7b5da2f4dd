"""The embedder a served memory hands its indexes and retrievers.

It is evaluation's `Embedder` (same model, same normalisation, same on-disk cache) with two
additions a server needs:

- **memory contents** come from vectors the memory store already holds (`supplying`), so
  reopening a store embeds nothing; only contents the store lacks reach the model.
- **queries** the cache does not know are embedded in batches by a few worker threads:
  concurrent searches share model calls instead of queueing for the model lock one by one. A lone
  query (none waiting, the shared model free) is embedded on the searching thread itself: two
  thread hand-offs fewer on a search's path. Query
  vectors are not written to the on-disk cache (a server would leave a file per query there);
  the last QUERY_CACHE of them are kept in memory, shared by every user.

Why more than one worker: a worker on the shared model waits while an add embeds a conversation's
contents with it (seconds for a long session); a worker on its own copy of the model does not, so
a search with a new query is not held up behind an add. Each call runs on one thread: OpenMP
threads that share a call spin-wait on each other when another process holds a core (measured: 2
threads on one call had a p95 of 158 ms on this 2-core machine with one other core busy). In
isolation two single-threaded workers embedded 1.6-1.9x the queries a second of one; in the server
on this 2-core machine, with HTTP and the load generator on the same cores, searches a second did
not change. Every worker but the first runs the encoder's `worker_copy()` (retrieval/encoder.py): a
deep copy on torch, so no tokenizer or module is used by two threads at once; on ONNX the one
session itself, which is safe to share. The same weights and code give the same vector whichever
worker embeds a text.

A worker's one forward pass also gives the queries' token outputs (late interaction's query side),
kept briefly for the search that asked (`query_token_outputs`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Iterable, Iterator, Sequence

import numpy as np

from evolvemem.contracts.memory import content_hash
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.retrieval.encoder import SentenceEncoder
from evolvemem.retrieval.model_files import torch_threads
from evolvemem.retrieval.memo import BoundedMemo
from evolvemem.retrieval.token_vectors import TokenVectors

MAX_QUERY_BATCH = 64
QUERY_TOKENS_KEPT = 1_000  # queries' token outputs kept for late interaction (read right after, by the same search)
MAX_QUERY_WORKERS = 4
QUERY_CACHE = 20_000  # query vectors kept in memory (~30 MB at 384 dimensions), least recently used dropped


class ServingEmbedder:
    """`encode` as the index and the retriever call it; see the module docstring."""

    def __init__(self, inner: Embedder, *, workers: int | None = None):
        self.inner = inner
        self.workers = workers if workers is not None else query_workers()
        self.model_name = inner.model_name
        self.vectors_key = inner.vectors_key  # the served store's key of these vectors
        self._local = threading.local()
        self._pending: list[tuple[str, Future[np.ndarray]]] = []  # a query and its sentence vector to come
        self._pending_lock = threading.Condition()
        self._workers: list[threading.Thread] = []
        self._closed = False
        self.query_batches = 0  # model calls made for queries (for metrics and benchmarks)
        self.queries_embedded = 0
        self.inline_batches = 0  # of those calls, made on the searching thread (`_embed_inline`)
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()
        self._recent_lock = threading.Lock()
        self._token_outputs: BoundedMemo[str, np.ndarray] = BoundedMemo(QUERY_TOKENS_KEPT)
        self._tokens: TokenVectors | None = None

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def tokens(self) -> TokenVectors:
        """Per-token vectors for late interaction: evaluation's for memory contents (cached on
        disk by content); a query's come from the forward pass that made its sentence vector."""
        with self._recent_lock:
            if self._tokens is None:
                self._tokens = self.inner.token_vectors(self.query_token_outputs)
            return self._tokens

    def query_token_outputs(self, texts: list[str]) -> list[np.ndarray]:
        """Each query's raw token outputs (special tokens included, padding cut), as the model's
        `encode(output_value="token_embeddings")` gives them. A query embedded moments ago by a
        worker has them already; one whose sentence vector came from a cache is embedded again."""
        with self._recent_lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._token_outputs]
        for future in [self._submit(t) for t in missing]:  # submitted together: one batch
            future.result()
        with self._recent_lock:
            return [self._token_outputs[t] for t in texts]

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
        if getattr(self._local, "known", None) is not None:  # building an index: memory contents
            return self.encode_memories(texts)
        return self._encode_queries(texts)

    def encode_memories(self, texts: Sequence[str]) -> np.ndarray:
        """Memory contents' vectors: those `supplying` gives, else evaluation's cache or the model.
        Sentence vectors only: an add is on a search's path, and its token vectors are made when
        (if) a served config's late view first reads them."""
        known: dict[str, np.ndarray] | None = getattr(self._local, "known", None)
        if known is None:
            return self.inner.encode(texts)
        hashes = [content_hash(t) for t in texts]
        missing = list(dict.fromkeys(t for t, h in zip(texts, hashes) if h not in known))
        if missing:
            for text, vector in zip(missing, self.inner.encode(missing)):
                known[content_hash(text)] = vector
        return np.stack([known[h] for h in hashes]).astype(np.float32, copy=False)

    def embed_contents(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors of memory contents by content hash (evaluation's cache first, then the model)."""
        unique = list(dict.fromkeys(texts))
        if not unique:
            return {}
        return {content_hash(t): v for t, v in zip(unique, self.inner.encode(unique))}

    def forget(self, hashes: Iterable[str]) -> None:
        """Remove memory contents' vectors (sentence and token) from the caches, on disk and here."""
        wanted = set(hashes)
        self.inner.forget(wanted)
        with self._recent_lock:
            tokens = self._tokens
        if tokens is not None:
            tokens.forget({h.encode("ascii") for h in wanted})

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
        missing = list(dict.fromkeys(t for t in texts if t not in vectors))
        if missing:
            self._ensure_workers()  # before the model may be held: a torch worker copies it under its lock
        inline = self._embed_inline(missing) if missing else None
        if inline is not None:
            vectors.update(inline)
        else:
            for text, future in [(t, self._submit(t)) for t in missing]:
                vectors[text] = future.result()
        with self._recent_lock:
            for text in texts:
                self._recent[text] = vectors[text]
                self._recent.move_to_end(text)
            while len(self._recent) > QUERY_CACHE:
                self._recent.popitem(last=False)
        return np.stack([vectors[t] for t in texts])

    def _embed_inline(self, texts: list[str]) -> dict[str, np.ndarray] | None:
        """The texts' vectors from the shared model on the calling thread, when no query waits for
        a worker and nothing holds the shared model (an add embedding contents does): a lone search
        then skips two thread hand-offs. None when either is busy: the workers take the texts."""
        with self._pending_lock:
            if self._pending:
                return None
        if not self.inner.model_lock.acquire(blocking=False):
            return None
        try:
            sentence, tokens = self.inner.encoder.sentences_and_tokens(texts, MAX_QUERY_BATCH)
        finally:
            self.inner.model_lock.release()
        return self._kept(texts, sentence, tokens, inline=True)

    def _kept(
        self, texts: list[str], sentence: np.ndarray, tokens: list[np.ndarray], *, inline: bool = False
    ) -> dict[str, np.ndarray]:
        """After one model call for `texts` (inline or a worker's): their token outputs kept for
        late interaction, the call counted; their sentence vectors by text."""
        with self._recent_lock:
            self._token_outputs.update(zip(texts, tokens))
        with self._pending_lock:
            self.query_batches += 1
            self.queries_embedded += len(texts)
            self.inline_batches += int(inline)
        return dict(zip(texts, sentence))

    def _ensure_workers(self) -> None:
        with self._pending_lock:
            if not self._workers:
                self._start_workers()

    def _submit(self, text: str) -> Future[np.ndarray]:
        future: Future[np.ndarray] = Future()
        self._ensure_workers()
        with self._pending_lock:
            self._pending.append((text, future))
            self._pending_lock.notify()
        return future

    def _start_workers(self) -> None:
        """Worker 0 on the shared model under its lock; each other worker on its own deep copy."""
        shared, lock = self.inner.encoder, self.inner.model_lock
        for number in range(self.workers):
            model: SentenceEncoder
            guard: contextlib.AbstractContextManager[object]
            if number == 0:
                model, guard = shared, lock
            else:
                with lock:  # no other thread is inside the model or its tokenizer while it is copied
                    model, guard = shared.worker_copy(), contextlib.nullcontext()
            worker = threading.Thread(
                target=self._run, args=(model, guard), name=f"evolvemem-query-embedder-{number}", daemon=True
            )
            worker.start()
            self._workers.append(worker)

    def _run(self, model: SentenceEncoder, guard: contextlib.AbstractContextManager[object]) -> None:
        """Take every pending query (up to MAX_QUERY_BATCH) and embed them in one call, until closed."""
        while True:
            with self._pending_lock:
                while not self._pending and not self._closed:
                    self._pending_lock.wait()
                if self._closed and not self._pending:
                    return
                batch, self._pending = self._pending[:MAX_QUERY_BATCH], self._pending[MAX_QUERY_BATCH:]
            texts = list(dict.fromkeys(t for t, _ in batch))
            try:
                with guard:
                    sentence, tokens = model.sentences_and_tokens(texts, MAX_QUERY_BATCH)
                by_text = self._kept(texts, sentence, tokens)
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
        for worker in self._workers:
            worker.join(timeout=5)


def query_workers() -> int:
    """Query-embedding workers: one per core a call leaves free (torch_threads() threads a call),
    at most MAX_QUERY_WORKERS; 2 on the 2-core development machine."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = torch_threads() or cores
    return max(1, min(MAX_QUERY_WORKERS, cores // threads))
