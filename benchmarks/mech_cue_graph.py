"""Cue graph on LoCoMo, offline: the `default` preset vs default + the cue-graph view.

Prints per-category F1 and evidence recall for both configs, the deltas, the evaluation time per
question and the retrieval-only time per question (the graph's own cost).

    python benchmarks/mech_cue_graph.py [--data ../shared/data/locomo10_dev8.json] [--top-k 10]
        [--steps 2] [--beam 20] [--decay 0.5]
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10_dev8.json"


def retrieval_seconds(ws, config, questions) -> float:
    started = time.perf_counter()
    for q in questions:
        ws.retrievers[q.conversation_id].retrieve(q, config.for_type(q.question_type))
    return (time.perf_counter() - started) / len(questions)


def fmt(value) -> str:
    return "  -   " if value is None else f"{value:.4f}"


def delta(a, b) -> str:
    return "  -    " if a is None or b is None else f"{b - a:+.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--beam", type=int, default=20)
    parser.add_argument("--decay", type=float, default=0.5)
    args = parser.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"no LoCoMo file at {args.data}")

    from evolvemem.data.loader import load_benchmark
    from evolvemem.evaluate import evaluate
    from evolvemem.roles.factory import ModelSettings, build_roles
    from evolvemem.space.config import load_config
    from evolvemem.workspace import Workspace

    dataset = load_benchmark("locomo", args.data)
    questions = list(dataset.questions)
    started = time.perf_counter()
    ws = Workspace(dataset, build_roles(ModelSettings()))
    ws.build()
    print(f"workspace: {ws.stats.memories} memories in {time.perf_counter() - started:.1f}s; "
          f"{len(questions)} questions")

    base, _ = load_config("default")
    on, clamps = base.with_changes({"cue_graph_top_k": args.top_k, "cue_graph_steps": args.steps,
                                    "cue_graph_beam": args.beam, "cue_graph_decay": args.decay})
    if clamps:
        print("clamped:", clamps)
    ws.prepare(questions, base)
    results = {}
    for name, cfg in (("default", base), ("cue_graph", on)):
        retrieval_seconds(ws, cfg, questions[:50])  # warm: graph build, analysis caches
        per_q_retrieval = retrieval_seconds(ws, cfg, questions)
        outcome = evaluate(ws, cfg, questions)
        results[name] = (outcome.summary, outcome.wall_seconds / len(questions), per_q_retrieval)

    (sa, ta, ra), (sb, tb, rb) = results["default"], results["cue_graph"]
    print(f"\ncue graph: top_k={args.top_k} steps={args.steps} beam={args.beam} decay={args.decay}")
    print(f"{'category':22s} {'n':>5s}  {'F1 def':>7s} {'F1 cue':>7s} {'ΔF1':>8s}   "
          f"{'ER def':>7s} {'ER cue':>7s} {'ΔER':>8s}")
    for cat, ga in sa["by_category"].items():
        gb = sb["by_category"][cat]
        label = f"{cat} {ga.get('name', '')}".strip()
        print(f"{label:22s} {ga['n']:5d}  {fmt(ga['f1'])}  {fmt(gb['f1'])} {delta(ga['f1'], gb['f1'])}   "
              f"{fmt(ga['evidence_recall'])}  {fmt(gb['evidence_recall'])} "
              f"{delta(ga['evidence_recall'], gb['evidence_recall'])}")
    for group in ("main", "all"):
        ga, gb = sa["groups"][group], sb["groups"][group]
        print(f"{group:22s} {ga['n']:5d}  {fmt(ga['f1'])}  {fmt(gb['f1'])} {delta(ga['f1'], gb['f1'])}   "
              f"{fmt(ga['evidence_recall'])}  {fmt(gb['evidence_recall'])} "
              f"{delta(ga['evidence_recall'], gb['evidence_recall'])}")
    print(f"\nevaluation time per question: default {ta * 1000:.2f} ms, cue graph {tb * 1000:.2f} ms")
    print(f"retrieval time per question:  default {ra * 1000:.3f} ms, cue graph {rb * 1000:.3f} ms "
          f"(+{(rb - ra) * 1000:.3f} ms, ×{rb / ra:.2f})")


if __name__ == "__main__":
    main()
