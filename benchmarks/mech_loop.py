"""Each mechanism as a lever of the loop: evolution runs where the loop may use it vs not.

    python benchmarks/mech_loop.py [--data ../shared/data/locomo10_dev8.json] [--diagnoser rubric] [--seed 0]
                                   [--rounds 7] [--only scenes cue_graph ...] [--executor ray [--ray-address A]]

The baseline run freezes every mechanism group (`evolve run --freeze ...`), so the loop tunes
only the core dimensions. Each further run frees one mechanism group (the others stay frozen)
and, last, all of them. Every run starts from `weak`, offline roles, and is scored once on the
held-out test conversations with its best dev config. Printed per run: the mechanism settings
the best config uses, test F1 and evidence recall per category with the Δ against the baseline,
wall time, and the LLM calls / tokens the run recorded (0 offline). With `--executor ray` the runs
are parallel Ray tasks (benchmarks/_sweep.py); the lines come in the order the runs finish.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._sweep import add_executor_options, sweep  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10_dev8.json"
CORE_GROUPS = ("views", "fusion", "ranking", "augmentation", "answering")


def mechanism_groups() -> list[str]:
    """Groups outside the core whose dimensions include a mechanism switch."""
    from evolvemem.space.action_space import files_space

    groups: list[str] = []
    for dim in files_space().dimensions():
        if dim.group not in CORE_GROUPS and dim.mechanism_off is not None and dim.group not in groups:
            groups.append(dim.group)
    return groups


def run_once(data: Path, out: Path, frozen: list[str], args: argparse.Namespace) -> tuple[dict, float]:
    cmd = [
        sys.executable,
        "-m",
        "evolvemem.cli.main",
        "run",
        "--benchmark",
        "locomo",
        "--data",
        str(data),
        "--rounds",
        str(args.rounds),
        "--diagnoser",
        args.diagnoser,
        "--seed",
        str(args.seed),
        "--init",
        "weak",
        "--patience",
        "0",
        "--out",
        str(out),
        "--json",
        "--quiet",
    ]
    if frozen:
        cmd += ["--freeze", ",".join(frozen)]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"run {out.name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def per_category(run_dir: Path) -> tuple[dict[str, tuple[float, float, int]], dict]:
    """{category: (mean F1, mean evidence recall, n)} of the best config on test, and the totals."""
    import duckdb

    con = duckdb.connect(str(run_dir / "run.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT category, avg(f1), avg(evidence_recall), count(*) FROM question_records "
            "WHERE phase = 'test_best' GROUP BY category ORDER BY category"
        ).fetchall()
        calls, prompt_tokens = con.execute(
            "SELECT coalesce(sum(calls), 0), coalesce(sum(prompt_tokens), 0) FROM question_records"
        ).fetchone()
    finally:
        con.close()
    return {str(c): (f1, er, n) for c, f1, er, n in rows}, {"calls": int(calls), "prompt_tokens": int(prompt_tokens)}


def mechanism_settings(run_dir: Path, groups: list[str]) -> str:
    """The mechanism dimensions the best config sets away from their off value (global or per type)."""
    from evolvemem.space.config import load_config

    config = load_config(str(run_dir / "best_config.toml"))[0]
    dims = config.space
    used = []
    for scope, values in [("global", config.values()), *config.overrides().items()]:
        for name, value in values.items():
            dim = dims[name]
            if dim.group in groups and dim.mechanism_off is not None and value != dim.mechanism_off:
                used.append(f"{name}={value}" + ("" if scope == "global" else f" [{scope}]"))
    return ", ".join(used) or "none"


def run_variant(item: tuple) -> tuple:
    """One variant's run and what the tables read of it (what a Ray task runs, in its own directory)."""
    label, frozen, out, data, groups, args = item
    result, wall = run_once(data, out, frozen, args)
    cats, usage = per_category(out)
    return label, cats, result, wall, mechanism_settings(out, groups), usage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--diagnoser", default="rubric")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", nargs="*", help="mechanism groups to free one at a time (default: all)")
    add_executor_options(parser)
    args = parser.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"no LoCoMo file at {args.data}")
    groups = mechanism_groups()
    chosen = args.only or groups
    variants = [("baseline (all frozen)", groups)] + [(f"+ {g}", [o for o in groups if o != g]) for g in chosen]
    if not args.only:
        variants.append(("+ all mechanisms", []))
    print(
        f"mechanism groups: {', '.join(groups)}; diagnoser {args.diagnoser}, seed {args.seed}, "
        f"{args.rounds} rounds from weak\n",
        flush=True,
    )
    finished: dict[int, tuple] = {}
    with tempfile.TemporaryDirectory() as tmp:
        items = [
            (
                label,
                frozen,
                Path(tmp) / label.replace(" ", "_").replace("(", "").replace(")", "").replace("+", "with"),
                args.data,
                groups,
                args,
            )
            for label, frozen in variants
        ]
        for index, done in sweep(run_variant, items, args):
            finished[index] = done
            label, _, result, wall, used, usage = done
            test = result["test"]["best"]
            print(
                f"{label:24s} test all F1 {test['all_f1']:.4f} main {test['main_f1']:.4f} "
                f"evidence recall {test['evidence_recall']:.4f} | best round {result['best_round']} | "
                f"wall {wall:.1f}s | calls {usage['calls']} | uses: {used}",
                flush=True,
            )
    results = [finished[i] for i in sorted(finished)]
    from evolvemem.benchmarks import load_benchmark

    names = load_benchmark("locomo", args.data).category_names or {}
    base = results[0][1]
    categories = sorted(base)
    print("\nper-category test F1 (Δ vs baseline) | evidence recall (Δ)")
    print(f"{'variant':24s} " + " ".join(f"{str(names.get(c, c))[:21]:>21s}" for c in categories))
    for label, cats, *_ in results:
        cells = []
        for c in categories:
            f1, er, _ = cats.get(c, (None, None, 0))
            b_f1, b_er, _ = base[c]
            if f1 is None:
                cells.append(f"{'-':>21s}")
                continue
            cells.append(f"{f1:.3f}{f1 - b_f1:+.3f}|{(er or 0):.2f}{(er or 0) - (b_er or 0):+.2f}".rjust(21))
        print(f"{label:24s} " + " ".join(cells))
    print("\nn per category: " + ", ".join(f"{names.get(c, c)}={base[c][2]}" for c in categories))


if __name__ == "__main__":
    main()
