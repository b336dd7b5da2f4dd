"""Scene-guided retrieval on the dev LoCoMo file, offline roles: `default` vs default + scenes.

    python benchmarks/mech_scenes.py [--data ../shared/data/locomo10_dev8.json] [--top-k 10]

Prints, for the default preset and each scene variant (scene view alone; with the sufficiency
rewrites), per-category F1 and evidence recall, the Δ against default, scene statistics, the
retrieval time per question (retrieval alone, best of 3 passes) and the evaluation wall time
per question (retrieve + answer + score).
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
from evolvemem.mechanisms.scenes import build_episodes, cluster_scenes  # noqa: E402
from evolvemem.space.config import load_config  # noqa: E402


def main() -> None:
    args = argument_parser(__doc__, top_k=True).parse_args()
    dataset = load_locomo_file(args.data)
    ws = offline_workspace(dataset)
    questions = dataset.questions
    base, _ = load_config("default")

    started = time.perf_counter()
    n_episodes = n_scenes = n_memories = 0
    for index in ws.indexes.values():
        episodes = build_episodes(index.state)
        scenes = cluster_scenes(episodes, base.scene_similarity, base.scene_max_gap_days)
        n_episodes, n_scenes, n_memories = (
            n_episodes + len(episodes.groups),
            n_scenes + len(scenes),
            n_memories + len(index),
        )
    print(
        f"{len(dataset.conversations)} conversations, {n_memories} memories, {len(questions)} questions; "
        f"{n_episodes} episodes (mean {n_memories / n_episodes:.1f} memories), {n_scenes} scenes "
        f"(mean {n_episodes / n_scenes:.1f} episodes); built in {time.perf_counter() - started:.2f}s"
    )

    variants = {
        "default": {},
        f"scenes k={args.top_k}": {"scene_top_k": args.top_k},
        f"scenes k={args.top_k} +sufficiency 2": {"scene_top_k": args.top_k, "scene_sufficiency_rounds": 2},
    }
    print_comparison(run_variants(ws, questions, with_changes(base, variants)))


if __name__ == "__main__":
    main()
