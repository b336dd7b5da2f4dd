"""Evolution against the reader you deploy: Qwen2.5-Coder 1.5B (llama.cpp) answering, on a fixed LoCoMo slice.

A fixed slice of the dev file — `--conversations` dev and as many held-out test conversations (the
usual split keeps them apart), `--answerable` answerable and `--unanswerable` adversarial questions
each, stratified by category — is evolved for `--rounds` rounds from `weak` and from `default`, diagnosed by
`rubric` and by `llm` (the same 1.5B model, menu mode), with the screening ladder on (rung 0: the
contexts' evidence recall without an answer call; rung 1: the paired minibatch; rung 2: every dev
question). Per run it prints, on the held-out test questions, start → best for answerable F1,
unanswerable F1 and evidence recall with the paired 95% interval (conversations resampled) and
one-sided p; the answer calls the rounds made against evaluating every candidate on every dev
question; the rung at which each candidate stopped; and the wall time.

Then the `evidence` objective (no answer model, offline, contexts cut at `--context-tokens`) is
evolved from `weak` on the same slice, and its start and best configs are answered by the 1.5B
model on the same test questions: does a gain in evidence recall transfer to answer F1?

Runs take hours on 2 cores; every run is resumable, so run this in the background and run it
again with the same `--out` after an interruption (finished runs are read back, not redone):

    nohup python benchmarks/evolve_llm.py --out runs/evolve-llm > evolve_llm.log 2>&1 &
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._slice import ADVERSARIAL, DEFAULT_DATA, WINDOW, stratified  # noqa: E402
from benchmarks.local_llm_server import LocalModelUnavailable, serve, server_available  # noqa: E402
from evolvemem.data.split import split_ids  # noqa: E402
from evolvemem.loop.paired import compare  # noqa: E402
from evolvemem.store.run_store import DB_NAME, RunStore  # noqa: E402


def write_slice(
    data: Path, conversations: int, answerable: int, unanswerable: int, folder: Path, name: str = "locomo_slice.json"
) -> Path:
    """`conversations` dev and as many test conversations (the usual split), a few questions each:
    paired intervals resample conversations, so many small clusters beat two large ones."""
    samples = json.loads(data.read_text(encoding="utf-8"))
    dev, test = split_ids([s["sample_id"] for s in samples])
    keep = set(dev[:conversations]) | set(test[:conversations])
    chosen = []
    for s in samples:
        if s["sample_id"] in keep:
            answer_qs = stratified([q for q in s["qa"] if q["category"] != ADVERSARIAL], answerable)
            trap_qs = [q for q in s["qa"] if q["category"] == ADVERSARIAL][:unanswerable]
            chosen.append({**s, "qa": answer_qs + trap_qs})
    path = folder / name
    path.write_text(json.dumps(chosen), encoding="utf-8")
    return path


def evolve(*args: str) -> dict:
    """One `evolve` command; its --json object. Its stderr is ours: in a log file, the command's
    progress lines show how far a long run has got."""
    proc = subprocess.run(
        [sys.executable, "-m", "evolvemem.cli.main", *args, "--json"], stdout=subprocess.PIPE, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"evolve {' '.join(args[:4])} … failed (exit {proc.returncode}; its error is above)")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_or_resume(out: Path, args: list[str], api_base: str | None = None) -> float:
    """Start the run in `out`, or resume it when it exists (a finished run is only read back; the
    server may listen on another port than when the run started)."""
    started = time.perf_counter()
    if (out / DB_NAME).exists():
        evolve("run", "--resume", str(out), *(["--api-base", api_base] if api_base else []))
    else:
        evolve("run", *args, "--out", str(out))
    return time.perf_counter() - started


def paired_cell(candidate: list, incumbent: list, group: str, metric: str) -> str:
    comparison = compare(candidate, incumbent, 1, 0, "balanced", metric=metric)
    s = comparison.groups[group]
    if not s.n:
        return "–"
    return (
        f"{s.incumbent:.3f} → {s.candidate:.3f} ({s.diff:+.3f} [{s.ci_low:+.3f}, {s.ci_high:+.3f}] "
        f"p={s.p_gain:.3f}, n={s.n})"
    )


def candidate_prices(store: RunStore) -> dict[tuple[int, int], float]:
    """Each candidate a round tried, keyed (round, attempt), at the calls a dev question costs it with
    nothing cached — answer, verification and retrieval-stage calls (an LLM-walking exploration asks
    several times a question) over the questions it answered itself (not reused). A candidate that
    rung 0 stopped answered nothing: round 0's price plus its own retrieval-stage calls a question."""
    rows = store.query("""SELECT round, phase, coalesce(sum(calls + coalesce(cache_hits, 0)), 0) AS calls,
                                 count(*) FILTER (WHERE reused IS NULL) AS n
                          FROM question_records WHERE phase NOT IN ('test_start', 'test_best') GROUP BY round, phase""")
    passed = {s.round: s.attempt for s in store.screenings() if s.outcome == "passed"}
    answered: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
    retrieval: dict[tuple[int, int], float] = {}
    for r in rows:
        phase = r["phase"]
        if phase.startswith("contexts"):
            attempt = int(phase.removeprefix("contexts"))
            if attempt:  # contexts0 holds the incumbent's contexts
                retrieval[(r["round"], attempt)] = r["calls"] / r["n"] if r["n"] else 0.0
            continue
        attempt = int(phase.removeprefix("screen")) if phase.startswith("screen") else passed.get(r["round"], 0)
        answered[(r["round"], attempt)][0] += r["calls"]
        answered[(r["round"], attempt)][1] += r["n"]
    round_0 = answered.pop((0, 0), [0.0, 1.0])
    start_price = round_0[0] / (round_0[1] or 1)
    prices = {key: calls / n for key, (calls, n) in answered.items() if n}
    for key, per_question in retrieval.items():
        prices.setdefault(key, start_price + per_question)
    return prices


def describe_run(out: Path, wall: float) -> dict:
    with RunStore(out, read_only=True) as store:
        start = store.round_records(0, "test_start")
        best_row = store.best_round()
        best = store.round_records(best_row, "test_best")
        screenings = store.screenings()
        decisions = store.query("SELECT round, decision, accepted, changes FROM decisions ORDER BY round")
        # the rounds after round 0 against evaluating every candidate they tried on every dev question
        answer_calls = store.query("""SELECT coalesce(sum(calls), 0) AS calls FROM usage WHERE round > 0
                                      AND role <> 'diagnose' AND phase NOT IN ('test_start', 'test_best')""")[0][
            "calls"
        ]
        prices = candidate_prices(store)
        candidates = len(prices)
        full_calls = (
            sum(prices.values())
            * store.query("SELECT count(*) AS n FROM question_records WHERE round = 0 AND phase = 'dev'")[0]["n"]
        )
    rungs = [
        f"r{s.round}.{s.attempt}:{s.rung if s.rung is not None else '-'}{'✓' if s.outcome == 'passed' else '✗'}"
        for s in screenings
    ]
    accepted = [d["round"] for d in decisions if d["accepted"] and d["round"] > 0]
    return {
        "best_round": best_row,
        "accepted": accepted,
        "main": paired_cell(best, start, "main", "f1"),
        "adversarial": paired_cell(best, start, "adversarial", "f1"),
        "recall": paired_cell(best, start, "main", "evidence_recall"),
        "answer_calls": answer_calls,
        "candidates": candidates,
        "vs_full": answer_calls / full_calls if full_calls else None,
        "rungs": " ".join(rungs) or "none",
        "wall_min": wall / 60,
    }


def eval_with_reader(out: Path, data: Path, config: Path, server_args: list[str]) -> list[dict]:
    evolve(
        "eval",
        "--data",
        str(data),
        "--split",
        "test",
        "--config",
        str(config),
        "--out",
        str(out),
        "--concurrency",
        "2",
        *server_args,
    )
    with RunStore(out, read_only=True) as store:
        return store.round_records(0, "eval")


def held_out_verdict(out: Path, run: Path, best_at: int, wide: Path, reader: list[str]) -> dict | None:
    """A finished run's start and best configs answered by the reader on more questions of the same
    held-out conversations (`--verdict-answerable`): the loop never saw them, and more questions
    per conversation narrow the held-out interval the run's own test slice leaves wide. None when
    the run kept its start (`best_at` 0: nothing to compare)."""
    if not best_at:
        return None
    start = eval_with_reader(
        out / f"verdict-{run.name}-start", wide, run / "rounds" / "round_00" / "config.toml", reader
    )
    best = eval_with_reader(out / f"verdict-{run.name}-best", wide, run / "best_config.toml", reader)
    return {
        "main": paired_cell(best, start, "main", "f1"),
        "adversarial": paired_cell(best, start, "adversarial", "f1"),
        "recall": paired_cell(best, start, "main", "evidence_recall"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=Path("runs/evolve-llm"))
    parser.add_argument("--conversations", type=int, default=4, help="dev conversations, and as many test ones")
    parser.add_argument("--answerable", type=int, default=10, help="answerable questions per conversation")
    parser.add_argument("--unanswerable", type=int, default=3, help="adversarial questions per conversation")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--starts", nargs="+", default=["weak", "default"])
    parser.add_argument("--diagnosers", nargs="+", default=["rubric", "llm"])
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=600,
        help="the evidence objective's token budget (what the 1.5B reader gets at most)",
    )
    parser.add_argument(
        "--verdict-answerable",
        type=int,
        default=0,
        help="also answer each run's start and best configs on this many answerable questions per "
        "held-out conversation (0: off)",
    )
    parser.add_argument(
        "--verdict-unanswerable",
        type=int,
        default=10,
        help="adversarial questions per held-out conversation in that verdict",
    )
    parser.add_argument("--skip-evidence", action="store_true")
    parser.add_argument(
        "--evidence-only",
        action="store_true",
        help="only the evidence objective's run and its re-scoring by the 1.5B reader",
    )
    args = parser.parse_args()
    from benchmarks.local_llm_server import placeholder_api_key

    placeholder_api_key()
    # llama-cpp-python's server answers one request at a time: with two in flight and an LLM-walking
    # mechanism's long prompts queued behind them, a call can wait minutes on 2 cores (the client's
    # 60 s default timed eight out in a row and stopped a run)
    os.environ.setdefault("EVOLVEMEM_LLM_TIMEOUT", "900")
    why = server_available()
    if why:
        raise SystemExit(why)
    args.out.mkdir(parents=True, exist_ok=True)
    data = write_slice(args.data, args.conversations, args.answerable, args.unanswerable, args.out)
    wide = (
        write_slice(
            args.data,
            args.conversations,
            args.verdict_answerable,
            args.verdict_unanswerable,
            args.out,
            "locomo_verdict.json",
        )
        if args.verdict_answerable
        else None
    )
    try:
        server_cm = serve("1.5b", n_ctx=WINDOW)
    except LocalModelUnavailable as exc:
        raise SystemExit(str(exc)) from None
    rows: list[tuple[str, dict]] = []
    verdicts: list[tuple[str, dict | None]] = []
    with server_cm as server:
        reader = [
            "--answer-model",
            server.model,
            "--extract-model",
            "offline",
            "--api-base",
            server.api_base,
            "--context-window",
            str(WINDOW),
        ]
        # cheapest news first: the first diagnoser from the first start, then the evidence objective's
        # transfer (its start is that run's, whose test answers are cached), then the other runs
        plan = [(d, s) for d in args.diagnosers for s in args.starts]
        if args.evidence_only:
            evidence_transfer(args, data, reader)
            plan = []
        for position, (diagnoser, start) in enumerate(plan):
            extra = (
                ["--diagnoser", "llm", "--diagnosis-mode", "menu", "--diagnosis-model", server.model]
                if diagnoser == "llm"
                else ["--diagnoser", diagnoser]
            )
            out = args.out / f"run-{start}-{diagnoser}"
            print(f"… {start} / {diagnoser} → {out}", file=sys.stderr, flush=True)
            wall = run_or_resume(
                out,
                [
                    "--data",
                    str(data),
                    "--rounds",
                    str(args.rounds),
                    "--init",
                    start,
                    "--concurrency",
                    "2",
                    *reader,
                    *extra,
                ],
                server.api_base,
            )
            described = describe_run(out, wall)
            rows.append((f"{start} / {diagnoser}", described))
            print_runs(rows)
            if wide is not None:
                verdicts.append(
                    (f"{start} / {diagnoser}", held_out_verdict(args.out, out, described["best_round"], wide, reader))
                )
                print_verdicts(verdicts, args)
            if position == 0 and not args.skip_evidence:
                evidence_transfer(args, data, reader)


def print_runs(rows: list[tuple[str, dict]]) -> None:
    print(
        "\n| start / diagnoser | test answerable F1 start → best (Δ [95% CI] p) | test unanswerable F1 | "
        "test evidence recall | accepted rounds | answer calls after round 0 (vs every candidate in full) | "
        "rung per candidate | wall |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, r in rows:
        ratio = f"{r['vs_full']:.2f}×" if r["vs_full"] is not None else "–"
        print(
            f"| {label} | {r['main']} | {r['adversarial']} | {r['recall']} | {r['accepted'] or 'none'} "
            f"(best {r['best_round']}) | {r['answer_calls']} ({ratio} of {r['candidates']} candidates) | "
            f"{r['rungs']} | {r['wall_min']:.0f} min |",
            flush=True,
        )


def print_verdicts(verdicts: list[tuple[str, dict | None]], args: argparse.Namespace) -> None:
    print(
        f"\n## held-out verdict: start vs best on {args.verdict_answerable} answerable + "
        f"{args.verdict_unanswerable} adversarial questions of each test conversation"
    )
    print("| start / diagnoser | answerable F1 start → best (Δ [95% CI] p) | unanswerable F1 | evidence recall |")
    print("|---|---|---|---|")
    for label, v in verdicts:
        if v is None:
            print(f"| {label} | best = start | | |", flush=True)
        else:
            print(f"| {label} | {v['main']} | {v['adversarial']} | {v['recall']} |", flush=True)


def evidence_transfer(args: argparse.Namespace, data: Path, reader: list[str]) -> None:
    out = args.out / "run-weak-evidence"
    started = time.perf_counter()
    run_or_resume(
        out,
        [
            "--data",
            str(data),
            "--rounds",
            str(args.rounds),
            "--init",
            "weak",
            "--objective",
            "evidence",
            "--context-tokens",
            str(args.context_tokens),
            "--diagnoser",
            "rubric",
        ],
    )
    wall = time.perf_counter() - started
    with RunStore(out, read_only=True) as store:
        start = store.round_records(0, "test_start")
        best_at = store.best_round()
        best = store.round_records(best_at, "test_best")
    recall = paired_cell(best, start, "main", "evidence_recall")
    start_eval = eval_with_reader(
        args.out / "eval-evidence-start", data, out / "rounds" / "round_00" / "config.toml", reader
    )
    best_eval = eval_with_reader(args.out / "eval-evidence-best", data, out / "best_config.toml", reader)
    print(
        f"\n## evidence objective from weak (offline, contexts cut at {args.context_tokens} tokens, "
        f"{wall:.1f} s), best round {best_at}"
    )
    print("| on the held-out test questions | start → best (Δ [95% CI] p) |")
    print("|---|---|")
    print(f"| evidence recall at {args.context_tokens} tokens (offline run) | {recall} |")
    print(f"| 1.5B answerable F1 | {paired_cell(best_eval, start_eval, 'main', 'f1')} |")
    print(f"| 1.5B unanswerable F1 | {paired_cell(best_eval, start_eval, 'adversarial', 'f1')} |")
    print(
        f"| 1.5B evidence recall (full contexts) | {paired_cell(best_eval, start_eval, 'main', 'evidence_recall')} |",
        flush=True,
    )


if __name__ == "__main__":
    main()
