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

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evolvemem.data.loader import load_benchmark  # noqa: E402
from evolvemem.evaluate import evaluate  # noqa: E402
from evolvemem.mechanisms.foresight import build_index, rule_items  # noqa: E402
from evolvemem.roles.factory import ModelSettings, build_roles  # noqa: E402
from evolvemem.space.config import load_config  # noqa: E402
from evolvemem.workspace import Workspace  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10_dev8.json"
HORIZONS = (30.0, 365.0)


def retrieval_seconds(ws: Workspace, questions: list, config, repeats: int = 3) -> float:
    effective = {q.question_type: config.for_type(q.question_type) for q in questions}
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for q in questions:
            ws.retriever(q.conversation_id).retrieve(q, effective[q.question_type])
        best = min(best, time.perf_counter() - started)
    return best


def fmt(value) -> str:
    return "  -   " if value is None else f"{value:.4f}"


def item_statistics(ws: Workspace, questions: list) -> None:
    """Items per conversation and the share the question date filters out (per question, averaged)."""
    by_conv: dict[str, list] = {}
    for q in questions:
        by_conv.setdefault(q.conversation_id, []).append(q)
    started = time.perf_counter()
    indexes = {cid: build_index(rule_items(ws.retriever(cid).index.state.memories), ws.embedder.encode)
               for cid in by_conv}
    built = time.perf_counter() - started
    print(f"{'conversation':14s} {'memories':>8s} {'items':>6s} {'own end':>8s}  "
          + "  ".join(f"{f'filtered h={h:g}':>14s}" for h in HORIZONS))
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
        print(f"{cid:14s} {len(ws.retriever(cid).index.state.memories):8d} {len(index):6d} {own_end:8d}  "
              + "  ".join(cells))
    n_items = sum(len(i) for i in indexes.values())
    print(f"{'all':14s} {sum(len(ws.retriever(c).index.state.memories) for c in by_conv):8d} {n_items:6d} "
          f"{sum(v for i in indexes.values() for v in (it.valid_until is not None for it in i.items)):8d}  "
          + "  ".join(f"{totals[h][0] / max(totals[h][1], 1):14.1%}" for h in HORIZONS))
    print(f"items found and indexed (rules + embeddings + BM25) in {built:.2f}s for {len(by_conv)} conversations; "
          f"mean {n_items / len(by_conv):.1f} items per conversation")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--top-k", type=int, default=10)
    args = parser.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"no LoCoMo file at {args.data}")

    dataset = load_benchmark("locomo", args.data)
    ws = Workspace(dataset, build_roles(ModelSettings()))
    ws.build()
    questions = dataset.questions
    print(f"{len(dataset.conversations)} conversations, {ws.stats.memories} memories, {len(questions)} questions")
    item_statistics(ws, questions)
    base, _ = load_config("default")

    variants = {"default": {}}
    for h in HORIZONS:
        variants[f"foresight k={args.top_k} h={h:g}"] = {"foresight_top_k": args.top_k, "foresight_horizon_days": h}
    results, timing = {}, {}
    for name, changes in variants.items():
        config, _ = base.with_changes(changes)
        ws.prepare(questions, config)
        retrieval_seconds(ws, questions[:50], config, repeats=1)  # warm lazy caches
        ret = retrieval_seconds(ws, questions, config)
        outcome = evaluate(ws, config, questions)
        results[name] = outcome.summary
        timing[name] = ret / len(questions) * 1000
        print(f"\n== {name}: all F1 {fmt(outcome.summary['all'])}  main F1 {fmt(outcome.summary['main'])}  "
              f"evidence recall {fmt(outcome.summary['evidence_recall'])}  | retrieval "
              f"{timing[name]:.2f} ms/question, evaluation {outcome.wall_seconds / len(questions) * 1000:.2f} ms/question")

    reference = results["default"]
    print("\ncategory            n   " + "  ".join(f"{name[:30]:>30s}" for name in variants))
    for label, group in reference["by_category"].items():
        cells = []
        for name in variants:
            g = results[name]["by_category"][label]
            delta = "" if name == "default" else f" Δ{g['f1'] - group['f1']:+.3f}"
            er_delta = "" if name == "default" else f" Δ{g['evidence_recall'] - group['evidence_recall']:+.3f}"
            cells.append(f"F1 {fmt(g['f1'])}{delta} ER {fmt(g['evidence_recall'])}{er_delta}".rjust(30))
        print(f"{label} {group.get('name', '')[:14]:14s} {group['n']:4d}   " + "  ".join(cells))
    for name in variants:
        if name != "default":
            s = results[name]
            print(f"Δ {name}: all F1 {s['all'] - reference['all']:+.4f}, main F1 {s['main'] - reference['main']:+.4f}, "
                  f"evidence recall {s['evidence_recall'] - reference['evidence_recall']:+.4f}; retrieval "
                  f"+{timing[name] - timing['default']:.3f} ms/question (×{timing[name] / timing['default']:.2f})")


if __name__ == "__main__":
    main()
