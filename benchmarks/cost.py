"""What screening and context reuse save: a `--rounds`-round LLM-answered run with full evaluation
vs the same run with paired minibatch screening and context-level reuse.

Both runs answer through a real litellm path against the fake OpenAI-compatible server of the
tests (tests/fake_llm_server.py) at a fixed latency per call, so answer calls are exact counts
of requests the server received. The fake's "model" is an invented word-overlap reader: it
answers with the words of the retrieved memory that shares most content words with the question
(and abstains when none shares two), so a config that changes the context changes the answer.
Memories are extracted offline, the diagnoser is the rubric, the LLM reply cache is off in both
runs (`--no-cache`): every answer either reaches the server or is reused by the loop itself.

Printed per run: answer calls (dev rounds and in all, test included), tokens, wall, the dev and
held-out test start → best, and the paired difference of the two runs' held-out test records
(screened − full, same questions) with its 95% interval. `--compare-sequential` adds the screened
run with `--no-sequential` (every passing candidate on all of dev): the rounds each run accepted
and the held-out difference of the two (loop/sequential.py). With `--local N` the same pair runs on
a slice of N questions per conversation answered by the local 0.5B model
(benchmarks/local_llm_server.py) where it is installed.

    python benchmarks/cost.py [--data ../shared/data/locomo10_dev8.json] [--rounds 7] [--latency 0.02]
        [--screen-fraction 0.25] [--extra "--screen-budget 2"] [--compare-sequential]
        [--local N [--local-rounds 3] [--only-local]]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evolvemem.loop.paired import compare  # noqa: E402
from evolvemem.store.costs import round_costs, total_cost  # noqa: E402
from evolvemem.store.run_store import RunStore  # noqa: E402
from tests.fake_llm_server import FakeLLMServer, message_text, wants_json  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10_dev8.json"
MODEL = "openai/fake-reader"
ABSTAIN = "Not mentioned in the conversation."
_WORD = re.compile(r"[a-z0-9']+")
_SHORT = {
    "what",
    "when",
    "where",
    "which",
    "who",
    "whom",
    "whose",
    "why",
    "how",
    "does",
    "did",
    "do",
    "the",
    "and",
    "for",
    "with",
    "that",
    "this",
    "from",
    "have",
    "has",
    "was",
    "were",
    "are",
    "is",
    "a",
    "an",
    "of",
    "to",
    "in",
    "on",
    "at",
    "by",
    "it",
    "its",
    "be",
    "or",
    "as",
    "about",
    "they",
    "their",
}


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _SHORT}


def overlap_reader(body: dict) -> str:
    """The fake model: JSON calls get an empty object (the roles fall back); an answer prompt gets
    the words of its best-overlapping memory that the question does not already say."""
    if wants_json(body):
        return "{}"
    prompt = next((message_text(m) for m in body.get("messages", []) if m.get("role") == "user"), "")
    case = prompt.split("Now the real case.", 1)[-1]
    questions = re.findall(r"^Question: (.+)$", case, re.M)
    if not questions:
        return ABSTAIN
    asked = content_words(questions[-1])
    best, best_score = "", 1
    for line in re.findall(r"^\d+\. (.+)$", case, re.M):
        body_text = line.split(": ", 1)[-1] if "] " in line else line
        score = len(asked & content_words(body_text))
        if score > best_score:
            best, best_score = body_text, score
    if not best:
        return ABSTAIN
    kept = [w for w in best.split() if w.lower().strip(".,!?") not in asked]
    return " ".join(kept[:8]) or ABSTAIN


def is_answer_call(body: dict) -> bool:
    return not wants_json(body) and "Now the real case." in "".join(message_text(m) for m in body.get("messages", []))


def evolve_run(data: Path, out: Path, rounds: int, model: str, api_base: str, extra: list[str]) -> dict:
    env = {**os.environ, "OPENAI_API_KEY": "not-needed-here", "EVOLVEMEM_LLM_BACKOFF_BASE": "0.01"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evolvemem.cli.main",
            "run",
            "--benchmark",
            "locomo",
            "--data",
            str(data),
            "--rounds",
            str(rounds),
            "--init",
            "weak",
            "--diagnoser",
            "rubric",
            "--patience",
            "0",
            "--answer-model",
            model,
            "--api-base",
            api_base,
            "--extract-model",
            "offline",
            "--no-cache",
            "--out",
            str(out),
            "--quiet",
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if proc.returncode != 0:
        raise SystemExit(f"evolve run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(
    label: str, data: Path, out: Path, rounds: int, latency: float, extra: list[str], local: Any = None
) -> dict:
    """One run against the fake server (answer calls counted by the server) or, with `local`, the
    running local model server (answer calls as the run store recorded them)."""
    if local is not None:
        started = time.perf_counter()
        result = evolve_run(
            data, out, rounds, local.model, local.api_base, ["--context-window", str(local.n_ctx), *extra]
        )
        wall = time.perf_counter() - started
        answer_calls = -1
    else:
        with FakeLLMServer(overlap_reader, latency=latency) as server:
            started = time.perf_counter()
            result = evolve_run(data, out, rounds, MODEL, server.url, extra)
            wall = time.perf_counter() - started
            answer_calls = sum(1 for body in server.requests if is_answer_call(body))
    with RunStore(out, read_only=True) as store:
        per_round = round_costs(store)
        costs = total_cost(per_round)
        usage = store.query("""SELECT sum(calls) FILTER (WHERE role = 'answer') AS answer_calls,
                                      sum(calls) FILTER (WHERE role = 'answer' AND phase NOT LIKE 'test%') AS dev_calls,
                                      sum(prompt_tokens + completion_tokens) AS tokens FROM usage""")[0]
        test_best = store.round_records(store.best_round(), "test_best")
        screenings = store.screenings()
        accepted = [int(r["round"]) for r in store.query("SELECT round FROM decisions WHERE accepted ORDER BY round")]
        stopped = store.query("SELECT round, n_questions FROM rounds WHERE phase = 'dev' AND stopped_at IS NOT NULL")
    if answer_calls < 0:
        answer_calls = int(usage["answer_calls"] or 0)
    return {
        "per_round": [c.as_dict() for c in per_round],
        "label": label,
        "result": result,
        "wall": wall,
        "answer_calls": answer_calls,
        "dev_answer_calls": int(usage["dev_calls"] or 0),
        "stored_answer_calls": int(usage["answer_calls"] or 0),
        "tokens": int(usage["tokens"] or 0),
        "costs": costs.as_dict(),
        "test_best": test_best,
        "screened_out": sum(1 for s in screenings if s.outcome == "screened_out"),
        "screenings": len(screenings),
        "accepted": accepted,
        "stopped": [(int(r["round"]), int(r["n_questions"] or 0)) for r in stopped],
    }


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def report(full: dict, screened: dict) -> None:
    print(
        f"{'run':<34}{'answer calls':>13}{'dev calls':>11}{'tokens':>11}{'wall s':>9}"
        f"{'dev start→best all':>22}{'test start→best main':>24}{'test start→best all':>22}"
    )
    for run in (full, screened):
        dev, test = run["result"]["dev"], run["result"]["test"]
        print(
            f"{run['label']:<34}{run['answer_calls']:>13}{run['dev_answer_calls']:>11}{run['tokens']:>11}"
            f"{run['wall']:>9.1f}{fmt(dev['start']['all_f1']) + '→' + fmt(dev['best']['all_f1']):>22}"
            f"{fmt(test['start']['main_f1']) + '→' + fmt(test['best']['main_f1']):>24}"
            f"{fmt(test['start']['all_f1']) + '→' + fmt(test['best']['all_f1']):>22}"
        )
    for run in (full, screened):
        assert run["answer_calls"] == run["stored_answer_calls"], (
            run["label"],
            run["answer_calls"],
            run["stored_answer_calls"],
        )
    print(
        "screened run, per round: "
        + "; ".join(
            f"r{c['round']} {c['calls']} calls ({c['scored']} answered, {c['reused_context']} context-reused, "
            f"{c['screenings']} screened/{c['screened_out']} out)"
            for c in screened["per_round"]
        )
    )
    c = screened["costs"]
    print(
        f"screened run: {screened['screenings']} screenings, {screened['screened_out']} screened out; "
        f"{c['scored']} questions answered, {c['reused_context']} reused by context, {c['reused_config']} by config"
    )
    print(
        f"ratio answer calls (screened / full): all {screened['answer_calls'] / full['answer_calls']:.3f}×, "
        f"dev rounds {screened['dev_answer_calls'] / full['dev_answer_calls']:.3f}×; "
        f"tokens {screened['tokens'] / full['tokens']:.3f}×; wall {screened['wall'] / full['wall']:.3f}×"
    )
    print_held_out(screened, full, "screened − full")


def print_held_out(candidate: dict, reference: dict, label: str) -> None:
    """The two runs' held-out test records paired, main and all F1, and whether 0 is inside the interval."""
    paired = compare(candidate["test_best"], reference["test_best"], 1, 0, "balanced")
    for group in ("main", "all"):
        s = paired.groups[group]
        inside = s.ci_low <= 0.0 <= s.ci_high
        print(
            f"held-out test {group} F1, {label} (paired, n={s.n}): {s.diff:+.4f} "
            f"[{s.ci_low:+.4f}, {s.ci_high:+.4f}] → {'within' if inside else 'OUTSIDE'} the interval"
        )


def report_sequential(full: dict, sequential: dict, all_looks: dict) -> None:
    """The screened run (sequential dev evaluation, the default) beside the same run with
    `--no-sequential`: answer calls, the rounds each accepted, and their held-out difference."""
    for run in (sequential, all_looks):
        stops = ", ".join(f"r{r} after {n} q" for r, n in run["stopped"]) or "none"
        print(
            f"{run['label']}: answer calls {run['answer_calls']} (dev rounds {run['dev_answer_calls']}), "
            f"{run['answer_calls'] / full['answer_calls']:.3f}× full evaluation's; accepted rounds "
            f"{run['accepted'] or 'none'}; stopped early: {stops}"
        )
    same = "the same" if sequential["accepted"] == all_looks["accepted"] else "DIFFERENT"
    print(f"accepted rounds with and without sequential evaluation: {same}")
    print_held_out(sequential, all_looks, "sequential − not")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds the fake server takes per call")
    parser.add_argument("--screen-fraction", default="0.25")
    parser.add_argument("--extra", default="", help="more `evolve run` options for the screened run")
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    parser.add_argument(
        "--local",
        type=int,
        default=0,
        metavar="N",
        help="also run the pair with the local 0.5B model on N questions per conversation of "
        "2 dev + 2 test conversations",
    )
    parser.add_argument("--local-rounds", type=int, default=3)
    parser.add_argument("--only-local", action="store_true", help="skip the fake-server pair")
    parser.add_argument(
        "--compare-sequential",
        action="store_true",
        help="also run the screened run with --no-sequential and compare answer calls, accepted rounds and "
        "the held-out outcome",
    )
    args = parser.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"no LoCoMo file at {args.data}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if args.only_local:
            local_pair(args, folder)
            return
        full = measure(
            "full evaluation",
            args.data,
            folder / "full",
            args.rounds,
            args.latency,
            ["--screen-fraction", "0", "--no-context-reuse"],
        )
        screened = measure(
            f"screening {args.screen_fraction} + context reuse",
            args.data,
            folder / "screened",
            args.rounds,
            args.latency,
            ["--screen-fraction", args.screen_fraction, *args.extra.split()],
        )
        print(f"fake server, {args.latency:g} s per call, {args.rounds} rounds from weak, rubric, LLM cache off")
        report(full, screened)
        if args.compare_sequential:
            all_looks = measure(
                "screened, --no-sequential",
                args.data,
                folder / "no-sequential",
                args.rounds,
                args.latency,
                ["--screen-fraction", args.screen_fraction, "--no-sequential", *args.extra.split()],
            )
            report_sequential(full, {**screened, "label": "screened, sequential"}, all_looks)
        if args.local:
            local_pair(args, folder)


def local_pair(args: argparse.Namespace, folder: Path) -> None:
    """The same pair answered by the local 0.5B model on a small slice (benchmarks/local_llm_server.py)."""
    from benchmarks.local_llm import WINDOW, write_slice
    from benchmarks.local_llm_server import serve, server_available

    why = server_available()
    if why:
        print(f"local model skipped: {why}")
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    data = write_slice(args.data, args.local, folder)
    with serve("0.5b", n_ctx=WINDOW) as server:
        full = measure(
            "full evaluation",
            data,
            folder / "local-full",
            args.local_rounds,
            0.0,
            ["--screen-fraction", "0", "--no-context-reuse"],
            local=server,
        )
        screened = measure(
            f"screening {args.screen_fraction} + context reuse",
            data,
            folder / "local-screened",
            args.local_rounds,
            0.0,
            ["--screen-fraction", args.screen_fraction],
            local=server,
        )
    print(
        f"\nlocal Qwen2.5-Coder-0.5B (llama.cpp), {args.local} questions per conversation of 2 dev + 2 test "
        f"conversations, {args.local_rounds} rounds from weak, rubric, LLM cache off"
    )
    report(full, screened)


if __name__ == "__main__":
    main()
