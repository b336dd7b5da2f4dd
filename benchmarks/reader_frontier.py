"""How much of an evidence gain becomes answers: a real reader on the same held-out questions, row by row.

    python benchmarks/reader_frontier.py --rows oracle,hybrid,evolved=runs/frontier-hybrid-600 \
        [--budget 600] [--model 1.5b] [--questions 300] [--baseline hybrid]

Qwen2.5-Coder (llama.cpp on 127.0.0.1, benchmarks/local_llm_server.py) answers a fixed slice of
answerable questions of the dev file's *test* conversations (the loop never saw them), taken
conversation by conversation and category by category in file order, once per row, every context cut at `--budget` estimated tokens.
A row is a preset (`hybrid`), `label=RUN` (a run directory's best config), `oracle` (the gold
evidence turns only: the reader's ceiling) or `oracle+distractors` (those, topped up to the budget
with the baseline's retrieved lines), each optionally followed by `:SETTING=VALUE` changes (one
answer-side lever measured beside its base: `evolved=RUN:context_layout=sessions`); `--evolved RUN`
adds the row `evolved=RUN`. Memories are the
offline ones, so contexts differ only by retrieval.

`--evolve-from RUN` first evolves RUN's config with this reader answering (`evolve run --init RUN
--objective main --context-tokens BUDGET`, rubric diagnoser, the screening ladder on, every round
run: `--patience 0`) on `--dev-questions` answerable questions of the dev conversations, into
`--evolve-out` (resumed when it exists), and adds its best config as the row `reader-evolved`. By
default it runs with `--freeze retrieval` (`--evolve-freeze`): RUN's retrieval was evolved on
evidence recall over every dev question, which costs no answer; a reader's few answered questions
are spent on what acts on the context — order, layout, answer style and length, quoting,
abstention, date resolution. `--evolve-freeze ''` lets it change both sides. An exploration there
changes one setting (`--evolve-explore-dims 1`): a bundle of three answer-side settings, the loop's
default, nearly always held one that cost this reader, so a bundle's loss said nothing of the others.

Printed after every chunk (every row answers each chunk in turn, so a run stopped early still has
paired figures): per row, answerable F1, evidence recall, the conversion rate (F1 on the questions
whose whole gold evidence was in context), the reader failure split (evidence full / partial / none x
right / wrong, and why the full-evidence answers were wrong: scoring/failure_split.py), context tokens
and seconds; then each row's paired difference in F1 against the baseline (95% interval with
conversations resampled, p of a gain), and against each row of `--against` (`--against
oracle,oracle+distractors` splits the gap to the ceiling into what the other lines of a full
context cost and what the missing evidence costs). Answers go through the LLM reply cache: an interrupted run
started again asks only what it had not asked.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._mechanisms import DEFAULT_DATA, load_locomo_file  # noqa: E402
from benchmarks._slice import ADVERSARIAL, WINDOW  # noqa: E402


def stratified_questions(questions: list, n: int) -> list:
    """`n` questions taking the conversations in turn and, within each, the categories in turn
    (file order within each): the paired intervals resample conversations, so each conversation
    holds about as many questions, and a run stopped early is balanced too."""
    by_cell: dict[tuple[str, str], list] = defaultdict(list)
    for q in questions:
        by_cell[(q.conversation_id, q.category)].append(q)
    conversations = sorted({conv for conv, _ in by_cell})
    categories = sorted({category for _, category in by_cell})
    picked: list = []
    turn = 0
    while len(picked) < n and any(by_cell.values()):
        conv = conversations[turn % len(conversations)]
        category = categories[(turn // len(conversations)) % len(categories)]
        if by_cell[(conv, category)]:
            picked.append(by_cell[(conv, category)].pop(0))
        turn += 1
    return picked


@dataclass(frozen=True)
class Row:
    """One line of the table: a config and what the reader is handed."""

    label: str
    config: Any  # RetrievalConfig (imported inside main, after the path is set)
    mode: Any  # ContextMode


def parse_rows(spec: str, evolved: Path | None, baseline: str, budget: int) -> list[Row]:
    """`--rows` as Rows, the baseline always among them (oracle modes use the baseline's layout)."""
    from evolvemem.contracts.vocab import ContextMode
    from evolvemem.space.budget import TokenBudget
    from evolvemem.space.config import load_config

    def config_of(name: str) -> Any:
        source = str(Path(name) / "best_config.toml") if Path(name).is_dir() else name
        return load_config(source)[0].with_budget(TokenBudget(budget))

    items = [item.strip() for item in spec.split(",") if item.strip()]
    if evolved is not None:
        items.append(f"evolved={evolved}")
    if baseline not in items:
        items.insert(0, baseline)
    rows = []
    for item in items:
        base, *settings = item.split(":")
        if base in (ContextMode.ORACLE, ContextMode.ORACLE_DISTRACTORS):
            row = Row(base, config_of(baseline), ContextMode(base))
        else:
            label, _, source = base.partition("=")
            row = Row(label, config_of(source or label), ContextMode.RETRIEVED)
        rows.append(with_settings(row, settings) if settings else row)
    return rows


def against_rows(spec: str, rows: list[Row]) -> list[str]:
    """`--against` as row labels; a label that is not a row stops the script in one line."""
    labels = [label.strip() for label in spec.split(",") if label.strip()]
    unknown = sorted(set(labels) - {row.label for row in rows})
    if unknown:
        raise SystemExit(f"--against {', '.join(unknown)}: not among the rows ({', '.join(r.label for r in rows)})")
    return labels


def with_settings(row: Row, settings: list[str]) -> Row:
    """`row` with `SETTING=VALUE` changes to its config (an answer-side lever's row beside its
    base: `evolved=RUN:quote_then_answer=true`); an unknown setting or a value out of range stops
    the script in one line."""
    changes: dict[str, Any] = {}
    for setting in settings:
        name, sep, raw = setting.partition("=")
        if not sep:
            raise SystemExit(f"row setting {setting!r}: expected SETTING=VALUE")
        try:
            changes[name.strip()] = json.loads(raw)
        except ValueError:
            changes[name.strip()] = raw.strip()
    from evolvemem.errors import ConfigError

    try:
        config, clamps = row.config.with_changes(changes)
    except ConfigError as exc:
        raise SystemExit(f"row {row.label}: {exc}")
    if clamps:
        raise SystemExit(f"row {row.label}: out-of-range value for {', '.join(c.field for c in clamps)}")
    return Row(":".join([row.label, *settings]), config, row.mode)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--rows", default="", help="comma-separated rows: presets, label=RUN, oracle, oracle+distractors"
    )
    parser.add_argument("--evolved", type=Path, default=None, help="adds the row evolved=RUN (a run's best config)")
    parser.add_argument("--baseline", default="hybrid")
    parser.add_argument(
        "--against",
        default="",
        help="comma-separated rows every other row is also paired with (e.g. oracle,oracle+distractors: "
        "the gap to the ceiling, and what the distractors cost)",
    )
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--model", default="1.5b")
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument("--chunk", type=int, default=10, help="questions answered by each config in turn")
    parser.add_argument(
        "--records", type=Path, default=None, help="also write every answer, row by row, to this JSONL file"
    )
    parser.add_argument("--evolve-from", type=Path, default=None, help="evolve RUN's config with the reader answering")
    parser.add_argument(
        "--evolve-out", type=Path, default=None, help="that run's directory (default runs/reader-evolved-BUDGET)"
    )
    parser.add_argument("--evolve-rounds", type=int, default=7)
    parser.add_argument(
        "--evolve-freeze", default="retrieval", help="that run's --freeze ('' lets it change retrieval too)"
    )
    parser.add_argument(
        "--evolve-explore-dims",
        type=int,
        default=1,
        help="that run's --explore-dims: settings an exploration changes at once (one: each a lever's own test)",
    )
    parser.add_argument("--dev-questions", type=int, default=80, help="answerable dev questions that run evolves on")
    args = parser.parse_args()
    from benchmarks.local_llm_server import placeholder_api_key

    placeholder_api_key()
    # a 1,500-token prompt on a busy 2-core machine can take minutes; the server answers one at a time
    os.environ.setdefault("EVOLVEMEM_LLM_TIMEOUT", "600")

    from benchmarks.local_llm_server import serve
    from evolvemem.data.split import split_dataset
    from evolvemem.loop.paired import compare
    from evolvemem.session import ModelSettings, QuietReporter, evaluate, open_workspace

    dataset = split_dataset(load_locomo_file(args.data), "test")
    answerable = [q for q in dataset.questions if q.category not in dataset.adversarial_categories and q.evidence]
    questions = stratified_questions(answerable, args.questions)
    rows = parse_rows(args.rows, args.evolved, args.baseline, args.budget)
    against = against_rows(args.against, rows)
    print(
        f"{len(questions)} answerable test questions of {', '.join(sorted(dataset.conversations))}; "
        f"contexts cut at {args.budget} tokens; reader Qwen2.5-Coder {args.model}; rows: "
        + ", ".join(row.label for row in rows),
        flush=True,
    )
    records: dict[str, list[Any]] = {row.label: [] for row in rows}
    seconds = {row.label: 0.0 for row in rows}
    with serve(args.model, n_ctx=WINDOW) as server:
        settings = ModelSettings(
            answer_model=server.model, extract_model="offline", api_base=server.api_base, context_window=WINDOW
        )
        if args.evolve_from is not None:
            out = args.evolve_out or Path(f"runs/reader-evolved-{args.budget}")
            evolve_with_reader(args, out, server)
            rows += parse_rows(f"reader-evolved={out}", None, args.baseline, args.budget)[1:]
            records.update({row.label: [] for row in rows[-1:]})
            seconds.update({row.label: 0.0 for row in rows[-1:]})
        ws = open_workspace(QuietReporter(), dataset, settings, cache_enabled=True)
        for first in range(0, len(questions), args.chunk):
            chunk = questions[first : first + args.chunk]
            for row in rows:
                started = time.perf_counter()
                records[row.label] += evaluate(ws, row.config, chunk, concurrency=1, mode=row.mode).records
                seconds[row.label] += time.perf_counter() - started
            report(records, seconds, [args.baseline, *against], compare)
            if args.records is not None:
                write_records(args.records, records)


def write_dev_slice(data: Path, dev_questions: int, folder: Path) -> Path:
    """Every conversation of `data` (so the usual split holds), with `dev_questions` answerable
    questions spread over the dev conversations (categories in turn) and one answerable question per
    test conversation: the loop decides on dev; held-out figures are this script's own rows."""
    from benchmarks._slice import stratified
    from evolvemem.data.split import split_ids

    samples = json.loads(data.read_text(encoding="utf-8"))
    dev, _ = split_ids([s["sample_id"] for s in samples])
    per_dev = -(-dev_questions // max(len(dev), 1))
    sliced = []
    for s in samples:
        answerable = [q for q in s["qa"] if q["category"] != ADVERSARIAL and q.get("evidence")]
        sliced.append({**s, "qa": stratified(answerable, per_dev if s["sample_id"] in dev else 1)})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "dev_slice.json"
    path.write_text(json.dumps(sliced), encoding="utf-8")
    return path


def evolve_with_reader(args: argparse.Namespace, out: Path, server: Any) -> None:
    """The loop from `--evolve-from` with the reader answering, started or resumed in `out`."""
    from benchmarks.evolve_llm import run_or_resume

    slice_path = write_dev_slice(args.data, args.dev_questions, out.parent / f"{out.name}-data")
    print(f"… evolving {args.evolve_from} with the reader answering → {out}", flush=True)
    wall = run_or_resume(
        out,
        [
            "--data", str(slice_path), "--init", str(args.evolve_from), "--objective", "main",
            "--context-tokens", str(args.budget), "--rounds", str(args.evolve_rounds), "--diagnoser", "rubric",
            "--answer-model", server.model, "--extract-model", "offline", "--api-base", server.api_base,
            "--context-window", str(WINDOW), "--concurrency", "1", "--patience", "0",
            "--explore-dims", str(args.evolve_explore_dims), "-q",
            *(["--freeze", args.evolve_freeze] if args.evolve_freeze else []),
        ],
        server.api_base,
    )  # fmt: skip
    print(f"… {out} finished ({wall / 60:.0f} min this time)", flush=True)


def write_records(path: Path, records: dict[str, list[Any]]) -> None:
    """Every answer so far, one JSON object a line with its row's label (rewritten after each chunk):
    what the failure split counts can be read answer by answer."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for label, rows in records.items():
            for r in rows:
                out.write(json.dumps({"row": label, **r.as_row()}, default=str) + "\n")


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def split_text(rows: list[Any]) -> str:
    """Evidence in context x right/wrong, then the classes of the full-evidence wrong answers."""
    cells = Counter((r.evidence_in_context, r.answer_right) for r in rows if r.evidence_in_context)
    grid = " ".join(
        f"{where} {cells[(where, True)]}/{cells[(where, True)] + cells[(where, False)]}"
        for where in ("full", "partial", "none")
    )
    why = Counter(r.reader_failure for r in rows if r.reader_failure)
    return f"right/asked by evidence: {grid}; full but wrong: " + (
        ", ".join(f"{k} {v}" for k, v in why.most_common()) or "none"
    )


def report(records: dict[str, list[Any]], seconds: dict[str, float], baselines: list[str], compare: Any) -> None:
    """Each row's figures, then each row paired with each of `baselines` (the first: `--baseline`)."""
    for label, rows in records.items():
        ok = [r for r in rows if not r.failed]
        full = [r.f1 for r in ok if (r.evidence_recall or 0) >= 1.0]
        failures = sorted({str(r.error or "")[:160] for r in rows if r.failed})
        print(
            f"{label:18s} {len(rows)} questions: answerable F1 {mean([r.f1 for r in ok]):.3f}  evidence recall "
            f"{mean([r.evidence_recall or 0 for r in ok]):.3f}  conversion (F1 with all evidence) {mean(full):.3f} "
            f"on {len(full)}  context {mean([r.context_tokens or 0 for r in ok]):.0f} tokens  failed "
            f"{len(rows) - len(ok)}{' (e.g. ' + failures[0] + ')' if failures else ''}  "
            f"{seconds[label] / max(len(rows), 1):.1f} s/question",
            flush=True,
        )
        print(f"{'':18s} {split_text(ok)}", flush=True)
    paired: set[frozenset[str]] = set()
    for baseline in baselines:
        for label, rows in records.items():
            if label == baseline or frozenset((label, baseline)) in paired:  # each pair once
                continue
            paired.add(frozenset((label, baseline)))
            stat = compare(rows, records[baseline], 1, 0, "main").groups["main"]
            print(
                f"paired, {label} − {baseline}: answerable F1 {stat.diff:+.3f} [{stat.ci_low:+.3f}, "
                f"{stat.ci_high:+.3f}] p(gain) {stat.p_gain:.3f} on {stat.n} questions",
                flush=True,
            )


if __name__ == "__main__":
    main()
