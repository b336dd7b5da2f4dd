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

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evolvemem.data.loader import load_benchmark  # noqa: E402
from evolvemem.evaluate import evaluate  # noqa: E402
from evolvemem.roles.factory import ModelSettings, build_roles  # noqa: E402
from evolvemem.space.config import load_config  # noqa: E402
from evolvemem.workspace import Workspace  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10_dev8.json"
VARIANTS = {
    "default": {},
    "raw": {"memory_granularity": "raw"},
    "episode": {"memory_granularity": "episode"},
    "routed": {"memory_granularity": "routed"},
    "judge_retries=2": {"judge_retries": 2},
    "refresher": {"enable_refresher": True},
    "routed+judge2+refresher": {"memory_granularity": "routed", "judge_retries": 2, "enable_refresher": True},
}


def fmt(value) -> str:
    return "  -   " if value is None else f"{value:.4f}"


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
        parts.append(f"verdicts {dict(verdicts)}; {retried} questions retried, {sum(r['retries'] for r in records)} "
                     f"retries {dict(sources)}")
    if refreshed:
        parts.append(f"{refreshed} questions with refreshed memories "
                     f"({sum(len(r['refreshed_ids']) for r in records)} memories)")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"no LoCoMo file at {args.data}")

    dataset = load_benchmark("locomo", args.data)
    ws = Workspace(dataset, build_roles(ModelSettings()))
    ws.build()
    questions = dataset.questions
    base, _ = load_config("default")

    for store in ("raw", "episode"):
        started = time.perf_counter()
        ws.ensure_stores({store})
        units = [m for c in dataset.conversations for m in ws.store_memories(c, store)]
        turns = sum(len(m.source_turn_ids) for m in units)
        print(f"store {store}: {len(units)} memories ({turns / max(len(units), 1):.1f} turns each) "
              f"built or loaded in {time.perf_counter() - started:.1f}s")
    print(f"{len(dataset.conversations)} conversations, {len(questions)} questions; fact store "
          f"{sum(len(v) for v in ws.memories.values())} memories")

    results = {}
    for name, changes in VARIANTS.items():
        config, _ = base.with_changes(changes)
        ws.prepare(questions, config)
        outcome = evaluate(ws, config, questions)
        results[name] = outcome.summary
        print(f"\n== {name}: all F1 {fmt(outcome.summary['all'])}  main F1 {fmt(outcome.summary['main'])}  "
              f"evidence recall {fmt(outcome.summary['evidence_recall'])}  | context "
              f"{context_words(ws, outcome.records):.0f} words | evaluation "
              f"{outcome.wall_seconds / len(questions) * 1000:.2f} ms/question")
        print(f"   {mechanism_counts(outcome.records)}")

    reference = results["default"]
    names = list(VARIANTS)
    print("\ncategory            n   " + "  ".join(f"{n[:30]:>30s}" for n in names))
    for label, group in reference["by_category"].items():
        cells = []
        for name in names:
            g = results[name]["by_category"][label]
            delta = "" if name == "default" else f" Δ{g['f1'] - group['f1']:+.3f}"
            cells.append(f"F1 {fmt(g['f1'])}{delta} ER {fmt(g['evidence_recall'])}".rjust(30))
        print(f"{label} {group.get('name', '')[:14]:14s} {group['n']:4d}   " + "  ".join(cells))
    for name in names[1:]:
        s = results[name]
        print(f"Δ {name}: all F1 {s['all'] - reference['all']:+.4f}, main F1 {s['main'] - reference['main']:+.4f}, "
              f"evidence recall {s['evidence_recall'] - reference['evidence_recall']:+.4f}")


if __name__ == "__main__":
    main()
