"""`--executor ray` on a real local Ray cluster (127.0.0.1, 2 CPUs, no dashboard), started once for
this module and shut down at its end: rounds sharded by conversation record exactly what the
in-process run records; a worker killed mid-round costs nothing; Ctrl-C shuts down the cluster a
command started. Answers come through litellm from the fake OpenAI server (every call counted)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.fake_llm_server import FakeLLMServer, message_text, wants_json
from tests.test_llm_pipeline import MODEL, evolve, make_responder, query

ray = pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[1]
SHARD_TITLE = "ray::_run_item"  # a Ray worker's process title while it runs one of our tasks
VOLATILE = ("latency_ms",)  # how long a question took is not a record's content


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
        _node_ip_address="127.0.0.1",
    )
    try:
        yield
    finally:
        ray.shutdown()


# the model's diagnosis: rrf_k (which `weak`'s sum fusion ignores) and a wider view for temporal
# questions only, so round 1's minibatch reuses the answers to every unchanged context (the memo
# the workers are sent) and answers the temporal ones; round 2 explores (a new store, answers)
DIAGNOSIS = json.dumps(
    {
        "analysis": "invented",
        "changes": {"rrf_k": 90},
        "overrides": {"temporal": {"semantic_top_k": 10}},
        "missing_topics": [],
        "new_dimensions": [],
        "rationale": "a test proposal",
    }
)


def llm_run(server: FakeLLMServer, out: Path, *extra: str) -> Any:
    """Two rounds from `weak`, answers and diagnoses from the fake server, no reply cache (every
    answer reaches the server or is reused by the run itself), screening on (a model answers)."""
    result = evolve(
        "run",
        "--benchmark",
        "synth",
        "--rounds",
        "2",
        "--model",
        MODEL,
        "--api-base",
        server.url,
        "--extract-model",
        "offline",
        "--diagnoser",
        "llm",
        "--no-cache",
        "--out",
        str(out),
        "--quiet",
        *extra,
    )
    assert result.exit_code == 0, result.output
    return result


def records(run_dir: Path) -> list[dict]:
    rows = query(run_dir, "SELECT * FROM question_records ORDER BY round, phase, question_id")
    return [{k: v for k, v in row.items() if k not in VOLATILE} for row in rows]


def figures(run_dir: Path) -> list[dict]:
    return query(
        run_dir,
        "SELECT round, phase, n_questions, main_f1, adversarial_f1, all_f1, evidence_recall "
        "FROM rounds ORDER BY round, phase",
    )


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: the same run in this process (`--executor local`, the default)."""
    out = tmp_path_factory.mktemp("ray") / "local"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test")
        with FakeLLMServer(make_responder(DIAGNOSIS)) as server:
            llm_run(server, out)
    return out


# ---- a worker killed mid-round ------------------------------------------------------------------
def descendants(root: int) -> set[int]:
    """Every live process below `root` (read from /proc: ours to signal, nobody else's)."""
    parent_of: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent_of[int(entry)] = int(fields[1])
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parent_of.items() if parent in frontier} - found
        found |= frontier
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def killing_first_answering_worker(killed: list[int]) -> Callable[[dict], str]:
    """The fake model's replies, except that on the 10th answer request (round 0 asks 30, 15 per
    shard) it kills a worker process of this test's cluster in the middle of its shard (one that
    waits for this very reply), once."""
    answer = make_responder(DIAGNOSIS)
    seen = {"answers": 0}

    def respond(body: dict) -> str:
        prompt = "".join(message_text(m) for m in body.get("messages", []))
        if not wants_json(body) and "Now the real case." in prompt:
            seen["answers"] += 1
            if seen["answers"] == 10 and not killed:
                busy = [pid for pid in descendants(os.getpid()) if command_line(pid).startswith(SHARD_TITLE)]
                assert busy, "no worker was running a shard"
                os.kill(busy[0], signal.SIGKILL)
                killed.append(busy[0])
        return answer(body)

    return respond


@pytest.mark.slow
def test_sharded_rounds_record_what_local_rounds_record_though_a_worker_is_killed_mid_round(
    ray_cluster, local_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    out = tmp_path / "ray"
    killed: list[int] = []
    with FakeLLMServer(killing_first_answering_worker(killed)) as server:
        llm_run(server, out, "--executor", "ray")
        requests = len(server.requests)
    assert killed, "no worker was killed"
    # every question of every evaluation recorded once, each record as the in-process run wrote it
    dupes = query(
        out, "SELECT round, phase, question_id, count(*) AS n FROM question_records GROUP BY ALL HAVING n > 1"
    )
    assert dupes == []
    mine = records(out)
    assert mine == records(local_run)
    assert figures(out) == figures(local_run)
    assert {"dev", "screen1", "test_start", "test_best"} <= {r["phase"] for r in mine}
    assert {r["reused"] for r in mine} == {None, "config", "context"}  # the workers were sent the memo
    # usage is written by the driver from what each finished shard reported: the in-process run's
    usage = "SELECT round, phase, role, calls, prompt_tokens, completion_tokens FROM usage ORDER BY ALL"
    assert query(out, usage) == query(local_run, usage)
    # Ray ran the killed shard again: the server answered some questions twice, the store counts once
    assert requests > sum(r["calls"] for r in query(out, usage))
    screened = "SELECT round, attempt, outcome, main_f1, all_f1, calls FROM screenings ORDER BY ALL"
    assert query(out, screened) == query(local_run, screened)


# ---- Ctrl-C -----------------------------------------------------------------------------------
CTRL_C_SCRIPT = """
import time
from evolvemem.executor import open_executor

def nap(seconds):
    time.sleep(seconds)

with open_executor("ray", workers=1) as executor:
    print("started", flush=True)
    list(executor.map(nap, [600, 600]))
"""


@pytest.mark.slow
def test_ctrl_c_shuts_down_the_local_cluster_an_executor_started() -> None:
    """`evolve run --executor ray` runs inside `open_executor`: Ctrl-C while its tasks run ends the
    command and every process of the cluster it started."""
    process = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_SCRIPT],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # see test_interrupt.py
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while not any(command_line(pid).startswith(SHARD_TITLE) for pid in descendants(process.pid)):
            assert time.monotonic() < deadline and process.poll() is None, "no task ever ran"
            time.sleep(0.2)
        cluster = descendants(process.pid)
        assert any("raylet" in command_line(pid) for pid in cluster)
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0
    deadline = time.monotonic() + 30
    while (alive := {pid for pid in cluster if Path(f"/proc/{pid}").exists()}) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not alive, f"left running: {[command_line(pid)[:80] for pid in alive]}"
