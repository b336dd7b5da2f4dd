"""The LLM path end to end: `evolve eval` / `evolve run` through the real CLI, litellm, the
openai SDK and httpx against the fake OpenAI-compatible server on 127.0.0.1.

Memories come from the offline extractor (`--extract-model offline`); every other role talks to
the fake server. Its responder answers with the last word of the first memory in the prompt, so
each prediction can be checked against the record's own context."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app
from evolvemem.store import RunStore
from tests.fake_llm_server import FakeLLMServer, count_tokens, message_text, wants_json

SECRET_KEY = "sk-test-SECRET123"
MODEL = "openai/fake-model"
ABSTAIN = "Not mentioned in the conversation."
_STRIP = ".,!?;:\"'()"


# ----------------------------------------------------------------------------- responders
def first_user_message(body: dict) -> str:
    return next((message_text(m) for m in body.get("messages", []) if m.get("role") == "user"), "")


def first_memory_word(prompt: str) -> str:
    """The last word of memory 1 of the real case (the few-shot examples come before it)."""
    real_case = prompt.split("Now the real case.", 1)[-1]
    match = re.search(r"^1\. (.+)$", real_case, re.M)
    return match.group(1).split()[-1].strip(_STRIP) if match else ABSTAIN


def asked_question(body: dict) -> str:
    """The question an answer prompt asks (its last "Question:" line)."""
    return re.findall(r"^Question: (.+)$", first_user_message(body), re.M)[-1].strip()


def is_diagnosis(body: dict) -> bool:
    return wants_json(body) and "Your reply" in first_user_message(body)


def make_responder(diagnosis_reply: str = "{}") -> Callable[[dict], str]:
    """Answers: the first memory's last word. Diagnosis: `diagnosis_reply`. Other JSON calls
    (decomposition, verification after an exploration step) get an empty object, which those
    roles treat as an unusable reply and fall back from."""

    def respond(body: dict) -> str:
        if is_diagnosis(body):
            return diagnosis_reply
        if wants_json(body):
            return "{}"
        return first_memory_word(first_user_message(body))

    return respond


# ----------------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def seed_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Embeddings and offline memories of the synth benchmark, computed once for this module
    (embedding from scratch costs seconds per test); no LLM reply is in it. Also pays litellm's,
    openai's and the scorer's one-off imports before any test measures time."""
    from evolvemem.llm.client import LLMClient
    from evolvemem.scoring.metrics import answer_tokens

    root = tmp_path_factory.mktemp("seed") / "cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVOLVEMEM_CACHE_DIR", str(root))
        patch.setenv("OPENAI_API_KEY", "warm-up")
        patch.delenv("EVOLVEMEM_MODEL", raising=False)
        result = evolve("eval", "--benchmark", "synth", "--out", str(root.parent / "run"), "--quiet")
        assert result.exit_code == 0, result.output
        with FakeLLMServer() as server:
            LLMClient(MODEL, api_base=server.url, cache=None).complete(
                [{"role": "user", "content": "hi"}], role="warmup"
            )
    answer_tokens("warming up")
    assert not (root / "llm").exists()
    return root


@pytest.fixture(autouse=True)
def new_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seed_cache: Path) -> Callable[[str], Path]:
    """A fake key, short client backoff (retries stay fast), and a cache of this test's own:
    `new_cache(name)` switches to another fresh one (seeded with embeddings, no LLM replies)."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.delenv("EVOLVEMEM_MODEL", raising=False)
    monkeypatch.delenv("EVOLVEMEM_NO_LLM_CACHE", raising=False)
    monkeypatch.setenv("EVOLVEMEM_LLM_BACKOFF_BASE", "0.01")

    def make(name: str) -> Path:
        cache = tmp_path / name
        shutil.copytree(seed_cache, cache)
        monkeypatch.setenv("EVOLVEMEM_CACHE_DIR", str(cache))
        return cache

    make("cache")
    return make


def evolve(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def llm_eval(server: FakeLLMServer, out: Path, *extra: str) -> Any:
    return evolve(
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
        *extra,
    )


def query(run_dir: Path, sql: str, params: list | None = None) -> list[dict]:
    with RunStore(run_dir, read_only=True) as store:
        return store.query(sql, params)


def records(run_dir: Path) -> list[dict]:
    return query(run_dir, "SELECT * FROM question_records ORDER BY question_id")


def predictions(run_dir: Path) -> dict[str, str]:
    return {r["question_id"]: r["prediction"] for r in records(run_dir)}


def expected_predictions(run_dir: Path) -> dict[str, str]:
    """What the responder must have said for each record, from the record's own context."""
    contents = {m["memory_id"]: m["content"] for m in query(run_dir, "SELECT memory_id, content FROM memories")}
    return {
        r["question_id"]: contents[r["context_ids"][0]].split()[-1].strip(_STRIP) if r["context_ids"] else ABSTAIN
        for r in records(run_dir)
    }


def eval_round(run_dir: Path) -> dict:
    return query(run_dir, "SELECT * FROM rounds WHERE round = 0 AND phase = 'eval'")[0]


# ----------------------------------------------------------------------------- tests
def test_eval_records_llm_usage_and_a_second_eval_replays_from_the_cache(tmp_path: Path) -> None:
    with FakeLLMServer(make_responder()) as server:
        first = llm_eval(server, tmp_path / "first")
        assert first.exit_code == 0, first.output
        bodies = list(server.requests)
        rows = records(tmp_path / "first")
        assert len(rows) == 60 and len(bodies) == 60  # default config: one answer call per question
        assert all(r["calls"] == 1 and r["cache_hits"] == 0 and not r["failed"] for r in rows)
        # token counts are the server's own (whitespace words), request by request
        served = sorted(sum(count_tokens(message_text(m)) for m in b["messages"]) for b in bodies)
        assert sorted(r["prompt_tokens"] for r in rows) == served
        assert all(r["completion_tokens"] == count_tokens(r["prediction"]) for r in rows)
        # the model saw each question's retrieved context: its answer is that context's first memory
        assert predictions(tmp_path / "first") == expected_predictions(tmp_path / "first")
        assert {asked_question(b) for b in bodies} == {r["question"].strip() for r in rows}
        usage = query(tmp_path / "first", "SELECT * FROM usage WHERE round = 0")
        assert [(u["role"], u["calls"], u["prompt_tokens"]) for u in usage] == [("answer", 60, sum(served))]

        second = llm_eval(server, tmp_path / "second")
        assert second.exit_code == 0, second.output
        assert server.request_count == 60  # every reply came from the cache
        assert predictions(tmp_path / "second") == predictions(tmp_path / "first")
        assert all(r["calls"] == 0 and r["cache_hits"] == 1 for r in records(tmp_path / "second"))
        usage = query(tmp_path / "second", "SELECT role, calls, cache_hits FROM usage WHERE round = 0")
        assert usage == [{"role": "answer", "calls": 0, "cache_hits": 60}]


def test_concurrent_answering_overlaps_the_calls(tmp_path: Path) -> None:
    """Overlap is read at the server (the most requests inside their latency at once), not from the
    wall clock, which a busy machine or a parallel test run stretches."""
    with FakeLLMServer(make_responder(), latency=0.2) as server:
        result = llm_eval(server, tmp_path / "run", "--concurrency", "8")
        assert result.exit_code == 0, result.output
        calls, peak = server.request_count, server.peak_in_flight
    assert calls == 60
    assert peak >= 4, f"at most {peak} of 60 calls were in flight at once with --concurrency 8"
    assert peak <= 8, f"{peak} calls in flight at once though --concurrency is 8"


def test_injected_faults_are_retried_to_the_fault_free_predictions(tmp_path: Path, monkeypatch, new_cache) -> None:
    with FakeLLMServer(make_responder()) as server:
        assert llm_eval(server, tmp_path / "clean").exit_code == 0
    clean = predictions(tmp_path / "clean")

    # a fresh cache, 20% faults: 429 with Retry-After 0, 500, a hang past the client timeout, and
    # malformed JSON (this only hits JSON-mode calls, which answering does not make)
    new_cache("cache-faulty")
    monkeypatch.setenv("EVOLVEMEM_LLM_TIMEOUT", "0.5")
    monkeypatch.setenv("EVOLVEMEM_LLM_MAX_RETRIES", "8")  # a question failing 9 draws in a row: ~1e-7
    with FakeLLMServer(make_responder(), hang_seconds=1.5) as server:
        server.set_fault_rate(0.2, seed=3)
        result = llm_eval(server, tmp_path / "faulty")
        assert result.exit_code == 0, result.output
        assert server.request_count > 60  # faults happened and were retried
    assert not any(r["failed"] for r in records(tmp_path / "faulty"))
    assert predictions(tmp_path / "faulty") == clean


def test_failed_calls_are_recorded_unscored_and_asked_again_on_resume(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EVOLVEMEM_LLM_MAX_RETRIES", "1")
    monkeypatch.setenv("EVOLVEMEM_LLM_BREAKER", "0")  # every question reaches the broken server
    run_dir = tmp_path / "run"
    with FakeLLMServer(make_responder()) as broken:
        broken.fail_next(500, count=10_000)
        result = llm_eval(broken, run_dir, "--json")
        # nothing scored is an error naming the cause, not a score (the round stays open)
        assert result.exit_code == 2 and "every one of its 60 questions failed" in " ".join(result.output.split())
        assert broken.request_count == 120  # two attempts per question, then it gives up
    rows = records(run_dir)
    assert len(rows) == 60
    assert all(r["failed"] and r["f1"] is None and r["prediction"] == "" for r in rows)  # not scored as wrong
    assert all("HTTP 500" in r["error"] for r in rows)
    assert query(run_dir, "SELECT role, calls, failures FROM usage WHERE round = 0") == [
        {"role": "answer", "calls": 0, "failures": 60}
    ]

    with FakeLLMServer(make_responder()) as healthy:  # the same eval again, the server back up
        again = llm_eval(healthy, run_dir)
        assert again.exit_code == 0, again.output
        assert healthy.request_count == 60
    rows = records(run_dir)
    assert len(rows) == 60 and not any(r["failed"] for r in rows)
    assert all(r["f1"] is not None for r in rows)
    assert eval_round(run_dir)["n_failed"] == 0
    assert predictions(run_dir) == expected_predictions(run_dir)


def test_a_resumed_eval_asks_only_the_failed_questions(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EVOLVEMEM_LLM_MAX_RETRIES", "1")
    run_dir = tmp_path / "run"
    with FakeLLMServer(make_responder()) as server:
        server.fail_next(500, count=2 * 7)  # one question at a time: the first 7 fail, both attempts
        assert llm_eval(server, run_dir, "--concurrency", "1").exit_code == 0
        assert server.request_count == 60 + 7
    failed = {r["question"].strip() for r in records(run_dir) if r["failed"]}
    assert len(failed) == 7 and eval_round(run_dir)["n_failed"] == 7

    with FakeLLMServer(make_responder()) as server:
        resumed = evolve(
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
            str(run_dir),
        )
        assert resumed.exit_code == 0, resumed.output
        assert {asked_question(b) for b in server.requests} == failed and server.request_count == 7
    assert "resuming" in resumed.output
    assert not any(r["failed"] for r in records(run_dir))
    assert predictions(run_dir) == expected_predictions(run_dir)


def test_resuming_an_eval_with_another_config_is_refused(tmp_path: Path) -> None:
    with FakeLLMServer(make_responder()) as server:
        assert llm_eval(server, tmp_path / "run").exit_code == 0
        other = llm_eval(server, tmp_path / "run", "--config", "weak")
    assert other.exit_code == 2
    assert "another config" in other.output and "Traceback" not in other.output


def test_no_api_key_reaches_the_run_directory_or_the_output(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with FakeLLMServer(make_responder()) as server:
        # providers echo a rejected key back in the error message; it must not be stored
        server.fail_next(401, count=5, body=f"Incorrect API key provided: {SECRET_KEY}.")
        result = llm_eval(server, run_dir, "--json")
        assert result.exit_code == 0, result.output
        assert all(SECRET_KEY in h.get("authorization", "") for h in server.headers)  # the key was used
    errors = [r["error"] for r in records(run_dir) if r["failed"]]
    assert len(errors) == 5 and all("HTTP 401" in e for e in errors)
    assert "SECRET123" not in result.output + result.stdout + result.stderr
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert b"SECRET123" not in path.read_bytes(), path
    with RunStore(run_dir, read_only=True) as store:  # DuckDB may compress strings on disk
        for (table,) in store.con.execute("SELECT table_name FROM information_schema.tables").fetchall():
            dumped = json.dumps(store.query(f'SELECT * FROM "{table}"'), default=str)
            assert "SECRET123" not in dumped, table


def test_the_cli_says_once_when_offline_roles_are_used(tmp_path: Path) -> None:
    offline = evolve("eval", "--benchmark", "synth", "--out", str(tmp_path / "offline"))
    assert offline.exit_code == 0, offline.output
    assert offline.output.count("No model configured") == 1

    with FakeLLMServer(make_responder()) as server:
        online = evolve(
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
            str(tmp_path / "online"),
        )
    assert online.exit_code == 0, online.output
    assert "No model configured" not in online.output
    assert online.output.count(f"answer={MODEL}") == 1 and "extract=offline" in online.output


def llm_run(server: FakeLLMServer, out: Path) -> Any:
    """One round of an LLM-diagnosed run; round 1 scores the diagnosed config in full (no
    screening: a change that does not move the first memory would be screened out here)."""
    return evolve(
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
        "--diagnoser",
        "llm",
        "--screen-fraction",
        "0",
        "--out",
        str(out),
        "--quiet",
    )


def test_run_with_a_garbled_llm_diagnosis_logs_it_and_falls_back_to_the_rubric(tmp_path: Path) -> None:
    garbled = "Looking at the failures, I would raise max_context a bit and maybe turn on"
    with FakeLLMServer(make_responder(garbled)) as server:
        result = llm_run(server, tmp_path / "run")
        assert result.exit_code == 0, result.output
        diagnosis_calls = [b for b in server.requests if is_diagnosis(b)]
    assert len(diagnosis_calls) == 2  # the reply and one re-ask for JSON
    diagnoses = query(tmp_path / "run", "SELECT * FROM diagnoses")
    assert len(diagnoses) == 1
    assert diagnoses[0]["raw_response"] == garbled and "unparseable" in diagnoses[0]["parse_error"]
    assert diagnoses[0]["proposal"]["changes"] == {} and diagnoses[0]["proposal"]["overrides"] == {}
    # not silent random exploration: the round falls back to the rubric's best action, said so
    decision = query(tmp_path / "run", "SELECT decision, reason, fallback FROM decisions WHERE round = 0")[0]
    assert "unparseable" in decision["fallback"] and decision["fallback"].endswith("rubric fallback")
    assert decision["decision"] == "applied" and decision["reason"].startswith("rubric fallback")
    done = query(tmp_path / "run", "SELECT round FROM rounds WHERE phase = 'dev' AND status = 'done' ORDER BY round")
    assert [r["round"] for r in done] == [0, 1]  # the run went on to round 1
    roles = {r["role"] for r in query(tmp_path / "run", "SELECT DISTINCT role FROM usage")}
    assert {"answer", "diagnose"} <= roles


def test_run_with_a_valid_llm_diagnosis_applies_and_records_the_change(tmp_path: Path) -> None:
    proposal = {
        "analysis": "Evidence is retrieved but cut by the budget.",
        "changes": {"max_context": 14},
        "overrides": {},
        "missing_topics": [],
        "new_dimensions": [],
        "rationale": "a larger context keeps the dated memories",
    }
    with FakeLLMServer(make_responder(json.dumps(proposal))) as server:
        result = llm_run(server, tmp_path / "run")
        assert result.exit_code == 0, result.output
    diagnosis = query(tmp_path / "run", "SELECT * FROM diagnoses")[0]
    assert diagnosis["parse_error"] is None and diagnosis["proposal"]["changes"] == {"max_context": 14}
    assert diagnosis["calls"] == 1 and diagnosis["prompt_tokens"] > 0
    decision = query(tmp_path / "run", "SELECT * FROM decisions WHERE round = 0")[0]
    assert decision["decision"] == "applied"
    assert [(c["field"], c["old"], c["new"]) for c in decision["changes"]] == [("max_context", 8, 14)]
    assert decision["next_config"]["max_context"] == 14
    round_1 = query(tmp_path / "run", "SELECT config FROM rounds WHERE round = 1 AND phase = 'dev'")[0]
    assert round_1["config"]["max_context"] == 14  # round 1 was scored with the applied change


def test_a_bad_client_setting_in_the_environment_is_a_one_line_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EVOLVEMEM_LLM_TIMEOUT", "soon")
    with FakeLLMServer(make_responder()) as server:
        result = llm_eval(server, tmp_path / "run")
        assert server.request_count == 0
    assert result.exit_code == 2
    assert "EVOLVEMEM_LLM_TIMEOUT='soon' is not a float" in result.output and "Traceback" not in result.output


def test_usage_is_recorded_as_it_happens_so_an_interrupted_eval_never_undercounts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process stopped mid-round (Ctrl-C here; kill -9 loses at most the unflushed batch) has
    recorded the calls of every answer it kept; the resumed round adds only its own."""
    from evolvemem.session import rounds as rounds_module

    original = rounds_module.evaluate
    seen = {"n": 0}

    def interrupting(*args: Any, **kwargs: Any) -> Any:
        on_record = kwargs.get("on_record")

        def counting(record: dict) -> None:
            seen["n"] += 1
            if seen["n"] == 25:
                raise KeyboardInterrupt
            if on_record:
                on_record(record)

        kwargs["on_record"] = counting
        return original(*args, **kwargs)

    with FakeLLMServer(make_responder()) as server:
        monkeypatch.setattr(rounds_module, "evaluate", interrupting)
        stopped = llm_eval(server, tmp_path / "ev", "--concurrency", "1", "--no-cache")
        assert stopped.exit_code == 130
        kept = query(tmp_path / "ev", "SELECT count(*) AS n, sum(calls) AS calls FROM question_records")[0]
        billed = query(tmp_path / "ev", "SELECT sum(calls) AS calls FROM usage WHERE round = 0")[0]
        assert kept["n"] == 25 and billed["calls"] == kept["calls"] == len(server.requests) == 25
        monkeypatch.setattr(rounds_module, "evaluate", original)
        resumed = llm_eval(server, tmp_path / "ev", "--concurrency", "1", "--no-cache")
        assert resumed.exit_code == 0, resumed.output
        usage = query(tmp_path / "ev", "SELECT role, calls FROM usage WHERE round = 0")
        assert usage == [{"role": "answer", "calls": 60}] == [{"role": "answer", "calls": len(server.requests)}]


def test_a_resumed_run_reaches_its_model_at_a_new_address(tmp_path: Path) -> None:
    """A local server restarted on another port: `--resume --api-base` points the run at it."""
    run = tmp_path / "run"
    with FakeLLMServer(make_responder("{}")) as first:
        assert (
            evolve(
                "run",
                "--benchmark",
                "synth",
                "--rounds",
                "0",
                "--answer-model",
                MODEL,
                "--api-base",
                first.url,
                "--extract-model",
                "offline",
                "--out",
                str(run),
                "--quiet",
            ).exit_code
            == 0
        )
    with FakeLLMServer(make_responder("{}")) as second:
        result = evolve("run", "--resume", str(run), "--rounds", "1", "--api-base", second.url, "--quiet")
        assert result.exit_code == 0, result.output
        assert "ignored" not in result.output
        assert second.requests  # round 1 and the test scores asked the new address
    spec = query(run, "SELECT value FROM manifest WHERE key = 'spec'")[0]["value"]
    assert spec["models"]["api_base"] == second.url
