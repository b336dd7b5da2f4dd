"""What each encoder backend costs, in one process: cold indexing throughput and single-query latency.

    python benchmarks/encoder_speed.py [--data locomo10_dev8.json] [--limit N] [--queries 200]
        [--encoders torch,onnx,onnx-int8] [--embedding-model NAME]

For each backend (retrieval/encoder.py), into a fresh embedding cache:

- **export**: the ONNX backends' one-time export of the model (per machine and model content;
  torch: loading the model). Reported apart: it is paid once, not per run.
- **cold indexing**: the dev file's memories (offline rule extraction, as `evolve run` indexes
  them) embedded from nothing, sentence vectors and the token vectors late interaction reads:
  memories a second. An index that will be read by the late view gets both from one forward pass
  (`Embedder.encode_memories`); the
  first row, torch with a pass for each as every backend did before, is the reference the ratios
  are taken against.
- **single query**: LoCoMo questions embedded one at a time through the served path (one forward
  pass giving the sentence vector and the token outputs), each question once: p50 / p95 ms.

Then the ratios to torch, and the largest difference of the ONNX vectors from torch's. Threads:
`EVOLVEMEM_EMBED_THREADS` (default 1 on a 2-core machine), the same rule for every backend. On a
busy machine every figure is inflated; the ratios, measured in one process, are what to read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10_dev8.json"


def memory_texts(data: Path, limit: int | None) -> list[str]:
    """The contents offline extraction makes of the file's conversations, deduplicated."""
    from evolvemem.benchmarks import load_benchmark
    from evolvemem.memory.store_cache import load_or_extract
    from evolvemem.roles.factory import ModelSettings, build_roles

    dataset = load_benchmark("locomo", str(data))
    extractor = build_roles(ModelSettings()).extractor
    texts: list[str] = []
    for conversation in dataset.conversations.values():
        units, _, _ = load_or_extract(extractor, conversation)
        texts.extend(unit.content for unit in units)
    unique = list(dict.fromkeys(texts))
    return unique[:limit] if limit else unique


def questions(data: Path, count: int) -> list[str]:
    from evolvemem.benchmarks import load_benchmark

    return list(dict.fromkeys(q.text for q in load_benchmark("locomo", str(data)).questions))[:count]


REFERENCE = "torch, two passes"


def measure(
    backend: str, model: str, texts: list[str], asked: list[str], scratch: Path, *, two_passes: bool = False
) -> dict[str, object]:
    """One backend's figures (its export in a cache of its own, then a fresh embedding cache).
    `two_passes`: sentence vectors, then the token vectors in a pass of their own (the old path)."""
    from evolvemem.contracts.local_models import encoder_named
    from evolvemem.retrieval.embeddings import Embedder

    folder = scratch / f"{backend}{'-two-passes' if two_passes else ''}"
    os.environ["EVOLVEMEM_CACHE_DIR"] = str(folder)  # the export and the vectors start from nothing
    os.environ["EVOLVEMEM_MODEL_DIR"] = str(folder / "models")
    embedder = Embedder(
        model, cache_root=folder / "embeddings", encoder=encoder_named(backend), keep_memory_tokens=not two_passes
    )
    started = time.perf_counter()
    encoder = embedder.encoder
    export = time.perf_counter() - started
    if two_passes:
        started = time.perf_counter()
        vectors = embedder.encode(texts)
        sentence = time.perf_counter() - started
        started = time.perf_counter()
        embedder.tokens.of_memories(texts)
        indexing = sentence + time.perf_counter() - started
    else:
        started = time.perf_counter()
        vectors = embedder.encode_memories(texts)
        indexing = time.perf_counter() - started
        started = time.perf_counter()
        embedder.tokens.of_memories(texts)  # what late interaction asks: all cached now
        indexing += time.perf_counter() - started
        if embedder.tokens.texts_encoded:
            sys.exit(
                f"error: {embedder.tokens.texts_encoded} memories' token vectors were not made by the index's pass"
            )
        sentence_only = Embedder(model, cache_root=folder / "sentences-only", encoder=encoder_named(backend))
        started = time.perf_counter()
        sentence_only.encode(texts)
        sentence = time.perf_counter() - started
    encoder.sentences_and_tokens([asked[0]], 64)  # warm the single-query path
    latencies = []
    for question in asked:
        started = time.perf_counter()
        encoder.sentences_and_tokens([question], 64)
        latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    return {
        "export": export,
        "sentence_per_s": len(texts) / sentence,
        "index_per_s": len(texts) / indexing,
        "p50": statistics.median(latencies),
        "p95": latencies[min(len(latencies) - 1, int(round(0.95 * (len(latencies) - 1))))],
        "vectors": vectors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--limit", type=int, default=None, help="index only the first N memories (default: all)")
    parser.add_argument("--queries", type=int, default=200, help="questions for the single-query latency")
    parser.add_argument("--encoders", default="torch,onnx,onnx-int8")
    parser.add_argument("--embedding-model", default="sentence-transformers/all-MiniLM-L6-v2")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    data = Path(args.data)
    if not data.is_file():
        sys.exit(f"error: no LoCoMo file at {data} (pass --data)")
    scratch = Path(tempfile.mkdtemp(prefix="encoder-speed-"))
    os.environ["EVOLVEMEM_CACHE_DIR"] = str(scratch / "extraction")
    texts, asked = memory_texts(data, args.limit), questions(data, args.queries)
    from evolvemem.retrieval.encoder_onnx import onnx_threads
    from evolvemem.retrieval.model_files import torch_threads

    print(
        f"encoder_speed: {len(texts)} memories of {data.name}, {len(asked)} single queries, "
        f"threads a call: torch {torch_threads() or 'default'}, onnx {onnx_threads()}; {os.cpu_count()} CPUs"
    )
    results: dict[str, dict[str, object]] = {}
    rows = [(REFERENCE, "torch", True)] + [(b, b, False) for b in args.encoders.split(",")]
    for label, backend, two_passes in rows:
        results[label] = figures = measure(backend, args.embedding_model, texts, asked, scratch, two_passes=two_passes)
        print(
            f"  {label:17s} export/load {figures['export']:6.1f} s | cold indexing {figures['index_per_s']:7.1f} "
            f"memories/s (sentence vectors alone {figures['sentence_per_s']:7.1f}/s) | single query "
            f"p50 {figures['p50']:5.1f} ms, p95 {figures['p95']:5.1f} ms",
            flush=True,
        )
    reference = results[REFERENCE]
    for label, figures in results.items():
        if label == REFERENCE:
            continue
        ours, theirs = np.asarray(figures["vectors"]), np.asarray(reference["vectors"])
        print(
            f"  {label} / {REFERENCE}: indexing {float(figures['index_per_s']) / float(reference['index_per_s']):.2f}x "
            f"the memories a second, single-query p50 {float(figures['p50']) / float(reference['p50']):.2f}x and "
            f"p95 {float(figures['p95']) / float(reference['p95']):.2f}x the time; vectors: max abs difference "
            f"{float(np.abs(ours - theirs).max()):.1e}, lowest cosine {float((ours * theirs).sum(axis=1).min()):.4f}"
        )


if __name__ == "__main__":
    main()
