"""Scene-guided retrieval on the dev LoCoMo file, offline roles: `default` vs default + scenes.

    python benchmarks/mech_scenes.py [--data ../shared/data/locomo10_dev8.json] [--top-k 10]

Prints, for the default preset and each scene variant (scene view alone; with the sufficiency
rewrites), per-category F1 and evidence recall, the Δ against default, scene statistics, the
retrieval time per question (retrieval alone, best of 3 passes) and the evaluation wall time
per question (retrieve + answer + score).
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
from evolvemem.mechanisms.scenes import build_episodes, cluster_scenes  # noqa: E402
from evolvemem.roles.factory import ModelSettings, build_roles  # noqa: E402
from evolvemem.space.config import load_config  # noqa: E402
from evolvemem.workspace import Workspace  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10_dev8.json"


def retrieval_seconds(ws: Workspace, questions: list, config, repeats: int = 3) -> float:
    effective = {q.question_type: config.for_type(q.question_type) for q in questions}
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for q in questions:
            ws.retrievers[q.conversation_id].retrieve(q, effective[q.question_type])
        best = min(best, time.perf_counter() - started)
    return best


def fmt(value) -> str:
    return "  -   " if value is None else f"{value:.4f}"


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
    base, _ = load_config("default")

    started = time.perf_counter()
    n_episodes = n_scenes = n_memories = 0
    for index in ws.indexes.values():
        episodes = build_episodes(index.state)
        scenes = cluster_scenes(episodes, base.scene_similarity, base.scene_max_gap_days)
        n_episodes, n_scenes, n_memories = n_episodes + len(episodes.groups), n_scenes + len(scenes), n_memories + len(index)
    print(f"{len(dataset.conversations)} conversations, {n_memories} memories, {len(questions)} questions; "
          f"{n_episodes} episodes (mean {n_memories / n_episodes:.1f} memories), {n_scenes} scenes "
          f"(mean {n_episodes / n_scenes:.1f} episodes); built in {time.perf_counter() - started:.2f}s")

    variants = {
        "default": {},
        f"scenes k={args.top_k}": {"scene_top_k": args.top_k},
        f"scenes k={args.top_k} +sufficiency 2": {"scene_top_k": args.top_k, "scene_sufficiency_rounds": 2},
    }
    results = {}
    for name, changes in variants.items():
        config, _ = base.with_changes(changes)
        ws.prepare(questions, config)
        retrieval_seconds(ws, questions[:50], config, repeats=1)  # warm lazy caches and rewrite embeddings
        ret = retrieval_seconds(ws, questions, config)
        outcome = evaluate(ws, config, questions)
        results[name] = outcome.summary
        print(f"\n== {name}: all F1 {fmt(outcome.summary['all'])}  main F1 {fmt(outcome.summary['main'])}  "
              f"evidence recall {fmt(outcome.summary['evidence_recall'])}  | retrieval "
              f"{ret / len(questions) * 1000:.2f} ms/question, evaluation {outcome.wall_seconds / len(questions) * 1000:.2f} ms/question")

    reference = results["default"]
    print("\ncategory            n   " + "  ".join(f"{name[:26]:>26s}" for name in variants))
    for label, group in reference["by_category"].items():
        cells = []
        for name in variants:
            g = results[name]["by_category"][label]
            delta = "" if name == "default" else f" Δ{g['f1'] - group['f1']:+.3f}"
            cells.append(f"F1 {fmt(g['f1'])}{delta} ER {fmt(g['evidence_recall'])}".rjust(26))
        print(f"{label} {group.get('name', '')[:14]:14s} {group['n']:4d}   " + "  ".join(cells))
    for name in variants:
        if name != "default":
            s = results[name]
            print(f"Δ {name}: all F1 {s['all'] - reference['all']:+.4f}, main F1 {s['main'] - reference['main']:+.4f}, "
                  f"evidence recall {s['evidence_recall'] - reference['evidence_recall']:+.4f}")


if __name__ == "__main__":
    main()
