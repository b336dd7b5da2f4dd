"""Does an evolved context make a real reader answer better than the plain hybrid's, at equal tokens?

    python benchmarks/reader_frontier.py --evolved runs/frontier-hybrid-1500 [--budget 1500]
        [--model 1.5b] [--questions 120] [--baseline hybrid]

Qwen2.5-Coder (llama.cpp on 127.0.0.1, benchmarks/local_llm_server.py) answers a fixed slice of
answerable questions of the dev file's *test* conversations (the loop never saw them), taken
category by category in file order, twice: with the evolved run's best config and with the
baseline preset, both cut at `--budget` estimated tokens. Memories are the offline ones, so the
contexts differ only by retrieval. Printed: answerable F1 and evidence recall of each, the paired
difference in F1 (95% interval with conversations resampled, one-sided p of a gain), context
tokens and seconds — after every chunk of questions, both configs answering each chunk in turn, so
a run stopped early still prints paired figures. Answers go through the LLM reply cache: an
interrupted run started again asks only what it had not asked.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._mechanisms import DEFAULT_DATA, load_locomo_file  # noqa: E402
from benchmarks._slice import WINDOW  # noqa: E402


def stratified_questions(questions: list, n: int) -> list:
    """`n` questions taking the categories in turn (file order within each)."""
    by_category: dict[str, list] = defaultdict(list)
    for q in questions:
        by_category[q.category].append(q)
    picked: list = []
    while len(picked) < n and any(by_category.values()):
        for category in sorted(by_category):
            if by_category[category] and len(picked) < n:
                picked.append(by_category[category].pop(0))
    return picked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--evolved", type=Path, required=True, help="an evolve run directory (its best config)")
    parser.add_argument("--baseline", default="hybrid")
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--model", default="1.5b")
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument("--chunk", type=int, default=10, help="questions answered by each config in turn")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-local-no-key")  # litellm's openai/ provider wants one
    # a 1,500-token prompt on a busy 2-core machine can take minutes; the server answers one at a time
    os.environ.setdefault("EVOLVEMEM_LLM_TIMEOUT", "600")

    from benchmarks.local_llm_server import serve
    from evolvemem.data.split import split_dataset
    from evolvemem.space.budget import TokenBudget
    from evolvemem.loop.paired import compare
    from evolvemem.session import ModelSettings, QuietReporter, evaluate, open_workspace
    from evolvemem.space.config import load_config

    dataset = split_dataset(load_locomo_file(args.data), "test")
    answerable = [q for q in dataset.questions if q.category not in dataset.adversarial_categories and q.evidence]
    questions = stratified_questions(answerable, args.questions)
    configs = {
        "evolved": load_config(str(args.evolved / "best_config.toml"))[0].with_budget(TokenBudget(args.budget)),
        args.baseline: load_config(args.baseline)[0].with_budget(TokenBudget(args.budget)),
    }
    print(
        f"{len(questions)} answerable test questions of {', '.join(sorted(dataset.conversations))}; "
        f"contexts cut at {args.budget} tokens; reader Qwen2.5-Coder {args.model}",
        flush=True,
    )
    records: dict[str, list[Any]] = {label: [] for label in configs}
    seconds = {label: 0.0 for label in configs}
    with serve(args.model, n_ctx=WINDOW) as server:
        settings = ModelSettings(
            answer_model=server.model, extract_model="offline", api_base=server.api_base, context_window=WINDOW
        )
        ws = open_workspace(QuietReporter(), dataset, settings, cache_enabled=True)
        # both configs answer each chunk in turn, so a run stopped early still has paired figures
        for first in range(0, len(questions), args.chunk):
            chunk = questions[first : first + args.chunk]
            for label, config in configs.items():
                started = time.perf_counter()
                records[label] += evaluate(ws, config, chunk, concurrency=1).records
                seconds[label] += time.perf_counter() - started
            report(records, seconds, args.baseline, compare)


def report(records: dict[str, list[Any]], seconds: dict[str, float], baseline: str, compare: Any) -> None:
    for label, rows in records.items():
        ok = [r for r in rows if not r.failed]
        n = max(len(ok), 1)
        failures = sorted({str(r.error or "")[:160] for r in rows if r.failed})
        print(
            f"{label:10s} {len(rows)} questions: answerable F1 {sum(r.f1 for r in ok) / n:.3f}  evidence recall "
            f"{sum(r.evidence_recall or 0 for r in ok) / n:.3f}  context {sum(r.context_tokens or 0 for r in ok) / n:.0f} "
            f"tokens  failed {len(rows) - len(ok)}{' (e.g. ' + failures[0] + ')' if failures else ''}  "
            f"{seconds[label] / max(len(rows), 1):.1f} s/question",
            flush=True,
        )
    stat = compare(records["evolved"], records[baseline], 1, 0, "main").groups["main"]
    print(
        f"paired, evolved − {baseline}: answerable F1 {stat.diff:+.3f} [{stat.ci_low:+.3f}, {stat.ci_high:+.3f}] "
        f"p(gain) {stat.p_gain:.3f} on {stat.n} questions",
        flush=True,
    )


if __name__ == "__main__":
    main()
