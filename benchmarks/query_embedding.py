"""What embedding a new query costs: the served memory's embedding model (MiniLM unless
`--embedding-model` names another) on batches of 1 to 16 LoCoMo questions, per call and per query,
on 1 and on 2 threads, through the encoder backend `--encoder` names (default: evolve's own).

    python benchmarks/query_embedding.py [--data locomo10_dev8.json] [--seconds 2] [--encoder onnx]

A served search whose query is new waits for one such call (a question and its name-stripped form
make a batch of 2 when entity swap is on); concurrent searches share a call. This is the floor
under `serve_load.py`'s new-query figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.serve_load import DEFAULT_DATA  # noqa: E402

BATCHES = (1, 2, 4, 8, 16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds of calls per batch size")
    parser.add_argument("--embedding-model", default=None)
    parser.add_argument("--encoder", choices=("torch", "onnx", "onnx-int8"), default=None)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from evolvemem.benchmarks import load_benchmark
    from evolvemem.contracts.local_models import default_encoder, encoder_named
    from evolvemem.retrieval.embeddings import DEFAULT_EMBEDDING_MODEL
    from evolvemem.retrieval.encoder import forget_loaded, load_encoder
    from evolvemem.retrieval.model_files import THREADS_ENV

    if not Path(args.data).is_file():
        sys.exit(f"error: no LoCoMo file at {args.data} (pass --data)")
    questions = [q.text for q in load_benchmark("locomo", args.data).questions][:400]
    backend = encoder_named(args.encoder) if args.encoder else default_encoder()
    print(
        f"query_embedding: {len(questions)} LoCoMo questions, {args.seconds:g} s per batch size, "
        f"encoder {backend.value}"
    )
    for threads in (1, 2):
        os.environ[THREADS_ENV] = str(threads)  # read when the encoder is loaded, as in the server
        forget_loaded()
        encoder = load_encoder(args.embedding_model or DEFAULT_EMBEDDING_MODEL, backend)
        for batch in BATCHES:
            encoder.sentences(questions[:batch], batch)
            calls, at, started = 0, 0, time.perf_counter()
            while time.perf_counter() - started < args.seconds:
                encoder.sentences(questions[at : at + batch], batch)
                calls, at = calls + 1, (at + batch) % (len(questions) - batch)
            elapsed_ms = (time.perf_counter() - started) * 1000
            print(
                f"  {threads} thread{'s' if threads > 1 else ' '}, batch {batch:2d}: {elapsed_ms / calls:6.1f} ms a call, "
                f"{elapsed_ms / (calls * batch):5.2f} ms a query",
                flush=True,
            )


if __name__ == "__main__":
    main()
