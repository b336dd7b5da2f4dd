"""Foresight items on the dev LoCoMo file, offline roles: `default` vs default + the foresight view.

    python benchmarks/mech_foresight.py [--data ../shared/data/locomo10_dev8.json] [--top-k 10]

Prints the rule items found per conversation (and how many name their own end), the share of
items the question date filters out (LoCoMo dates every question at the last session), then for
the default preset and each foresight variant (horizon 30 and 365 days) per-category F1 and
evidence recall with the Δ against default, the retrieval time per question (retrieval alone,
best of 3 passes) and the evaluation wall time per question (retrieve + answer + score).
The LLM variant (`foresight_llm`) is not measured here: it needs a model (tests cover it
against the fake server).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._mechanisms import (
    argument_parser,
    load_locomo_file,
    offline_workspace,  # noqa: E402
    print_comparison,
    run_variants,
    with_changes,
)
from evolvemem.mechanisms.foresight import build_index, rule_items  # noqa: E402
from evolvemem.space.config import load_config  # noqa: E402
from evolvemem.workspace import Workspace  # noqa: E402

HORIZONS = (30.0, 365.0)


def item_statistics(ws: Workspace, questions: list) -> None:
    """Items per conversation and the share the question date filters out (per question, averaged)."""
    by_conv: dict[str, list] = {}
    for q in questions:
        by_conv.setdefault(q.conversation_id, []).append(q)
    started = time.perf_counter()
    indexes = {
        cid: build_index(rule_items(ws.retriever(cid).index.state.memories), ws.embedder.encode) for cid in by_conv
    }
    built = time.perf_counter() - started
    print(
        f"{'conversation':14s} {'memories':>8s} {'items':>6s} {'own end':>8s}  "
        + "  ".join(f"{f'filtered h={h:g}':>14s}" for h in HORIZONS)
    )
    totals = {h: [0, 0] for h in HORIZONS}  # filtered, seen (summed over questions)
    for cid, qs in by_conv.items():
        index = indexes[cid]
        cells = []
        for h in HORIZONS:
            filtered = sum(len(index) - int(index.valid_at(q.question_date, h).sum()) for q in qs)
            totals[h][0] += filtered
            totals[h][1] += len(index) * len(qs)
            cells.append(f"{filtered / max(len(index) * len(qs), 1):14.1%}")
        own_end = sum(item.valid_until is not None for item in index.items)
        print(
            f"{cid:14s} {len(ws.retriever(cid).index.state.memories):8d} {len(index):6d} {own_end:8d}  "
            + "  ".join(cells)
        )
    n_items = sum(len(i) for i in indexes.values())
    print(
        f"{'all':14s} {sum(len(ws.retriever(c).index.state.memories) for c in by_conv):8d} {n_items:6d} "
        f"{sum(v for i in indexes.values() for v in (it.valid_until is not None for it in i.items)):8d}  "
        + "  ".join(f"{totals[h][0] / max(totals[h][1], 1):14.1%}" for h in HORIZONS)
    )
    print(
        f"items found and indexed (rules + embeddings + BM25) in {built:.2f}s for {len(by_conv)} conversations; "
        f"mean {n_items / len(by_conv):.1f} items per conversation"
    )


def main() -> None:
    args = argument_parser(__doc__, top_k=True).parse_args()
    dataset = load_locomo_file(args.data)
    ws = offline_workspace(dataset)
    questions = dataset.questions
    print(f"{len(dataset.conversations)} conversations, {ws.stats.memories} memories, {len(questions)} questions")
    item_statistics(ws, questions)
    base, _ = load_config("default")

    variants = {"default": {}}
    for h in HORIZONS:
        variants[f"foresight k={args.top_k} h={h:g}"] = {"foresight_top_k": args.top_k, "foresight_horizon_days": h}
    print_comparison(run_variants(ws, questions, with_changes(base, variants)))


if __name__ == "__main__":
    main()
