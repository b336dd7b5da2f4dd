"""`evolve run` inputs a newcomer gets wrong, through the CLI: a run directory exists only once its
inputs are valid, a one-conversation file evolves without a test split (said plainly), and resume
reads the data file the manifest recorded — not the shell's environment — or a relocated copy
whose content must be the same."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evolvemem.store.run_store import DB_NAME
from tests.test_llm_pipeline import evolve, query

TINY = Path(__file__).resolve().parent / "fixtures" / "locomo_tiny.json"


def two_conversations(folder: Path) -> Path:
    sample = json.loads(TINY.read_text(encoding="utf-8"))[0]
    path = folder / "two.json"
    path.write_text(json.dumps([sample, {**sample, "sample_id": f"{sample['sample_id']}-copy"}]), encoding="utf-8")
    return path


def test_bad_data_leaves_no_run_directory_and_the_same_out_works_next(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"conversation": {}}]), encoding="utf-8")
    out = tmp_path / "run"
    failed = evolve("run", "--data", str(bad), "--out", str(out), "--rounds", "1", "--quiet")
    assert failed.exit_code == 2 and "sample_id" in failed.output
    assert not (out / DB_NAME).exists()
    good = evolve("run", "--data", str(two_conversations(tmp_path)), "--out", str(out), "--rounds", "1", "--quiet")
    assert good.exit_code == 0, good.output


def test_one_conversation_evolves_without_a_test_split(tmp_path: Path) -> None:
    result = evolve("run", "--data", str(TINY), "--out", str(tmp_path / "run"), "--rounds", "1", "--quiet")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "nothing is held out" in said and "--split all" not in said
    assert query(tmp_path / "run", "SELECT count(*) AS n FROM question_records WHERE phase LIKE 'test%'")[0]["n"] == 0


def test_resume_reads_the_recorded_data_file_not_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = two_conversations(tmp_path)
    out = tmp_path / "run"
    monkeypatch.setenv("EVOLVEMEM_LOCOMO_PATH", str(data))
    first = evolve("run", "--out", str(out), "--rounds", "1", "--quiet")  # data from the environment only
    assert first.exit_code == 0, first.output
    monkeypatch.delenv("EVOLVEMEM_LOCOMO_PATH")
    more = evolve("run", "--resume", str(out), "--rounds", "2", "--seed", "5", "--executor", "local", "--quiet")
    assert more.exit_code == 0, more.output
    said = " ".join(more.output.split())
    assert "ignored: --seed" in said and "--executor" not in said  # a resume does use the executor it is given
    assert query(out, "SELECT max(round) AS r FROM question_records WHERE phase = 'dev'")[0]["r"] == 2
    # relocated: the same content is accepted at a new path; a different file is refused
    moved = tmp_path / "elsewhere" / "two.json"
    moved.parent.mkdir()
    shutil.move(data, moved)
    assert evolve("run", "--resume", str(out), "--rounds", "3", "--quiet").exit_code == 2
    relocated = evolve("run", "--resume", str(out), "--rounds", "3", "--data", str(moved), "--quiet")
    assert relocated.exit_code == 0, relocated.output
    other = tmp_path / "other.json"
    changed = json.loads(moved.read_text(encoding="utf-8"))
    changed[1]["qa"] = changed[1]["qa"][:-1]
    other.write_text(json.dumps(changed), encoding="utf-8")
    refused = evolve("run", "--resume", str(out), "--rounds", "4", "--data", str(other), "--quiet")
    assert refused.exit_code == 2 and "differs from the one the run started with" in " ".join(refused.output.split())


def test_values_are_never_rounded_or_accepted_silently(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("max_context = 12.7\n", encoding="utf-8")
    result = evolve("eval", "--benchmark", "synth", "--config", str(config), "--out", str(tmp_path / "a"), "--quiet")
    assert result.exit_code == 2 and "expected a whole number, got 12.7" in " ".join(result.output.split())
    config.write_text("max_context = 12.0\n", encoding="utf-8")  # a whole number written as a float is fine
    assert (
        evolve(
            "eval", "--benchmark", "synth", "--config", str(config), "--out", str(tmp_path / "b"), "--quiet"
        ).exit_code
        == 0
    )
    zero = evolve("eval", "--benchmark", "synth", "--concurrency", "0", "--out", str(tmp_path / "c"), "--quiet")
    assert zero.exit_code == 2 and "--concurrency" in zero.output
    for option, level in (("--alpha", "0"), ("--screen-alpha", "1.5")):
        bad = evolve("run", "--benchmark", "synth", option, level, "--out", str(tmp_path / option), "--quiet")
        said = " ".join(bad.output.split())
        assert bad.exit_code == 2 and f"{option} must be between 0 and 1 (exclusive), not {level}" in said
        assert not (tmp_path / option).exists()
    kept = evolve(
        "run", "--benchmark", "synth", "--rounds", "0", "--screen-alpha", "0.1", "--out", str(tmp_path / "d"), "--quiet"
    )
    spec = query(tmp_path / "d", "SELECT value FROM manifest WHERE key = 'spec'")[0]["value"]
    assert kept.exit_code == 0 and spec["screen_alpha"] == 0.1


def test_show_names_models_by_role_and_categories_by_name(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        evolve(
            "run", "--data", str(two_conversations(tmp_path)), "--out", str(out), "--rounds", "1", "--quiet"
        ).exit_code
        == 0
    )
    shown = " ".join(evolve("show", str(out)).output.split())
    assert "models: offline (every role)" in shown and "{" not in shown.split("rounds (dev;")[0]
    assert "cat 1" not in shown
    # in a 100-column terminal every table fits and keeps its headers whole
    narrow = subprocess.run(
        [sys.executable, "-m", "evolvemem.cli.main", "show", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
        timeout=120,
    )
    assert narrow.returncode == 0, narrow.stderr
    tables = [line for line in narrow.stdout.splitlines() if line[:1] in "┏┃┡│└"]
    assert tables and max(len(line) for line in tables) <= 100
    # an offline run evolves on evidence: its tables show recall and context size, not F1
    assert "next" in narrow.stdout and "single-hop" in narrow.stdout and "test recall" in narrow.stdout


def test_a_round_where_every_question_failed_is_an_error_and_failures_are_summarised_by_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fake_llm_server import FakeLLMServer
    from tests.test_llm_pipeline import llm_eval, make_responder

    monkeypatch.setenv("EVOLVEMEM_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("EVOLVEMEM_LLM_BREAKER", "0")  # every question is asked (the breaker has its own test)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer(make_responder()) as server:
        server.fail_next(500, count=10_000)
        dead = llm_eval(server, tmp_path / "dead", "--no-cache")
        said = " ".join(dead.output.split())
        assert (
            dead.exit_code == 2 and "every one of its 60 questions failed" in said and "fake server error 500" in said
        )
        run = evolve(
            "run",
            "--benchmark",
            "synth",
            "--model",
            "openai/fake-model",
            "--api-base",
            server.url,
            "--extract-model",
            "offline",
            "--rounds",
            "1",
            "--out",
            str(tmp_path / "run"),
            "--quiet",
        )
        assert run.exit_code == 2 and "every one of its" in " ".join(run.output.split())
    with FakeLLMServer(make_responder()) as server:
        server.fail_next(500, count=3)
        some = llm_eval(server, tmp_path / "some", "--no-cache", "--concurrency", "1")
        said = " ".join(some.output.split())
        assert some.exit_code == 0 and "3 questions failed" in said and "3 × " in said


def test_the_circuit_breaker_stops_a_dead_model_after_a_few_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fake_llm_server import FakeLLMServer
    from tests.test_llm_pipeline import llm_eval, make_responder

    monkeypatch.setenv("EVOLVEMEM_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("EVOLVEMEM_LLM_BREAKER", "4")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer(make_responder()) as server:
        server.fail_next(500, count=10_000)
        stopped = llm_eval(server, tmp_path / "ev", "--no-cache", "--concurrency", "1")
        said = " ".join(stopped.output.split())
        assert stopped.exit_code == 2 and "circuit breaker open after 4 failed calls in a row" in said
        assert "fake server error 500" in said and server.request_count == 4  # the other 56 never sent
    with FakeLLMServer(make_responder()) as server:  # the endpoint fixed: the same eval resumes
        resumed = llm_eval(server, tmp_path / "ev", "--no-cache", "--concurrency", "1")
        assert resumed.exit_code == 0, resumed.output
        assert server.request_count == 60


def test_a_closed_port_fails_in_one_line_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import time

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    result = evolve(
        "eval",
        "--benchmark",
        "synth",
        "--model",
        "openai/nobody",
        "--api-base",
        f"http://127.0.0.1:{port}/v1",
        "--out",
        str(tmp_path / "ev"),
        "--quiet",
    )
    said = " ".join(result.output.split())
    assert (
        result.exit_code == 2
        and f"the model endpoint http://127.0.0.1:{port}/v1 (openai/nobody) does not answer" in said
    )
    assert "refused" in said.lower() and time.monotonic() - started < 15
    assert (
        not (tmp_path / "ev" / DB_NAME).exists()
        or query(tmp_path / "ev", "SELECT count(*) AS n FROM question_records")[0]["n"] == 0
    )


def test_a_server_that_never_answers_fails_in_one_line_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host that accepts connections and then says nothing (a hung server, a firewall that
    swallows packets): the preflight gives up after the call timeout and names the endpoint."""
    import socket
    import time

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("EVOLVEMEM_LLM_TIMEOUT", "2")
    with socket.socket() as sock:  # listening, never accepted: the connection opens, no byte comes back
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        port = sock.getsockname()[1]
        started = time.monotonic()
        result = evolve(
            "eval",
            "--benchmark",
            "synth",
            "--model",
            "openai/silent",
            "--api-base",
            f"http://127.0.0.1:{port}/v1",
            "--out",
            str(tmp_path / "ev"),
            "--quiet",
        )
        took = time.monotonic() - started
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert (
        f"the model endpoint http://127.0.0.1:{port}/v1 (openai/silent) does not answer: no answer within 2 s" in said
    )
    assert took < 15


def test_a_server_that_accepts_but_never_completes_is_stopped_by_the_breaker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preflight passes (the server lists its models) but every completion hangs: each call
    times out, the breaker stops the model after a few, and the eval ends with the cause, resumable."""
    import time

    from tests.fake_llm_server import FakeLLMServer
    from tests.test_llm_pipeline import llm_eval, make_responder

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("EVOLVEMEM_LLM_TIMEOUT", "0.5")
    monkeypatch.setenv("EVOLVEMEM_LLM_MAX_RETRIES", "3")  # each timed-out attempt counts: 4 waits, not 16
    monkeypatch.setenv("EVOLVEMEM_LLM_BACKOFF_BASE", "0")
    monkeypatch.setenv("EVOLVEMEM_LLM_BREAKER", "4")
    with FakeLLMServer(make_responder(), hang_seconds=5.0) as server:
        server.hang_next(count=10_000)
        started = time.monotonic()
        hung = llm_eval(server, tmp_path / "ev", "--no-cache", "--concurrency", "2")
        took = time.monotonic() - started
        said = " ".join(hung.output.split())
        assert hung.exit_code == 2, hung.output
        assert "circuit breaker open after 4 failed calls in a row" in said and "timed out" in said.lower()
        assert server.request_count <= 6 and took < 30  # 60 questions, yet only the breaker's few calls waited
    with FakeLLMServer(make_responder()) as server:  # the server recovered: the same eval finishes
        resumed = llm_eval(server, tmp_path / "ev", "--no-cache", "--concurrency", "2")
        assert resumed.exit_code == 0, resumed.output


def test_space_piped_lists_every_dimension_whole_with_defaults_as_written_in_a_config() -> None:
    from evolvemem.space.action_space import files_space

    listed = evolve("space").output
    dims = files_space()
    assert listed.count("\n    ") == len(dims)
    for dim in dims.dimensions():
        assert dim.description in listed  # nothing cut when piped
    assert "default rrf;" in listed and "'rrf'" not in listed and "default None" not in listed
    assert "default true" in listed or "default false" in listed
    assert "per type; answer stage)" in listed and "retrieval stage)" in listed


def test_show_reads_a_run_that_another_process_is_writing(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "run"
    assert (
        evolve(
            "run", "--data", str(two_conversations(tmp_path)), "--out", str(out), "--rounds", "1", "--quiet"
        ).exit_code
        == 0
    )
    holder = subprocess.Popen(  # another process holds the run open for writing (as a running evolve run does)
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom evolvemem.store.run_store import RunStore\n"
            f"store = RunStore({str(out)!r})\nprint('open', flush=True)\ntime.sleep(60)",
        ],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        shown = evolve("show", str(out))
        said = " ".join(shown.output.split())
        assert shown.exit_code == 0, shown.output
        assert "still being written by another process" in said and "rounds (dev;" in said
        listed = evolve("runs", str(tmp_path), "--json")
        assert listed.exit_code == 0 and '"status": "running"' in listed.output
    finally:
        holder.kill()
        holder.wait()


def test_transfer_compares_the_evolved_config_with_the_runs_start_on_the_target(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        evolve(
            "run", "--data", str(two_conversations(tmp_path)), "--out", str(out), "--rounds", "1", "--quiet"
        ).exit_code
        == 0
    )
    moved = evolve("transfer", str(out), "--benchmark", "synth", "--out", str(tmp_path / "t"), "--json")
    assert moved.exit_code == 0, moved.output
    said = " ".join(moved.output.split())
    assert "vs the run's start on the same questions (paired)" in said and "rubric diagnosis" not in said
    payload = json.loads(moved.stdout.strip().splitlines()[-1])
    assert payload["baseline"]["label"] == "the run's start" and payload["baseline"]["overall"]["n"] == 60
    assert set(payload["baseline"]["paired"]["groups"]) >= {"main", "all"}
    assert query(tmp_path / "t", "SELECT count(*) AS n FROM question_records WHERE phase = 'baseline'")[0]["n"] == 60


def test_a_run_written_by_an_older_version_is_shown_diffed_and_reported(tmp_path: Path) -> None:
    """Inspection opens a store read-only, so it cannot add the columns a newer version reads:
    it reads an upgraded copy instead, and leaves the old file as it was."""
    import duckdb

    out = tmp_path / "run"
    assert (
        evolve(
            "run", "--data", str(two_conversations(tmp_path)), "--out", str(out), "--rounds", "1", "--quiet"
        ).exit_code
        == 0
    )
    con = duckdb.connect(str(out / DB_NAME))  # make it look like a store from before screening and emergence
    con.execute("DROP VIEW question_failures")
    old_columns = ("reused", "context_key", "context_mode", "evidence_in_context", "answer_right", "reader_failure")
    for column in old_columns:
        con.execute(f"ALTER TABLE question_records DROP COLUMN {column}")
    con.execute("DROP TABLE screenings")
    con.execute("ALTER TABLE proposed_dimensions DROP COLUMN status")
    con.close()
    for command in (("show", str(out)), ("diff", str(out), "0", "1"), ("report", str(out), "--no-png")):
        result = evolve(*command)
        assert result.exit_code == 0, (command, result.output)
    con = duckdb.connect(str(out / DB_NAME), read_only=True)
    tables = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    con.close()
    assert "screenings" not in tables  # the old file itself was not touched
