"""What one served search costs in-process, per config, when every query is new.

    python benchmarks/served_search.py [--data locomo10_dev8.json] [--conversation conv-30]
        [--questions 80] [--config default --config runs/frontier-hybrid-600 ...]

For each config (a preset, a config file or a run directory): a fresh store, one LoCoMo
conversation added through `Memory.add` (embeddings from the cache after the first config), one
warm-up search, then `--questions` of its LoCoMo questions made new by a numbered suffix (so no
query vector comes from a cache) through `Memory.search`, one at a time. Prints p50 / p90 / p95 in
ms, the model calls for queries, and each config's p50 as a ratio to the first config's. No HTTP
and no client: what `serve_load.py` measures over the network, minus the network.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.serve_load import DEFAULT_DATA, percentile  # noqa: E402


def measure(config: str, conversation, questions: list[str], folder: Path) -> tuple[list[float], int]:
    from evolvemem import Memory

    turns = [
        {"speaker": t.speaker, "text": t.text, "session": s.session_id}
        | ({"at": s.timestamp.isoformat()} if s.timestamp else {})
        for s in conversation.sessions
        for t in s.turns
    ]
    with Memory.open(folder / "memory.duckdb", config) as memory:
        memory.add("user", turns)
        memory.search("user", "a first search builds the user's indexes")
        before = memory.embedder.query_batches
        latencies = []
        for number, question in enumerate(questions):
            started = time.perf_counter()
            memory.search("user", f"{question} (ask {number})")
            latencies.append((time.perf_counter() - started) * 1000)
        return latencies, memory.embedder.query_batches - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--conversation", default="conv-30")
    parser.add_argument("--questions", type=int, default=80)
    parser.add_argument("--config", action="append", default=[], help="repeatable; default: default")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from evolvemem.benchmarks import load_benchmark

    if not Path(args.data).is_file():
        sys.exit(f"error: no LoCoMo file at {args.data} (pass --data)")
    dataset = load_benchmark("locomo", args.data)
    if args.conversation not in dataset.conversations:
        sys.exit(f"error: no conversation {args.conversation!r} in {args.data}")
    conversation = dataset.conversations[args.conversation]
    questions = [q.text for q in dataset.questions if q.conversation_id == args.conversation][: args.questions]
    configs = args.config or ["default"]
    print(
        f"served_search: {args.conversation} ({len(conversation.turns())} turns), {len(questions)} new queries "
        f"per config, one at a time, in-process Memory.search"
    )
    first_p50 = None
    for config in configs:
        with tempfile.TemporaryDirectory() as folder:
            latencies, model_calls = measure(config, conversation, questions, Path(folder))
        p50 = statistics.median(latencies)
        first_p50 = first_p50 or p50
        print(
            f"  {config}: p50 {p50:.1f} ms  p90 {percentile(latencies, 0.9):.1f} ms  p95 "
            f"{percentile(latencies, 0.95):.1f} ms  ({model_calls} model calls for {len(latencies)} queries; "
            f"{p50 / first_p50:.2f}x the first config)",
            flush=True,
        )


if __name__ == "__main__":
    main()
