"""Faults that must not cost a user work (issue 31): failed questions of finished rounds retried on
resume, replies bounded in size, no dead-end run directories, a damaged run listed rather than
fatal, kills that lose only the answers in flight, environment errors in one line, credentials in
--api-base never shown or stored, evidence ids that name no turn, and plain messages for a refused
connection and a hung server. Everything runs through the real CLI, litellm and DuckDB against
the fake server on 127.0.0.1."""

from __future__ import annotations

import base64
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evolvemem.llm.client import REPLY_FLOOR_CHARS, LLMCallFailed, LLMClient, reply_limit
from evolvemem.store import RunStore
from tests.fake_llm_server import FakeLLMServer
from tests.test_llm_pipeline import (
    MODEL,
    evolve,
    is_diagnosis,
    llm_eval,
    make_responder,
    new_cache,  # noqa: F401
    predictions,
    query,
    records,  # noqa: F401
    seed_cache,  # noqa: F401
)

ROOT = Path(__file__).resolve().parents[1]


def llm_run(server_url: str, out: Path, *extra: str) -> object:
    return evolve(
        "run",
        "--benchmark",
        "synth",
        "--answer-model",
        MODEL,
        "--api-base",
        server_url,
        "--extract-model",
        "offline",
        "--out",
        str(out),
        "--quiet",
        *extra,
    )


def figures(run_dir: Path) -> list[tuple]:
    """What the tables print, per evaluation: n, failed, F1s, evidence recall."""
    rows = query(
        run_dir,
        """SELECT round, phase, n_questions, n_failed, round(main_f1, 6) AS main,
                                    round(all_f1, 6) AS all_f1, round(evidence_recall, 6) AS er
                             FROM rounds ORDER BY round, phase""",
    )
    return [tuple(r.values()) for r in rows]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- 1. retried on resume
@pytest.mark.parametrize("fault", ["500", "drop", "not_chat"])
def test_failed_questions_of_finished_rounds_are_retried_by_resume_to_the_fault_free_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, new_cache, fault: str
) -> None:  # noqa: F811
    with FakeLLMServer(make_responder()) as server:
        assert llm_run(server.url, tmp_path / "clean", "--rounds", "0").exit_code == 0
    clean_predictions, clean_figures = predictions(tmp_path / "clean"), figures(tmp_path / "clean")

    new_cache("cache-faulty")
    monkeypatch.setenv("EVOLVEMEM_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("EVOLVEMEM_LLM_BREAKER", "0")
    run = tmp_path / "faulty"
    with FakeLLMServer(make_responder()) as server:
        {
            "500": lambda: server.fail_next(500, count=6),
            "drop": lambda: server.drop_next(6),
            "not_chat": lambda: server.garble_next(6),
        }[fault]()
        first = llm_run(server.url, run, "--rounds", "0", "--concurrency", "1")
        assert first.exit_code == 0, first.output
        assert "6 questions failed" in " ".join(first.output.split())
        asked = server.request_count
        resumed = evolve("run", "--resume", str(run), "--quiet")
        assert resumed.exit_code == 0, resumed.output
        assert server.request_count - asked == 6  # exactly the failed questions, asked again
        assert "questions failed" not in resumed.output
    assert predictions(run) == clean_predictions
    assert figures(run) == clean_figures  # test start and best compare equal n again
    n = {phase: n for _, phase, n, *_ in figures(run)}
    assert n["test_start"] == n["test_best"]


# ----------------------------------------------------------------------------- 2. bounded replies
@pytest.mark.slow
def test_a_server_that_ignores_max_tokens_cannot_fill_memory_the_store_or_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    huge = "word " * 600_000  # 3 MB per reply
    cache = Path(os.environ["EVOLVEMEM_CACHE_DIR"]) / "llm"

    def respond(body: dict) -> str:
        return json.dumps({"changes": {}, "rationale": huge}) if is_diagnosis(body) else huge

    with FakeLLMServer(respond) as server:
        client = LLMClient(MODEL, api_base=server.url, cache=None)
        reply = client.complete([{"role": "user", "content": "hi"}], role="answer", max_tokens=100)
        assert reply.truncated and len(reply.text) == reply_limit(100) == REPLY_FLOOR_CHARS
        assert client.oversized_replies == 1
        result = evolve(
            "run",
            "--benchmark",
            "synth",
            "--rounds",
            "1",
            "--model",
            MODEL,
            "--api-base",
            server.url,
            "--extract-model",
            "offline",
            "--out",
            str(tmp_path / "run"),
            "--quiet",
            "--screen-fraction",
            "0",
        )
        assert result.exit_code == 0, result.output
        assert "longer than asked" in " ".join(result.output.split())  # said once, at the end
    longest = query(tmp_path / "run", "SELECT max(length(prediction)) AS n FROM question_records")[0]["n"]
    assert longest <= reply_limit(700)  # the largest answer budget any style asks for
    raw = query(tmp_path / "run", "SELECT raw_response FROM diagnoses")
    assert raw and all(len(r["raw_response"] or "") <= 70_000 for r in raw)
    assert not list((tmp_path / "run" / "rounds").glob("*/diagnosis_raw.txt"))  # stored once, in the store
    cached = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    assert cached < 5_000_000, f"the LLM cache holds {cached} bytes"


# ----------------------------------------------------------------------------- 3. no dead ends
def test_a_directory_left_before_the_first_round_is_reused_by_a_re_run_and_explained_by_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    RunStore(out).close()  # what a kill right after start leaves: a store, no spec in its manifest
    resumed = evolve("run", "--resume", str(out), "--quiet")
    assert resumed.exit_code == 2 and "stopped before it began" in resumed.output
    assert "--out" in resumed.output
    again = evolve("run", "--benchmark", "synth", "--rounds", "0", "--out", str(out), "--quiet")
    assert again.exit_code == 0, again.output
    assert query(out, "SELECT count(*) AS n FROM rounds WHERE status = 'done'")[0]["n"] >= 1
    # a run that holds work is never taken over
    refused = evolve("run", "--benchmark", "synth", "--rounds", "0", "--out", str(out), "--quiet")
    assert refused.exit_code == 2 and "already holds a run" in refused.output


def test_a_closed_port_or_an_empty_data_file_at_start_leaves_a_directory_a_re_run_reuses(tmp_path: Path) -> None:
    out = tmp_path / "run"
    port = closed_port()
    closed = llm_run(f"http://127.0.0.1:{port}/v1", out, "--rounds", "0")
    assert closed.exit_code == 2 and "does not answer" in closed.output
    empty = tmp_path / "empty.json"
    empty.write_text("[]", encoding="utf-8")
    bad = evolve("run", "--benchmark", "custom", "--data", str(empty), "--rounds", "0", "--out", str(out), "--quiet")
    assert bad.exit_code == 2, bad.output
    with FakeLLMServer(make_responder()) as server:
        good = llm_run(server.url, out, "--rounds", "0")
        assert good.exit_code == 0, good.output


def test_a_run_killed_during_setup_is_resumed_or_taken_over(tmp_path: Path) -> None:
    """The manifest spec is written, nothing evaluated (a kill while memories are built)."""
    out = tmp_path / "run"
    assert evolve("run", "--benchmark", "synth", "--rounds", "0", "--out", str(out), "--quiet").exit_code == 0
    with RunStore(out) as store:  # back to the state right after the manifest was written
        for table in ("rounds", "question_records", "decisions", "usage"):
            store.con.execute(f"DELETE FROM {table}")
    resumed = evolve("run", "--resume", str(out), "--quiet")
    assert resumed.exit_code == 0, resumed.output
    with RunStore(out) as store:
        for table in ("rounds", "question_records", "decisions", "usage"):
            store.con.execute(f"DELETE FROM {table}")
    again = evolve("run", "--benchmark", "synth", "--rounds", "0", "--out", str(out), "--quiet")
    assert again.exit_code == 0, again.output


# ----------------------------------------------------------------------------- 4. evolve runs
def test_evolve_runs_lists_the_good_runs_and_marks_a_damaged_one(tmp_path: Path) -> None:
    for name in ("good", "bad"):
        assert evolve("eval", "--benchmark", "synth", "--out", str(tmp_path / name), "--quiet").exit_code == 0
    db = tmp_path / "bad" / "run.duckdb"
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    result = evolve("runs", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    rows = {Path(r["run_dir"]).name: r for r in json.loads(result.stdout[result.stdout.index("{") :])["runs"]}
    assert rows["good"]["status"] == "finished" and rows["good"]["rounds"] == 1
    assert rows["bad"]["status"].startswith("unreadable: ") and "\n" not in rows["bad"]["status"]


# ----------------------------------------------------------------------------- 5. SIGKILL
@pytest.mark.slow
def test_a_sigkill_loses_only_the_answer_in_flight_and_its_cost_is_recorded(tmp_path: Path) -> None:
    out, answered_before_kill = tmp_path / "ev", 20
    gate = threading.Event()
    served = {"n": 0}
    lock = threading.Lock()
    respond_normally = make_responder()

    def respond(body: dict) -> str:
        with lock:
            served["n"] += 1
            number = served["n"]
        if number > answered_before_kill:
            gate.wait(60)  # the 21st call hangs until the test lets go
        return respond_normally(body)

    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "HF_HUB_OFFLINE": "1"}
    with FakeLLMServer(respond) as server:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "evolvemem.cli.main",
                "eval",
                "--benchmark",
                "synth",
                "--model",
                MODEL,
                "--api-base",
                server.url,
                "--extract-model",
                "offline",
                "--out",
                str(out),
                "--quiet",
                "--no-cache",
                "--concurrency",
                "1",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120
        while server.request_count <= answered_before_kill and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.request_count == answered_before_kill + 1, "the eval never reached the hanging call"
        time.sleep(0.3)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        gate.set()
        assert server.settle()
        assert server.answered == answered_before_kill  # the hanging call's reply never reached the process
    with RunStore(out) as store:  # read-write: replays what the killed process left in the write-ahead log
        kept = store.query("SELECT count(*) AS n, sum(calls) AS calls FROM question_records")[0]
        billed = store.query("SELECT sum(calls) AS calls FROM usage WHERE round = 0")[0]["calls"]
    assert kept == {"n": answered_before_kill, "calls": answered_before_kill}
    assert billed == answered_before_kill  # every answer the server gave is paid for in the store

    with FakeLLMServer(make_responder()) as healthy:
        assert llm_eval(healthy, out, "--no-cache").exit_code == 0
        assert healthy.request_count == 60 - answered_before_kill
    assert query(out, "SELECT count(*) AS n FROM question_records")[0]["n"] == 60
    assert query(out, "SELECT sum(calls) AS calls FROM usage WHERE round = 0")[0]["calls"] == 60


# ----------------------------------------------------------------------------- 6. environment errors
def test_out_naming_a_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine", encoding="utf-8")
    for command in (["run", "--benchmark", "synth", "--rounds", "0"], ["eval", "--benchmark", "synth"]):
        result = evolve(*command, "--out", str(target), "--quiet")
        assert result.exit_code == 2, result.output
        assert "is a file" in result.output and "unexpected" not in result.output
    assert target.read_text(encoding="utf-8") == "mine"


def test_a_full_disk_is_named_with_its_fix_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC from the operating system, raised where the run writes its round files."""
    import evolvemem.loop.runner as runner

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "run" / "rounds"))

    monkeypatch.setattr(runner, "write_round_snapshot", full)
    result = evolve("run", "--benchmark", "synth", "--rounds", "0", "--out", str(tmp_path / "run"), "--quiet")
    assert result.exit_code == 2, result.output
    assert "disk is full" in result.output and "free some space" in result.output
    assert "unexpected" not in result.output


def test_a_store_cut_in_half_is_named_as_damaged(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert evolve("run", "--benchmark", "synth", "--rounds", "0", "--out", str(out), "--quiet").exit_code == 0
    db = out / "run.duckdb"
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    for command in (["show", str(out)], ["run", "--resume", str(out), "--quiet"]):
        result = evolve(*command)
        assert result.exit_code == 2, result.output
        assert "damaged" in result.output and "unexpected" not in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_environment_problems_name_cause_and_fix() -> None:
    from evolvemem.errors import environment_problem

    assert "disk is full" in environment_problem(OSError(errno.ENOSPC, "No space left on device", "/x"))
    read_only = environment_problem(OSError(errno.EROFS, "Read-only file system", "/mnt/ro/run"))
    assert "cannot write (/mnt/ro/run)" in read_only and "writable --out" in read_only
    assert environment_problem(ValueError("a bug")) is None


# ----------------------------------------------------------------------------- 7. credentials in URLs
def test_credentials_in_api_base_pass_through_and_are_never_printed_or_stored(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeLLMServer(make_responder()) as server:
        url = server.url.replace("http://", "http://alice:SECRET42@")
        result = llm_run(url, out, "--rounds", "0", "--json")
        assert result.exit_code == 0, result.output
        expected = "Basic " + base64.b64encode(b"alice:SECRET42").decode()
        assert server.headers and all(h.get("authorization") == expected for h in server.headers)
        resumed = evolve("run", "--resume", str(out), "--rounds", "1", "--quiet")
        assert resumed.exit_code == 2 and "--api-base" in resumed.output and "SECRET42" not in resumed.output
    assert "SECRET42" not in result.output
    stored = json.dumps(query(out, "SELECT key, value FROM manifest"))
    assert "SECRET42" not in stored and "***@127.0.0.1" in stored
    assert not any(
        "SECRET42" in p.read_text(errors="ignore")
        for p in out.rglob("*")
        if p.is_file() and p.suffix in (".json", ".toml", ".md", ".txt")
    )
    refused = llm_run(f"http://alice:SECRET42@127.0.0.1:{closed_port()}/v1", tmp_path / "other", "--rounds", "0")
    assert refused.exit_code == 2 and "SECRET42" not in refused.output and "***@127.0.0.1" in refused.output


# ----------------------------------------------------------------------------- 8. evidence naming no turn
def test_locomo_evidence_naming_no_turn_is_a_counted_warning_custom_data_is_refused(tmp_path: Path) -> None:
    turns = [{"speaker": "Mara", "dia_id": f"D1:{i}", "text": f"Mara adopted a parrot named Pip{i}."} for i in (1, 2)]
    sample = {
        "sample_id": "s1",
        "conversation": {
            "speaker_a": "Mara",
            "speaker_b": "Ivo",
            "session_1": turns,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
        },
        "qa": [
            {"question": "What is the parrot called?", "answer": "Pip1", "evidence": ["D1:1", "D1:9"], "category": 4},
            {"question": "Who adopted a parrot?", "answer": "Mara", "evidence": ["D7:2"], "category": 4},
        ],
    }
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample]), encoding="utf-8")
    result = evolve("eval", "--benchmark", "locomo", "--data", str(data), "--out", str(tmp_path / "ev"), "--quiet")
    assert result.exit_code == 0, result.output
    assert "2 of 3 evidence ids name no turn of their conversation" in " ".join(result.output.split())

    custom = {
        "conversations": [
            {
                "id": "c1",
                "sessions": [
                    {"id": "s1", "turns": [{"id": "c1-1", "speaker": "Mara", "text": "I adopted a parrot named Pip."}]}
                ],
            }
        ],
        "questions": [
            {
                "id": "q1",
                "conversation_id": "c1",
                "question": "What is the parrot called?",
                "answer": "Pip",
                "evidence": ["c1-9"],
            }
        ],
    }
    path = tmp_path / "custom.json"
    path.write_text(json.dumps(custom), encoding="utf-8")
    refused = evolve("eval", "--benchmark", "custom", "--data", str(path), "--out", str(tmp_path / "c"), "--quiet")
    assert refused.exit_code == 2 and "evidence 'c1-9' is not a turn" in refused.output


# ----------------------------------------------------------------------------- 9. messages
def test_a_refused_connection_is_named_as_such_with_the_address_masked() -> None:
    base = f"http://bob:HIDDEN@127.0.0.1:{closed_port()}/v1"
    client = LLMClient(MODEL, api_base=base, cache=None, max_retries=1, backoff_base=0.01)
    with pytest.raises(LLMCallFailed) as caught:
        client.complete([{"role": "user", "content": "hi"}], role="answer")
    message = str(caught.value)
    assert f"connection refused at http://***@127.0.0.1:{base.rsplit(':', 1)[1]}" in message
    assert "HTTP 500" not in message and "HIDDEN" not in message


def test_a_hung_server_is_given_up_on_after_about_the_timeout() -> None:
    timeout, breaker, workers = 1.0, 4, 8
    with FakeLLMServer() as warm:  # litellm's import and first client take seconds: not part of the timing
        LLMClient(MODEL, api_base=warm.url, cache=None).complete([{"role": "user", "content": "hi"}], role="answer")
    with FakeLLMServer(hang_seconds=30) as server:
        server.hang_next(10_000)
        client = LLMClient(
            MODEL, api_base=server.url, cache=None, timeout=timeout, breaker=breaker, max_retries=4, backoff_base=1.0
        )
        errors: list[str] = []

        def call(i: int) -> None:
            try:
                client.complete([{"role": "user", "content": f"question {i}"}], role="answer")
            except LLMCallFailed as exc:
                errors.append(str(exc))

        started = time.monotonic()
        threads = [threading.Thread(target=call, args=(i,)) for i in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        took = time.monotonic() - started
        sent = server.request_count
    assert len(errors) == workers and any("circuit breaker open" in e for e in errors)
    # every call waited about one timeout (and a backoff), not a second timeout per retry; the old client
    # sent 11 requests here, the 3 calls that timed out first retrying into the dead server. One retry is
    # allowed for a loaded machine, where a call's first attempt may start late
    # (no bound on the wall time here: a loaded machine stretches it; the requests tell the story)
    assert sent <= workers + 1, f"{sent} requests for {workers} calls (after {took:.1f} s)"


def test_the_preflight_accepts_credentials_in_the_url() -> None:
    from evolvemem.llm.preflight import endpoint_problem, split_credentials

    with FakeLLMServer() as server:
        assert endpoint_problem(server.url.replace("http://", "http://u:p%40ss@"), 5) is None
    url, auth = split_credentials("http://u:p%40ss@host:8080/v1/models")
    assert url == "http://host:8080/v1/models" and auth == "Basic " + base64.b64encode(b"u:p@ss").decode()


def test_a_resume_retries_the_failed_questions_of_a_finished_screening_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, new_cache
) -> None:  # noqa: F811
    """A screening's minibatch is a phase of its own: its failed questions must not outlive a resume."""
    monkeypatch.setenv("EVOLVEMEM_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("EVOLVEMEM_LLM_BREAKER", "0")
    run = tmp_path / "run"
    with FakeLLMServer(make_responder()) as server:
        assert llm_run(server.url, run, "--rounds", "0", "--no-evidence-rung", "--concurrency", "1").exit_code == 0
        server.fail_next(500, count=4)  # the resumed run's first answer calls: round 1's minibatch
        extended = evolve("run", "--resume", str(run), "--rounds", "1", "--api-base", server.url, "--quiet")
        assert extended.exit_code == 0, extended.output
    failed = query(run, "SELECT phase, count(*) AS n FROM question_records WHERE failed GROUP BY phase")
    assert failed == [{"phase": "screen1", "n": 4}]
    with FakeLLMServer(make_responder()) as server:
        resumed = evolve("run", "--resume", str(run), "--api-base", server.url, "--quiet")
        assert resumed.exit_code == 0, resumed.output
        assert server.request_count == 4  # exactly the failed questions, asked again
    assert query(run, "SELECT count(*) AS n FROM question_records WHERE failed") == [{"n": 0}]
    assert query(run, "SELECT n_failed FROM rounds WHERE phase = 'screen1'") == [{"n_failed": 0}]
