"""AMA's levers on the dev LoCoMo file, offline roles: `default` vs granularity, judge and refresher.

    python benchmarks/mech_ama.py [--data ../shared/data/locomo10_dev8.json]

Prints the raw and episode stores' sizes and build time, then for the default preset and each
variant (memory_granularity = raw / episode / routed, judge_retries = 2, enable_refresher, and
all three together) per-category F1 and evidence recall with the Δ against default, the mean
context size in words (coarser stores carry more text per memory), the evaluation time per
question (route + retrieve + answer + judge + retries + score), the routes taken, the judge's
verdicts and retry sources, and the memories refreshed.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._mechanisms import (
    argument_parser,
    load_locomo_file,
    offline_workspace,  # noqa: E402
    print_comparison,
    print_variant,
    run_variant,
    with_changes,
)
from evolvemem.space.config import load_config  # noqa: E402
from evolvemem.workspace import Workspace  # noqa: E402

VARIANTS = {
    "default": {},
    "raw": {"memory_granularity": "raw"},
    "episode": {"memory_granularity": "episode"},
    "routed": {"memory_granularity": "routed"},
    "judge_retries=2": {"judge_retries": 2},
    "refresher": {"enable_refresher": True},
    "routed+judge2+refresher": {"memory_granularity": "routed", "judge_retries": 2, "enable_refresher": True},
}


def context_words(ws: Workspace, records: list[dict]) -> float:
    """Mean words per answer context (memory texts looked up in every store built)."""
    from evolvemem.memory.stores import STORE_NAMES

    text: dict[str, int] = {}
    for conv_id in ws.dataset.conversations:
        for store in STORE_NAMES:
            try:
                memories = ws.store_memories(conv_id, store)
            except (RuntimeError, KeyError):
                continue
            text.update((m.memory_id, len(m.content.split())) for m in memories)
    sizes = [sum(text.get(i, 0) for i in r["context_ids"]) for r in records]
    return sum(sizes) / max(len(sizes), 1)


def mechanism_counts(records: list[dict]) -> str:
    routes = Counter(r["granularity"] for r in records)
    verdicts = Counter(v for r in records for v in r["judge_verdicts"])
    sources = Counter(s for r in records for s in r["retry_sources"])
    retried = sum(1 for r in records if r["retries"])
    refreshed = sum(1 for r in records if r["refreshed_ids"])
    parts = [f"stores read first {dict(routes)}"]
    if verdicts:
        parts.append(
            f"verdicts {dict(verdicts)}; {retried} questions retried, {sum(r['retries'] for r in records)} "
            f"retries {dict(sources)}"
        )
    if refreshed:
        parts.append(
            f"{refreshed} questions with refreshed memories ({sum(len(r['refreshed_ids']) for r in records)} memories)"
        )
    return "; ".join(parts)


def main() -> None:
    args = argument_parser(__doc__).parse_args()
    dataset = load_locomo_file(args.data)
    ws = offline_workspace(dataset)
    questions = dataset.questions
    base, _ = load_config("default")

    for store in ("raw", "episode"):
        started = time.perf_counter()
        ws.ensure_stores({store})
        units = [m for c in dataset.conversations for m in ws.store_memories(c, store)]
        turns = sum(len(m.source_turn_ids) for m in units)
        print(
            f"store {store}: {len(units)} memories ({turns / max(len(units), 1):.1f} turns each) "
            f"built or loaded in {time.perf_counter() - started:.1f}s"
        )
    print(
        f"{len(dataset.conversations)} conversations, {len(questions)} questions; fact store "
        f"{sum(len(v) for v in ws.memories.values())} memories"
    )

    runs = {}
    for name, config in with_changes(base, VARIANTS).items():
        runs[name] = run_variant(ws, questions, config, time_retrieval=False)
        print_variant(name, runs[name], f"context {context_words(ws, runs[name].records):.0f} words")
        print(f"   {mechanism_counts(runs[name].records)}")
    print_comparison(runs)


if __name__ == "__main__":
    main()
