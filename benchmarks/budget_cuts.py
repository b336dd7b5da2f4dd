"""What one ranking cut at several budgets costs and changes, against scoring each budget alone.

    python benchmarks/budget_cuts.py [--data PATH] [--split dev] [--config PRESET|TOML|RUN_DIR]
        [--budgets 600,1500,3000] [--repeats 3]

On the split's questions, with a config (default: `default`; a run directory: its best config),
each context-only evaluation (`evaluate_contexts`, what `evolve run --objective evidence` scores)
is timed three ways, best of `--repeats` passes: each budget alone, ranked as for itself (what
three `--context-tokens` runs do); each budget alone ranked as for the largest (what a frontier
point is); and one ranking cut at every budget (what `--budgets` does). Printed: seconds of each,
the ratio of the one-ranking pass to the separate passes, and at each budget the answerable
questions' mean evidence recall ranked as for itself and as for the largest, with the share of
questions whose context ids differ between the two — the difference a frontier point has from a
one-budget run at its budget. The one-ranking pass's records are checked equal to the alone-ranked-
as-for-the-largest ones (the script stops on any difference).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._mechanisms import argument_parser, load_locomo_file, offline_workspace  # noqa: E402


def timed(repeats: int, run: Any) -> tuple[float, Any]:
    """Best wall seconds of `repeats` calls of `run`, and its last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argument_parser(__doc__)
    parser.add_argument("--split", default="dev", choices=("dev", "test", "all"))
    parser.add_argument("--config", default="default")
    parser.add_argument("--budgets", default="600,1500,3000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from evolvemem.answering.contexts import evaluate_contexts
    from evolvemem.answering.stores import stores_needed
    from evolvemem.data.split import split_dataset
    from evolvemem.loop.spec import parse_budgets
    from evolvemem.qtypes import is_adversarial
    from evolvemem.session import QuietReporter, resolve_config
    from evolvemem.space.budget import TokenBudget

    budgets = parse_budgets(args.budgets)
    largest = max(budgets)
    dataset = split_dataset(load_locomo_file(args.data), args.split)
    ws = offline_workspace(dataset)
    config = resolve_config(QuietReporter(), args.config)
    ws.ensure_stores(stores_needed(config))
    questions = dataset.questions
    ws.prepare(questions, config)
    print(f"{dataset.name} {args.split}: {len(questions)} questions; config {args.config}; budgets {budgets}")

    def one(budget: TokenBudget) -> list[Any]:
        return evaluate_contexts(ws, config.with_budget(budget), questions).records

    own = {b: timed(args.repeats, lambda b=b: one(TokenBudget(b))) for b in budgets}
    deep = {b: timed(args.repeats, lambda b=b: one(TokenBudget(b, largest))) for b in budgets}

    def together() -> list[Any]:
        out: list[Any] = []
        cuts = [(f"dev@{b}", TokenBudget(b, largest)) for b in budgets[1:]]
        evaluate_contexts(
            ws, config.with_budget(TokenBudget(budgets[0], largest)), questions, sink=out.extend, cuts=cuts
        )
        return out

    seconds, records = timed(args.repeats, together)
    for b in budgets:
        phase = "eval" if b == budgets[0] else f"dev@{b}"
        cut = {r.question_id: r.context_ids for r in records if r.phase == phase}
        if cut != {r.question_id: r.context_ids for r in deep[b][1]}:
            raise SystemExit(f"at {b} tokens one ranking's cut differs from the budget alone: a bug")
    separate = sum(s for s, _ in own.values())
    print(
        f"each budget alone (ranked as for itself): {separate:.2f} s; "
        f"ranked as for {largest}: {sum(s for s, _ in deep.values()):.2f} s; "
        f"one ranking cut at all: {seconds:.2f} s ({seconds / separate:.2f}x the separate passes)"
    )

    def recall(rows: list[Any]) -> float:
        values = [
            r.evidence_recall for r in rows if r.evidence_recall is not None and not is_adversarial(r.question_type)
        ]
        return sum(values) / len(values) if values else float("nan")

    for b in budgets:
        mine, theirs = deep[b][1], {r.question_id: r.context_ids for r in own[b][1]}
        moved = sum(1 for r in mine if r.context_ids != theirs[r.question_id]) / len(mine)
        print(
            f"  @{b}: recall ranked as for itself {recall(own[b][1]):.4f}, as for {largest} "
            f"{recall(mine):.4f} (diff {recall(mine) - recall(own[b][1]):+.4f}); contexts differ on {moved:.1%}"
        )


if __name__ == "__main__":
    main()
