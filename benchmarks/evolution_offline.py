"""Offline evolution on the development LoCoMo file: rubric vs random vs tpe.

For each diagnoser and seed: a 7-round `evolve run` with offline roles, from the `weak` preset.
Prints start vs best on dev and on the held-out test conversations (F1 and evidence recall),
wall time per round and in total. Embeddings are cached by the first run (its time is shown
separately), so later runs measure the loop itself.

    python benchmarks/evolution_offline.py [--data ../shared/data/locomo10_dev8.json] [--seeds 0 1] [--rounds 7]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10_dev8.json"


def run_once(data: Path, diagnoser: str, seed: int, rounds: int, out: Path) -> tuple[dict, float]:
    cmd = [sys.executable, "-m", "evolvemem.cli.main", "run", "--benchmark", "locomo", "--data", str(data),
           "--rounds", str(rounds), "--diagnoser", diagnoser, "--seed", str(seed), "--init", "weak",
           "--patience", "0", "--out", str(out), "--json", "--quiet"]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{diagnoser} seed {seed} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--diagnosers", nargs="+", default=["rubric", "random", "tpe"])
    args = parser.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"no LoCoMo file at {args.data}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for diagnoser in args.diagnosers:
            for seed in args.seeds:
                result, wall = run_once(args.data, diagnoser, seed, args.rounds, Path(tmp) / f"{diagnoser}-{seed}")
                show = subprocess.run([sys.executable, "-m", "evolvemem.cli.main", "show", result["run_dir"], "--json"],
                                      capture_output=True, text=True, check=True)
                shown = json.loads(show.stdout.strip().splitlines()[-1])
                per_round = [r for r in shown["rounds"]]
                rows.append({"diagnoser": diagnoser, "seed": seed, "wall": wall, "result": result,
                             "rounds": per_round})
                d, t = result["dev"], result["test"]
                print(f"{diagnoser:7s} seed {seed}: dev all F1 {d['start']['all_f1']:.4f} -> {d['best']['all_f1']:.4f} "
                      f"(best round {result['best_round']}) | test all F1 {t['start']['all_f1']:.4f} -> "
                      f"{t['best']['all_f1']:.4f} | test main F1 {t['start']['main_f1']:.4f} -> {t['best']['main_f1']:.4f} "
                      f"| test evidence recall {t['start']['evidence_recall']:.4f} -> {t['best']['evidence_recall']:.4f} "
                      f"| wall {wall:.1f}s", flush=True)
    print()
    print("diagnoser  mean dev gain  mean test gain (all F1)  mean test gain (main F1)  mean wall/run  mean s/round")
    for diagnoser in args.diagnosers:
        mine = [r for r in rows if r["diagnoser"] == diagnoser]
        dev_gain = statistics.mean(r["result"]["dev"]["best"]["all_f1"] - r["result"]["dev"]["start"]["all_f1"] for r in mine)
        test_gain = statistics.mean(r["result"]["test"]["best"]["all_f1"] - r["result"]["test"]["start"]["all_f1"] for r in mine)
        test_main = statistics.mean(r["result"]["test"]["best"]["main_f1"] - r["result"]["test"]["start"]["main_f1"] for r in mine)
        wall = statistics.mean(r["wall"] for r in mine)
        per_round = wall / (args.rounds + 1)
        print(f"{diagnoser:9s}  {dev_gain:+.4f}        {test_gain:+.4f}                  {test_main:+.4f}"
              f"                   {wall:6.1f}s        {per_round:5.1f}s")
    first = rows[0]
    print(f"\nfirst run (includes first-time embedding if the cache was cold): {first['wall']:.1f}s")
    print(f"total_runs={len(rows)} max_wall_per_run_s={max(r['wall'] for r in rows):.1f}")


if __name__ == "__main__":
    main()
