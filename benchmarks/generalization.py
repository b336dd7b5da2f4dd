"""Does evolution generalise? Every diagnoser, several seeds, from `weak` and from `default`.

For each (start preset, diagnoser, seed): a 7-round `evolve run` with offline roles on the dev
conversations, then the start and the best config scored once on the held-out test ones. Prints
dev and test start → best for main (answerable), adversarial and all F1, the accepted decisions
with their paired p-values, how often a dev gain holds on test, and the issue's acceptance
checks (test main not below start by > 0.005, adversarial not by > 0.02; rubric's mean test
gain ≥ random's and tpe's).

    python benchmarks/generalization.py [--data ../shared/data/locomo10_dev8.json] [--seeds 0 1 2]
        [--inits weak default] [--diagnosers rubric random tpe] [--rounds 7] [--objective balanced]
        [--diagnosis-model M --api-base URL | --local-model 0.5b] [--diagnosis-mode free|menu]
        [--executor ray [--ray-address auto|HOST:PORT]]

With `--executor ray` the runs are Ray tasks, as many at once as the cluster has CPUs, each in its
own run directory (benchmarks/_sweep.py); the lines come in the order the runs finish.

With a model (any litellm model, or `--local-model` to serve a Qwen2.5 GGUF with llama.cpp on
127.0.0.1, see benchmarks/local_llm_server.py), `llm` joins the diagnosers: it diagnoses, every
other role stays offline, so the rows differ only in who proposes the changes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._sweep import add_executor_options, sweep  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10_dev8.json"
GROUPS = (("main", "main_f1"), ("adv", "adversarial_f1"), ("all", "all_f1"))
MAX_MAIN_LOSS, MAX_ADV_LOSS = 0.005, 0.02
LOCAL_WINDOW = 4096


def evolve(*args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "evolvemem.cli.main", *args, "--json"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"evolve {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_once(
    data: Path,
    init: str,
    diagnoser: str,
    seed: int,
    rounds: int,
    objective: str,
    out: Path,
    model_args: tuple[str, ...] = (),
) -> dict:
    started = time.perf_counter()
    result = evolve(
        "run",
        "--benchmark",
        "locomo",
        "--data",
        str(data),
        "--rounds",
        str(rounds),
        "--diagnoser",
        diagnoser,
        "--seed",
        str(seed),
        "--init",
        init,
        "--objective",
        objective,
        "--patience",
        "0",
        "--out",
        str(out),
        "--quiet",
        *(model_args if diagnoser == "llm" else ()),
    )
    wall = time.perf_counter() - started
    shown = evolve("show", str(out))
    accepted = [(r["round"], r["paired"]) for r in shown["rounds"] if r["round"] > 0 and r["accepted"]]
    flagged = sum(1 for r in shown["rounds"] if r["flags"])  # proposals that went against their own evidence
    fallbacks = sum(1 for r in shown["rounds"] if r["fallback"])  # llm diagnoses replaced by the rubric's
    return {
        "init": init,
        "diagnoser": diagnoser,
        "seed": seed,
        "wall": wall,
        "result": result,
        "accepted": accepted,
        "flagged": flagged,
        "fallbacks": fallbacks,
    }


def run_item(item: tuple) -> dict:
    """`run_once` of one sweep item (what a Ray task runs)."""
    return run_once(*item)


def deltas(block: dict) -> dict[str, float]:
    return {g: (block["best"][key] or 0.0) - (block["start"][key] or 0.0) for g, key in GROUPS}


def p_text(paired: dict) -> str:
    groups = paired["groups"]
    return ", ".join(
        f"{g} {groups[g]['diff']:+.3f} p={groups[g]['p_gain']:.3f}" for g in ("main", "adversarial") if groups[g]["n"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--inits", nargs="+", default=["weak", "default"])
    parser.add_argument("--diagnosers", nargs="+", default=["rubric", "random", "tpe"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--objective", default="balanced")
    parser.add_argument("--diagnosis-model", help="litellm model for the llm diagnoser (adds `llm` to the diagnosers)")
    parser.add_argument("--api-base", help="OpenAI-compatible server of --diagnosis-model")
    parser.add_argument(
        "--local-model", choices=("0.5b", "1.5b"), help="serve this Qwen2.5 model with llama.cpp for `llm`"
    )
    parser.add_argument("--diagnosis-mode", default="free", choices=("free", "menu"))
    add_executor_options(parser)
    args = parser.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"no LoCoMo file at {args.data}")
    with contextlib.ExitStack() as stack:
        model_args = diagnosis_model_args(args, stack)
        if model_args and "llm" not in args.diagnosers:
            args.diagnosers.append("llm")
        evaluate_all(args, model_args)


def diagnosis_model_args(args: argparse.Namespace, stack: contextlib.ExitStack) -> tuple[str, ...]:
    """`evolve run` options that let `llm` diagnose with the chosen model (none without one)."""
    if args.local_model:
        from benchmarks.local_llm_server import LocalModelUnavailable, serve

        from benchmarks.local_llm_server import placeholder_api_key

        placeholder_api_key()
        os.environ.setdefault("EVOLVEMEM_LLM_TIMEOUT", "600")  # a CPU model under a JSON grammar is slow
        try:
            server = stack.enter_context(serve(args.local_model, n_ctx=LOCAL_WINDOW))
        except LocalModelUnavailable as exc:
            raise SystemExit(f"--local-model {args.local_model}: {exc}") from None
        model, api_base = server.model, server.api_base
        extra: tuple[str, ...] = ("--context-window", str(LOCAL_WINDOW))
    elif args.diagnosis_model:
        model, api_base, extra = args.diagnosis_model, args.api_base, ()
    else:
        return ()
    return (
        "--diagnosis-model",
        model,
        "--diagnosis-mode",
        args.diagnosis_mode,
        *(("--api-base", api_base) if api_base else ()),
        *extra,
    )


def evaluate_all(args: argparse.Namespace, model_args: tuple[str, ...]) -> None:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        items = [
            (
                args.data,
                init,
                diagnoser,
                seed,
                args.rounds,
                args.objective,
                Path(tmp) / f"{init}-{diagnoser}-{seed}",
                model_args,
            )
            for init in args.inits
            for diagnoser in args.diagnosers
            for seed in args.seeds
        ]
        finished: dict[int, dict] = {}
        for index, run in sweep(run_item, items, args):
            finished[index] = run
            r = run["result"]
            dev, test = deltas(r["dev"]), deltas(r["test"])
            accepted = "; ".join(f"r{n}: {p_text(p)}" for n, p in run["accepted"]) or "none"
            print(
                f"{run['init']:7s} {run['diagnoser']:6s} seed {run['seed']}: best round {r['best_round']} | dev Δ main "
                f"{dev['main']:+.4f} adv {dev['adv']:+.4f} all {dev['all']:+.4f} | test Δ main "
                f"{test['main']:+.4f} adv {test['adv']:+.4f} all {test['all']:+.4f} | accepted: {accepted} "
                f"| flagged {run['flagged']}, rubric fallbacks {run['fallbacks']} | {run['wall']:.1f}s",
                flush=True,
            )
    runs = [finished[i] for i in sorted(finished)]
    print(f"\nmean test Δ per start and diagnoser ({len(args.seeds)} seeds, objective {args.objective}):")
    print("start    diagnoser  test main  test adv   test all   dev all   accepted rounds  gains held on test")
    means: dict[tuple[str, str], float] = {}
    for init in args.inits:
        for diagnoser in args.diagnosers:
            mine = [r for r in runs if r["init"] == init and r["diagnoser"] == diagnoser]
            test = [deltas(r["result"]["test"]) for r in mine]
            dev = [deltas(r["result"]["dev"]) for r in mine]
            moved = [t for r, t in zip(mine, test) if r["result"]["best_round"] != 0]
            held = sum(
                1
                for t in moved
                if t["main"] >= -MAX_MAIN_LOSS and t["adv"] >= -MAX_ADV_LOSS and (t["main"] > 0 or t["adv"] > 0)
            )
            means[(init, diagnoser)] = statistics.mean(t["all"] for t in test)
            print(
                f"{init:8s} {diagnoser:9s}  {statistics.mean(t['main'] for t in test):+.4f}    "
                f"{statistics.mean(t['adv'] for t in test):+.4f}    {means[(init, diagnoser)]:+.4f}    "
                f"{statistics.mean(d['all'] for d in dev):+.4f}   {sum(len(r['accepted']) for r in mine):15d}  "
                f"{held} of {len(moved)} runs that moved"
            )
    worst_main = min(deltas(r["result"]["test"])["main"] for r in runs)
    worst_adv = min(deltas(r["result"]["test"])["adv"] for r in runs)
    print(
        f"\nworst test main Δ {worst_main:+.4f} (limit −{MAX_MAIN_LOSS}); worst test adversarial Δ {worst_adv:+.4f} "
        f"(limit −{MAX_ADV_LOSS}): {'within' if worst_main >= -MAX_MAIN_LOSS and worst_adv >= -MAX_ADV_LOSS else 'OUTSIDE'}"
    )
    if {"rubric", "random", "tpe"} <= set(args.diagnosers):
        for init in args.inits:
            ok = means[(init, "rubric")] >= max(means[(init, "random")], means[(init, "tpe")]) - 1e-12
            print(
                f"from {init}: rubric mean test all Δ {means[(init, 'rubric')]:+.4f} vs random "
                f"{means[(init, 'random')]:+.4f}, tpe {means[(init, 'tpe')]:+.4f}: {'≥ both' if ok else 'BELOW'}"
            )
    print(
        f"total_runs={len(runs)} mean_wall_per_run_s={statistics.mean(r['wall'] for r in runs):.1f} "
        f"sweep_wall_s={time.perf_counter() - started:.1f} executor={args.executor}"
    )


if __name__ == "__main__":
    main()
