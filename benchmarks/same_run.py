"""Does a refactor change what a run does? A fixed offline run, fingerprinted, compared.

    python benchmarks/same_run.py run OUT.json [--data FILE] [--rounds 7] [--seed 1] [--keep DIR] [-- OPTIONS]
    python benchmarks/same_run.py compare A.json B.json

`run` starts `evolve run --benchmark locomo --data FILE --rounds N --seed S` with the offline roles
in a fresh directory and writes a fingerprint of what it decided: every question record (sorted by
round, phase and question id; floats rounded to 9 places; wall times left out), every decision,
every screening and every round's scores; options after `--` go to `evolve run` as they are (e.g.
`-- --objective balanced --screen-fraction 0.25 --candidates 2` for a run that screens). `compare`
prints the first differences between two such files and exits 1 when there are any, 0 when the
runs are the same.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEV_DATA = Path(os.environ.get("EVOLVEMEM_DEV_DATA", "/work/shared/data/locomo10_dev8.json"))

# Columns that measure the machine, not the run.
TIMING = {"latency_ms", "wall_seconds", "started_at", "finished_at"}
# Table -> its sort key; every other column is fingerprinted.
TABLES = {
    "question_records": ("round", "phase", "question_id"),
    "decisions": ("round",),
    "screenings": ("round", "attempt"),
    "rounds": ("round", "phase"),
}


def _plain(value: Any) -> Any:
    """A JSON-stable value: floats rounded, JSON strings parsed, tuples as lists."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return _plain(json.loads(value))
        except ValueError:
            return value
    return value


def fingerprint(run_dir: Path) -> dict[str, Any]:
    """The run's tables as sorted, rounded rows (timing columns left out)."""
    import duckdb

    con = duckdb.connect(str(run_dir / "run.duckdb"), read_only=True)
    try:
        tables: dict[str, list[dict[str, Any]]] = {}
        for table, key in TABLES.items():
            cursor = con.execute(f"SELECT * FROM {table} ORDER BY {', '.join(key)}")
            names = [d[0] for d in cursor.description]
            rows = [{n: _plain(v) for n, v in zip(names, row) if n not in TIMING} for row in cursor.fetchall()]
            tables[table] = rows
    finally:
        con.close()
    digest = {
        t: hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()
        for t, rows in tables.items()
    }
    return {"digest": digest, "tables": tables}


def run(out: Path, data: Path, rounds: int, seed: int, keep: Path | None, extra: list[str]) -> int:
    if not data.is_file():
        print(f"{data}: no LoCoMo dev file (set EVOLVEMEM_DEV_DATA)", file=sys.stderr)
        return 2
    run_dir = keep or Path(tempfile.mkdtemp(prefix="same-run-")) / "run"
    command = [
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
        "--seed",
        str(seed),
        "--out",
        str(run_dir),
        *extra,
    ]
    env = dict(os.environ, HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL)
    if done.returncode != 0:
        print(f"evolve run exited {done.returncode}", file=sys.stderr)
        return done.returncode
    found = fingerprint(run_dir)
    out.write_text(json.dumps(found, sort_keys=True, indent=1, default=str))
    counts = ", ".join(f"{t} {len(rows)}" for t, rows in found["tables"].items())
    print(f"{out}: {counts}")
    for table, digest in found["digest"].items():
        print(f"  {table}: {digest[:16]}")
    return 0


def compare(a: Path, b: Path, show: int = 10) -> int:
    left, right = json.loads(a.read_text()), json.loads(b.read_text())
    differences = 0
    for table in TABLES:
        rows_a, rows_b = left["tables"].get(table, []), right["tables"].get(table, [])
        if len(rows_a) != len(rows_b):
            print(f"{table}: {len(rows_a)} rows vs {len(rows_b)}")
            differences += 1
        for i, (ra, rb) in enumerate(zip(rows_a, rows_b)):
            for column in sorted(set(ra) | set(rb)):
                if ra.get(column) != rb.get(column):
                    differences += 1
                    if differences <= show:
                        print(
                            f"{table} row {i} {column}: {str(ra.get(column))[:120]!r} vs {str(rb.get(column))[:120]!r}"
                        )
    print("same" if differences == 0 else f"{differences} differences")
    return 0 if differences == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--data", type=Path, default=DEV_DATA)
    r.add_argument("--rounds", type=int, default=7)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--keep", type=Path, help="run directory to write (default: a temporary one)")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # what follows `--` goes to evolve run
    args = parser.parse_args(argv[:cut])
    if args.command == "run":
        return run(args.out, args.data, args.rounds, args.seed, args.keep, argv[cut + 1 :])
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
