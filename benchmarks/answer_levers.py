"""Does each answer-side lever make a real reader answer better, at a fixed token budget?

    python benchmarks/answer_levers.py [--model 1.5b|0.5b] [--base hybrid] [--context-tokens 600]
        [--questions 100] [--levers context_layout,answer_max_words] [--data FILE]
    python benchmarks/answer_levers.py --api-base URL --answer-model openai/NAME ...

The rows come from the action space, not from a list here: every answer-stage dimension
(`stage = "answer"`: what acts on a built context, its order included), each of its values other
than the base config's (a bool switched, every other choice of an enum, a number at its minimum and at the middle of its
range, geometric when the range is positive), with the settings it needs to act (`acts_when`)
switched on alongside. Each row changes one lever of the base config, and the row and the base answer the same questions: answerable questions of the
dev file's *test* conversations, category by category, every context cut at `--context-tokens`.
Printed per row: answerable F1, the paired difference against the base (95% interval with
conversations resampled), the one-sided p of the side the difference points to (`p(better)` or
`p(worse)`, as `evolve diff` names them), and how many answers the lever changed. The reader is Qwen2.5-Coder on llama.cpp (benchmarks/local_llm_server.py, `--model`)
or any OpenAI-compatible server (`--api-base`). Answers go through the LLM reply cache, so a run
started again asks only what it had not asked (and a row whose prompt is the base's, a rule on
the answer, costs no call at all).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._mechanisms import DEFAULT_DATA, load_locomo_file  # noqa: E402
from benchmarks._slice import WINDOW  # noqa: E402
from benchmarks.reader_frontier import stratified_questions  # noqa: E402


def lever_values(dim: Any, current: Any) -> list[Any]:
    """The values a row tries for one dimension: those other than `current`."""
    if dim.kind == "bool":
        return [not current]
    if dim.kind == "enum":
        return [c for c in dim.choices if c != current]
    # the geometric middle of a positive range (a word cap of 3-30 is tried at 3 and 9), else the middle
    middle = math.sqrt(dim.min * dim.max) if dim.min > 0 else dim.min + (dim.max - dim.min) / 2
    values = [dim.min, int(round(middle)) if dim.kind == "int" else middle]
    return [v for v in dict.fromkeys(values) if v != current]


def enablers(space: Any, name: str, values: dict[str, Any]) -> dict[str, Any] | None:
    """What else a change to `name` needs to act under `values` (its first `acts_when`
    alternative); None when that cannot be said (a condition that is not a bool switched on or a
    list of values)."""
    from evolvemem.space.acting import acts

    dim = space[name]
    if acts(space, name, values):
        return {}
    needed: dict[str, Any] = {}
    for condition in dim.acts_when[0]:
        other = space[condition.dimension]
        if condition.holds(values.get(condition.dimension), other):
            continue
        if condition.values:
            needed[condition.dimension] = condition.values[0]
        elif condition.switched == "on" and other.kind == "bool":
            needed[condition.dimension] = True
        else:
            return None
    return needed


def lever_rows(base: Any, wanted: set[str] | None) -> list[tuple[str, dict[str, Any]]]:
    """(label, changes) for every answer-side lever value (see the module docstring)."""
    space = base.space
    values = base.values()
    rows = []
    for name in space.answer_stage():
        if wanted is not None and name not in wanted:
            continue
        for value in lever_values(space[name], values[name]):
            needed = enablers(space, name, {**values, name: value})
            if needed is None:
                continue
            changes = {**needed, name: value}
            rows.append((", ".join(f"{k}={v}" for k, v in changes.items()), changes))
    return rows


@contextlib.contextmanager
def reader(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(model, api base) of the reader: the given server, else a local llama.cpp one for `--model`."""
    if args.api_base:
        yield args.answer_model, args.api_base
        return
    from benchmarks.local_llm_server import serve

    with serve(args.model, n_ctx=WINDOW) as server:
        yield server.model, server.api_base


def row_line(label: str, rows: list[Any], base: list[Any] | None) -> str:
    """One row's figures; against `base`, paired (loop/paired.py: conversations resampled)."""
    from evolvemem.loop.paired import compare, named_p

    ok = [r for r in rows if not r.failed]
    f1 = sum(r.f1 for r in ok) / max(len(ok), 1)
    line = f"{label:60s} F1 {f1:.3f}  n {len(ok)}  failed {len(rows) - len(ok)}"
    if base is None:
        return line
    stat = compare(rows, base, 1, 0, "main").groups["main"]  # the row is the candidate, the base the incumbent
    before = {r.question_id: r.prediction for r in base}
    changed = sum(1 for r in rows if before.get(r.question_id) != r.prediction)
    return (
        f"{line}  Δ {stat.diff:+.3f} [{stat.ci_low:+.3f}, {stat.ci_high:+.3f}]  {named_p(stat)}  "
        f"answers changed {changed}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--base", default="hybrid", help="the config every row changes one lever of")
    parser.add_argument("--context-tokens", type=int, default=600)
    parser.add_argument("--model", default="1.5b", help="local Qwen2.5-Coder size (ignored with --api-base)")
    parser.add_argument("--api-base", default="", help="an OpenAI-compatible server instead of a local one")
    parser.add_argument("--answer-model", default="openai/local", help="the model name at --api-base")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--levers", default="", help="comma-separated dimensions (default: every answer-side one)")
    args = parser.parse_args()
    from benchmarks.local_llm_server import placeholder_api_key

    placeholder_api_key()
    os.environ.setdefault("EVOLVEMEM_LLM_TIMEOUT", "600")  # a busy 2-core machine reads prompts slowly

    from evolvemem.data.split import split_dataset
    from evolvemem.session import ModelSettings, QuietReporter, evaluate, open_workspace
    from evolvemem.space.budget import TokenBudget
    from evolvemem.space.config import load_config

    dataset = split_dataset(load_locomo_file(args.data), "test")
    answerable = [q for q in dataset.questions if q.category not in dataset.adversarial_categories and q.evidence]
    questions = stratified_questions(answerable, args.questions)
    base = load_config(args.base)[0].with_budget(TokenBudget(args.context_tokens))
    wanted = {n.strip() for n in args.levers.split(",") if n.strip()} or None
    rows = lever_rows(base, wanted)
    with reader(args) as (model, api_base):
        print(
            f"{len(questions)} answerable test questions of {', '.join(sorted(dataset.conversations))}; "
            f"base {args.base}, contexts cut at {args.context_tokens} tokens; reader {model}; {len(rows)} levers",
            flush=True,
        )
        settings = ModelSettings(answer_model=model, extract_model="offline", api_base=api_base, context_window=WINDOW)
        ws = open_workspace(QuietReporter(), dataset, settings, cache_enabled=True)
        started = time.perf_counter()
        base_records = evaluate(ws, base, questions, concurrency=1).records
        print(f"{row_line('base ' + args.base, base_records, None)}  {time.perf_counter() - started:.0f} s")
        for label, changes in rows:
            config, _ = base.with_changes(changes)
            started = time.perf_counter()
            records = evaluate(ws, config, questions, concurrency=1).records
            line = row_line(label, records, base_records)
            print(f"{line}  {time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
