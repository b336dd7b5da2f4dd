"""The fast backend: ONNX Runtime on the model's export (retrieval/onnx_export.py) with the
model's own `tokenizers` tokenizer; no torch or transformers once the export exists.

Tuned for a small CPU:
- one intra-op thread a core (`onnx_threads`, EVOLVEMEM_EMBED_THREADS overrides), inter-op 1, and the
  pool does not spin, so a call never spin-waits on a busy core;
- a batch is cut into length buckets of at most BUCKET texts: sorted by token count, each bucket
  padded only to its own longest text, results put back in the caller's order (padding is work
  thrown away; a small bucket also keeps a layer's activations in cache: 16 texts a call were
  1.3x the throughput of 64 on the 2-core development VM);
- a single text skips padding and masks altogether (one row, every position attended), with the
  session, its run options and output names built once;
- a batch of several buckets runs them side by side, one bucket a thread, on a second session with
  one intra-op thread (`_side_by_side`): a MiniLM pass over 16 short texts splits poorly across
  threads, so whole buckets in parallel embed more a second (benchmarks/encoder_speed.py, the dev
  file's 4,805 memories on the idle 2-core development VM: sentence vectors 195/s against 170/s for
  one session with two threads; the index's pass, token vectors kept, 183/s against 173/s), and,
  each thread being alone in its call, none waits on another when a core is busy.
One session serves every thread: ONNX Runtime's `run` and the Rust tokenizer are thread-safe,
so a serving worker needs no copy of the model."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from evolvemem.contracts.local_models import Encoder
from evolvemem.errors import ConfigError
from evolvemem.retrieval.model_files import THREADS_ENV, torch_threads
from evolvemem.retrieval.onnx_export import Export, discard_unreadable, ensure_export

BUCKET = 16
_SENTENCE = ["sentence_embedding"]
_BOTH = ["sentence_embedding", "token_embeddings"]


MAX_THREADS = 4  # a MiniLM-sized pass gains little beyond this, and a server runs several at once


def onnx_threads() -> int:
    """Intra-op threads: `EVOLVEMEM_EMBED_THREADS` if set, else one a core (at most MAX_THREADS).

    Unlike torch's OpenMP pool (torch_threads: one thread on two cores), ONNX Runtime's pool is told
    not to spin, so a second thread that finds its core busy sleeps instead of burning it. Measured on
    the 2-core development VM (benchmarks/encoder_speed.py, sentence vectors of 300 memories, a helper's
    tests running beside it): 2 threads 91/s against 61/s with one; single-query p50 6.9 against 7.4 ms."""
    explicit = torch_threads() if os.environ.get(THREADS_ENV, "").strip() else None
    return explicit or max(1, min(MAX_THREADS, os.cpu_count() or 1))


def _session(graph: Path, threads: int | None = None) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or onnx_threads()
    options.inter_op_num_threads = 1
    # idle pool threads sleep instead of spinning: a spinning pool is what made a second thread cost
    # more than it gave on a busy 2-core machine (see torch_threads)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: ORT's informational lines are not the user's business
    return ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])


class OnnxEncoder:
    """An exported sentence model behind the SentenceEncoder protocol."""

    def __init__(self, export: Export, session: Any, *, int8: bool):
        from tokenizers import Tokenizer

        self.backend = Encoder.ONNX_INT8 if int8 else Encoder.ONNX
        self.export = export
        self.max_length = export.info.max_length
        self.special_ids = frozenset(export.info.special_ids)
        self.dimension = export.info.dimension
        self._session = session
        self._lanes = onnx_threads()  # buckets embedded side by side (1: one after another)
        self._bucket_sessions: tuple[Any, ThreadPoolExecutor] | None = None
        self._bucket_lock = threading.Lock()
        self._inputs = export.info.inputs
        self._lower = export.info.lower_case
        self._tokenizer = Tokenizer.from_file(str(export.folder / "tokenizer.json"))
        self._tokenizer.no_padding()  # padding is per bucket, here
        self._tokenizer.enable_truncation(self.max_length)

    @classmethod
    def load(cls, model_name: str, *, int8: bool) -> OnnxEncoder:
        """The export of `model_name` (made now if this machine has none), loaded; an unreadable
        export is reported in one line and made again once."""
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            raise ConfigError("the onnx encoder needs onnxruntime (pip install onnxruntime), or use --encoder torch")
        export = ensure_export(model_name, int8=int8)
        try:
            session = _session(export.graph)
        except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types for a bad file
            discard_unreadable(export.graph, exc)
            export = ensure_export(model_name, int8=int8)
            session = _session(export.graph)
        return cls(export, session, int8=int8)

    # ---------------------------------------------------------------- tokenizer
    def _prepared(self, texts: Sequence[str]) -> list[str]:
        return [t.lower() for t in texts] if self._lower else list(texts)

    def token_ids(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(self._prepared([text])[0]).ids)

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self._tokenizer.id_to_token(int(i)) or "" for i in ids]

    # ---------------------------------------------------------------- forward
    def sentences(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        sentence, _ = self._run(texts, batch_size, with_tokens=False)
        return sentence

    def token_outputs(self, texts: Sequence[str], batch_size: int) -> list[np.ndarray]:
        return self._run(texts, batch_size, with_tokens=True)[1]

    def sentences_and_tokens(self, texts: Sequence[str], batch_size: int) -> tuple[np.ndarray, list[np.ndarray]]:
        return self._run(texts, batch_size, with_tokens=True)

    def worker_copy(self) -> OnnxEncoder:
        """This encoder itself: its session and tokenizer are safe in several threads at once."""
        return self

    def _run(self, texts: Sequence[str], batch_size: int, *, with_tokens: bool) -> tuple[np.ndarray, list[np.ndarray]]:
        """Unit sentence vectors (n, d) and, when asked, each text's token outputs (padding cut)."""
        if not texts:
            return np.zeros((0, self.dimension), np.float32), []
        encodings = self._tokenizer.encode_batch(self._prepared(texts))
        ids = [e.ids for e in encodings]
        outputs = _BOTH if with_tokens else _SENTENCE
        if len(ids) == 1:  # one text: no padding, no mask to build
            single = np.asarray(ids, dtype=np.int64)
            result = self._session.run(outputs, self._feed(single, np.ones_like(single)))
            tokens = [np.asarray(result[1][0], np.float32)] if with_tokens else []
            return _unit(np.asarray(result[0], np.float32)), tokens
        sentence = np.empty((len(ids), self.dimension), np.float32)
        token_rows: list[np.ndarray] = [np.empty(0, np.float32)] * (len(ids) if with_tokens else 0)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        size = max(1, min(batch_size, BUCKET))
        buckets = [order[start : start + size] for start in range(0, len(order), size)]

        def run(bucket: list[int], session: Any) -> list[Any]:
            width = len(ids[bucket[-1]])
            batch = np.zeros((len(bucket), width), np.int64)
            mask = np.zeros((len(bucket), width), np.int64)
            for row, index in enumerate(bucket):
                batch[row, : len(ids[index])] = ids[index]
                mask[row, : len(ids[index])] = 1
            result: list[Any] = session.run(outputs, self._feed(batch, mask))
            return result

        if len(buckets) > 1 and self._lanes > 1:
            session, pool = self._side_by_side()
            results = list(pool.map(lambda bucket: run(bucket, session), buckets))
        else:
            results = [run(bucket, self._session) for bucket in buckets]
        for bucket, result in zip(buckets, results):
            sentence[bucket] = result[0]
            for row, index in enumerate(bucket if with_tokens else ()):
                token_rows[index] = np.asarray(result[1][row, : len(ids[index])], np.float32)
        return _unit(sentence), token_rows

    def _side_by_side(self) -> tuple[Any, ThreadPoolExecutor]:
        """The one-thread session and the threads that run buckets on it, made on first use (a
        process that only embeds queries never loads the graph twice)."""
        with self._bucket_lock:
            if self._bucket_sessions is None:
                pool = ThreadPoolExecutor(self._lanes, thread_name_prefix="evolvemem-onnx-bucket")
                self._bucket_sessions = (_session(self.export.graph, threads=1), pool)
            return self._bucket_sessions

    def _feed(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        named = {"input_ids": ids, "attention_mask": mask}
        return {name: named[name] if name in named else np.zeros_like(ids) for name in self._inputs}


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (as `normalize_embeddings=True` does for torch)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: np.ndarray = (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return unit
