"""Fuzz a real `evolve serve` from its own OpenAPI schema with schemathesis: every check, both modes.

    python benchmarks/serve_schemathesis.py [--max-examples 100] [--seed 46] [--config default]

A server on 127.0.0.1 with one API key (offline roles), seeded with one user so that searches find
something; then `schemathesis run <server>/openapi.json --checks all --mode positive` and again with
`--mode negative`, each with the key, `--max-examples` cases per operation and one worker (a few
minutes in all; 413 counts as a rejection of invalid data, see CONFIG). From each run's NDJSON event log it prints the requests sent, the responses with a
5xx status, the responses that do not match their documented schema (`response_schema_conformance`)
and every other failed check, by name. The figures to aim at are 0 and 0.

schemathesis is not a dependency of evolvemem (it is in the `test` extra): `pip install schemathesis`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.serve_server import ServeProcess  # noqa: E402

KEY = "k-schemathesis-0123456789abcdef"
SCHEMA_CHECK = "response_schema_conformance"
# schemathesis's own list of the statuses that reject invalid data, plus 413: a body over --max-body
# is refused by its size before it is read, whatever else is wrong with it.
CONFIG = """[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
"""


@dataclass
class Tally:
    """What one schemathesis run found, counted from its NDJSON events."""

    requests: int = 0
    server_errors: int = 0
    no_response: int = 0
    failed: Counter[str] = field(default_factory=Counter)  # check name -> failed cases

    @property
    def schema_mismatches(self) -> int:
        return self.failed[SCHEMA_CHECK]


def tally(ndjson: Path) -> Tally:
    found = Tally()
    for line in ndjson.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        recorder = event.get("ScenarioFinished", {}).get("recorder") or {}
        for interaction in (recorder.get("interactions") or {}).values():
            found.requests += 1
            response = interaction.get("response")
            if response is None:
                found.no_response += 1
            elif int(response["status_code"]) >= 500:
                found.server_errors += 1
        for checks in (recorder.get("checks") or {}).values():
            for name in {check["name"] for check in checks if check.get("status") == "failure"}:
                found.failed[name] += 1
    return found


def run_schemathesis(url: str, mode: str, max_examples: int, seed: int, folder: Path) -> tuple[Tally, int]:
    report = folder / f"{mode}.ndjson"
    config = folder / "schemathesis.toml"
    config.write_text(CONFIG, encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config),
        "run",
        f"{url}/openapi.json",
        "--checks",
        "all",
        "--mode",
        mode,
        "--max-examples",
        str(max_examples),
        "--seed",
        str(seed),
        "--workers",
        "1",
        "--header",
        f"Authorization: Bearer {KEY}",
        "--report",
        "ndjson",
        "--report-ndjson-path",
        str(report),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=folder)
    (folder / f"{mode}.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if not report.is_file():
        raise SystemExit(f"schemathesis wrote no report (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr}")
    return tally(report), done.returncode


def seed_user(url: str) -> None:
    turns = [
        {"speaker": "Ana", "text": "I moved to Lisbon in May and I cycle to work.", "at": "2024-05-02T09:00"},
        {"speaker": "Ben", "text": "How is the commute along the river?"},
    ]
    added = httpx.post(
        f"{url}/v1/memories", headers={"Authorization": f"Bearer {KEY}"}, json={"user": "0", "turns": turns}, timeout=60
    )
    added.raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-examples", type=int, default=100, help="cases per operation and mode")
    parser.add_argument("--seed", type=int, default=46)
    parser.add_argument("--config", default="default", help="what the server serves: a preset, a file or a run")
    parser.add_argument("--keep", action="store_true", help="keep the store, the logs and the reports")
    args = parser.parse_args()
    try:
        import schemathesis  # noqa: F401
    except ImportError:
        raise SystemExit("needs schemathesis: pip install schemathesis (or the test extra)") from None
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    folder = Path(tempfile.mkdtemp(prefix="serve-schemathesis-"))
    failed_runs = 0
    try:
        with ServeProcess(folder / "memory.duckdb", args.config, keys=[KEY]) as server:
            seed_user(server.url)
            print(f"evolve serve on {server.url}, --checks all, {args.max_examples} examples per operation and mode")
            for mode in ("positive", "negative"):
                found, code = run_schemathesis(server.url, mode, args.max_examples, args.seed, folder)
                failed_runs += code != 0
                others = {name: n for name, n in sorted(found.failed.items()) if name != SCHEMA_CHECK}
                print(
                    f"{mode:>8}: {found.requests} requests, {found.server_errors} 5xx, "
                    f"{found.schema_mismatches} schema mismatches, {found.no_response} without a response; "
                    f"other failed checks: {others or 'none'}"
                )
            server_log = server.log()
        if "Traceback" in server_log:
            print("the server logged a traceback: see", folder / "memory.log")
            args.keep = True
    finally:
        if args.keep or failed_runs:
            print(f"reports, logs and store kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
