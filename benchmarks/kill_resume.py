"""Crash safety: kill `evolve run` at random moments, resume it each time, compare with a run never killed.

    python benchmarks/kill_resume.py [--kills 10] [--rounds 2] [--seed 0] [--modes offline,llm]

For each mode, a warm-up run fills the embedding and memory caches and a reference run goes
from start to finish undisturbed; then the same run (same options, another directory) is
started, SIGKILLed at a random moment, resumed with `evolve run --resume` (or started again with the same `--out` when the kill came before its
store existed), killed again, ... and
finally resumed to its end; a run that finishes before its next kill is followed by another, until
`--kills` kills were made. Kill moments are drawn uniformly between 0.3 s and the reference run's
wall time, so they land in start-up, memory building, answering, diagnosis and the test scores.

- offline: the offline roles (no model).
- llm: the answer role talks to the fake OpenAI-compatible server of the tests
  (tests/fake_llm_server.py, 127.0.0.1, a fixed latency per call) with the LLM cache off
  (`--no-cache`), so every answer is a call the server counts.

Prints per mode: records of the reference run lost by the killed runs, records duplicated, records
whose prediction or scores differ (all 0 expected), whether the rounds table (n, failed, F1s,
evidence recall per round and phase) is identical, and, against the server, the calls recorded in
the run's `usage` table vs the completions the server delivered: those its client read whole
(equal expected). What the server received beyond those is printed apart: completions written to a
process killed before it read them (TCP tells: the dead client's kernel resets a connection that
still holds unread data), and requests a kill left unanswered; both are asked again on resume. Each
call carries an id (the X-Evolvemem-Call-Id header, the `id` of its line in the run's usage.jsonl),
so the comparison is also made call by call: delivered but never journaled, journaled but never
delivered, journaled twice. Last, the cost of journaling a call against the DuckDB write per call
it replaces.
The built-in synth benchmark (invented people, 60 questions) keeps a mode to a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fake_llm_server import FakeLLMServer, last_user_message  # noqa: E402

MODEL = "openai/fake-model"
KEY = ("round", "phase", "question_id")
COMPARED = ("prediction", "f1", "failed", "evidence_recall", "context_ids")


def answer_word(body: dict) -> str:
    """A deterministic answer: the last word of the first memory in the prompt's context."""
    prompt = last_user_message(body).split("Now the real case.", 1)[-1]
    for line in prompt.splitlines():
        if line.startswith("1. "):
            return line.split()[-1].strip(".,!?;:\"'()")
    return "Not mentioned in the conversation."


def respond(body: dict) -> str:
    return "{}" if (body.get("response_format") or {}).get("type") == "json_object" else answer_word(body)


def command(out: Path, args: argparse.Namespace, server: FakeLLMServer | None) -> list[str]:
    base = [
        sys.executable,
        "-m",
        "evolvemem.cli.main",
        "run",
        "--benchmark",
        args.benchmark,
        "--rounds",
        str(args.rounds),
        "--seed",
        str(args.seed),
        "--out",
        str(out),
        "--quiet",
    ]
    if args.data:
        base += ["--data", args.data]
    if server is not None:
        base += [
            "--answer-model",
            MODEL,
            "--api-base",
            server.url,
            "--extract-model",
            "offline",
            "--no-cache",
            "--concurrency",
            str(args.concurrency),
        ]
    return base


def start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> None:
    _, err = process.communicate(timeout=1800)
    if process.returncode != 0:
        raise SystemExit(f"run failed (exit {process.returncode}): {err.strip()[-2000:]}")


def journaled_calls(out: Path) -> list[str]:
    """The call ids of a run's usage journal, one per call (a call journaled twice: twice)."""
    from evolvemem.store.usage_journal import JOURNAL_NAME

    path = out / JOURNAL_NAME
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [item["id"] for item in map(json.loads, lines) if item.get("calls") and item.get("id")]


def read(out: Path) -> tuple[list[dict], list[tuple], int]:
    """(question records, the rounds table, calls in the usage table) of a run directory."""
    from evolvemem.store import RunStore

    with RunStore(out) as store:  # read-write: replays a write-ahead log a killed process left
        records = store.query("SELECT * FROM question_records")
        rounds = [
            tuple(r.values())
            for r in store.query(
                """SELECT round, phase, status, n_questions, n_failed, round(main_f1, 9), round(all_f1, 9),
                      round(evidence_recall, 9) FROM rounds ORDER BY round, phase"""
            )
        ]
        calls = int(store.query("SELECT coalesce(sum(calls), 0) AS c FROM usage")[0]["c"])
    return records, rounds, calls


def compare(reference: list[dict], killed: list[dict]) -> dict[str, int]:
    keyed = {tuple(r[k] for k in KEY): r for r in reference}
    seen: dict[tuple, dict] = {}
    duplicated = 0
    for record in killed:
        key = tuple(record[k] for k in KEY)
        duplicated += key in seen
        seen[key] = record
    lost = sum(1 for key in keyed if key not in seen)
    differing = sum(1 for key, r in keyed.items() if key in seen and any(r[c] != seen[key][c] for c in COMPARED))
    extra = sum(1 for key in seen if key not in keyed)
    return {"lost": lost, "duplicated": duplicated, "differing": differing, "extra": extra}


def kill_until_done(
    out: Path,
    args: argparse.Namespace,
    server: FakeLLMServer | None,
    env: dict[str, str],
    rng: random.Random,
    window: float,
    budget: int,
) -> tuple[list[float], int]:
    """Start a run in `out`, SIGKILL it at a random moment, resume, ... until it finishes (at most
    `budget` kills, then one last resume to the end). Returns (kill moments, resumes)."""
    moments: list[float] = []
    resumes = 0
    cmd = command(out, args, server)
    while True:
        process = start(cmd, env)
        moment = rng.uniform(0.3, window)
        if len(moments) >= budget:
            finish(process)
            return moments, resumes
        try:
            process.wait(timeout=moment)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait()
            process.stderr.close()
            moments.append(moment)
            # killed before its store existed: nothing to resume, the same command again (as a user would)
            started = (out / "run.duckdb").exists()
            cmd = (
                [sys.executable, "-m", "evolvemem.cli.main", "run", "--resume", str(out), "--quiet"]
                if started
                else command(out, args, server)
            )
            resumes += int(started)
            continue
        if process.returncode != 0:
            raise SystemExit(f"{out.name}: a run failed: {process.stderr.read()[-2000:]}")
        return moments, resumes  # it finished before the kill


def one_mode(mode: str, args: argparse.Namespace, work: Path, rng: random.Random) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "OPENAI_API_KEY": "sk-benchmark",
        "EVOLVEMEM_CACHE_DIR": str(work / "cache"),
    }
    server = FakeLLMServer(respond, latency=args.latency).start() if mode == "llm" else None
    try:
        finish(start(command(work / f"{mode}-warm-up", args, server), env))  # embeddings and memories cached
        if server is not None:
            server.settle()
        warm = server.answered if server else 0
        reference = work / f"{mode}-reference"
        started = time.monotonic()
        finish(start(command(reference, args, server), env))
        wall = time.monotonic() - started
        if server is not None:
            server.settle()
        before = (
            (server.answered, server.request_count, server.unread, len(server.answered_ids)) if server else (0, 0, 0, 0)
        )
        ref_records, ref_rounds, ref_calls = read(reference)
        totals = {"lost": 0, "duplicated": 0, "differing": 0, "extra": 0}
        moments: list[float] = []
        resumes, records, recorded, identical, trials = 0, 0, 0, True, 0
        journaled: list[str] = []
        while len(moments) < args.kills:  # a run that finishes before its next kill: another run
            killed = work / f"{mode}-killed-{trials}"
            trials += 1
            got_moments, got_resumes = kill_until_done(killed, args, server, env, rng, wall, args.kills - len(moments))
            moments += got_moments
            resumes += got_resumes
            got_records, got_rounds, got_calls = read(killed)
            for name, value in compare(ref_records, got_records).items():
                totals[name] += value
            records += len(got_records)
            recorded += got_calls
            journaled += journaled_calls(killed)
            identical = identical and got_rounds == ref_rounds
        result: dict[str, Any] = {
            "mode": mode,
            "reference_seconds": wall,
            "kills": len(moments),
            "runs": trials,
            "resumes": resumes,
            "moments": moments,
            **totals,
            "records": records,
            "reference_records": len(ref_records) * trials,
            "rounds_identical": identical,
        }
        if server is not None:
            settled = server.settle()
            delivered = server.answered_ids[before[3] :]
            result.update(
                calls_recorded=recorded,
                server_answered=server.answered - before[0],
                server_received=server.request_count - before[1],
                unread=server.unread - before[2],
                reference_calls=ref_calls,
                reference_delivered=before[0] - warm,
                settled=settled,
                journal_lines=len(journaled),
                not_journaled=len(set(delivered) - set(journaled)),
                not_delivered=len(set(journaled) - set(delivered)),
                journaled_twice=len(journaled) - len(set(journaled)),
                ids_missing=server.answered - before[0] - len(delivered),
            )
        return result
    finally:
        if server is not None:
            server.stop()


def journal_overhead(calls: int = 2000) -> tuple[float, float]:
    """(µs to journal one call, ms of the per-call usage write to DuckDB the journal replaced),
    each the mean of `calls` in a fresh run directory."""
    from evolvemem.contracts.usage import Usage
    from evolvemem.store.rows import UsageRow
    from evolvemem.store import RunStore

    usage = Usage(calls=1, prompt_tokens=812, completion_tokens=9)
    with tempfile.TemporaryDirectory() as folder, RunStore(Path(folder)) as store:
        started = time.perf_counter()
        for _ in range(calls):
            store.journal.append("answer", usage, "0123456789abcdef0123456789abcdef")
        journal_us = (time.perf_counter() - started) / calls * 1e6
        row = UsageRow(0, "dev", "answer", usage)
        started = time.perf_counter()
        for _ in range(calls // 10):
            store.record_usage([row])
        duckdb_ms = (time.perf_counter() - started) / (calls // 10) * 1e3
    return journal_us, duckdb_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="the run's seed and the kill moments'")
    parser.add_argument("--modes", default="offline,llm")
    parser.add_argument("--benchmark", default="synth")
    parser.add_argument("--data", default=None)
    parser.add_argument("--latency", type=float, default=0.1, help="seconds the fake server takes per call")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--keep", action="store_true", help="keep the run directories (printed)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="evolvemem-kill-resume-"))
    try:
        for mode in args.modes.split(","):
            r = one_mode(mode.strip(), args, work, rng)
            print(
                f"{r['mode']}: {r['kills']} kills at {', '.join(f'{m:.1f}' for m in r['moments'])} s "
                f"(reference run {r['reference_seconds']:.1f} s), {r['resumes']} resumes, {r['runs']} run(s)"
            )
            print(
                f"  records: {r['records']} (reference × runs {r['reference_records']}); lost {r['lost']}, duplicated "
                f"{r['duplicated']}, differing {r['differing']}, not in the reference {r['extra']}; rounds table "
                f"identical: {r['rounds_identical']}"
            )
            if "calls_recorded" in r:
                unanswered = r["server_received"] - r["server_answered"] - r["unread"]
                print(
                    f"  calls recorded {r['calls_recorded']} vs completions the server delivered (read whole by "
                    f"the client) {r['server_answered']} "
                    f"({'equal' if r['calls_recorded'] == r['server_answered'] else 'DIFFERENT'}); the reference "
                    f"run (never killed): {r['reference_calls']} recorded, {r['reference_delivered']} delivered"
                )
                print(
                    f"  requests received {r['server_received']}: beyond those delivered, {r['unread']} completions "
                    f"written to a process killed before it read them and {unanswered} requests a kill left "
                    f"unanswered (both asked again on resume)"
                    + ("" if r["settled"] else "; WARNING: some connections had no verdict yet")
                )
                print(
                    f"  call by call: {r['journal_lines']} calls journaled; delivered but never journaled "
                    f"{r['not_journaled']} (read by the client, killed before its journal line), journaled but "
                    f"never delivered {r['not_delivered']}, journaled twice {r['journaled_twice']}"
                    + (f", delivered without an id {r['ids_missing']}" if r["ids_missing"] else "")
                )
        journal_us, duckdb_ms = journal_overhead()
        print(
            f"journaling a call: {journal_us:.1f} µs (one append to usage.jsonl); the per-call DuckDB usage "
            f"write it replaces: {duckdb_ms:.2f} ms"
        )
        if args.keep:
            print(f"run directories: {work}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
