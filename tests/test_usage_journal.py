"""Every LLM call that returned to the process is in the run's usage table after a kill and a
resume, once (issue 31): each call's usage is journaled (`usage.jsonl`) the moment its reply is
in hand and folded into the store exactly once. Measured against the fake server, which counts a
completion as delivered only once its client read it (TCP tells a read reply from one a killed
process left in its socket), and names each call by the id the client sends with it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import pytest
from pathlib import Path

from evolvemem.contracts.usage import Usage
from evolvemem.store import RunStore
from evolvemem.store.usage_journal import JOURNAL_NAME
from tests.fake_llm_server import FakeLLMServer
from tests.test_extraction import copy_responder
from tests.test_llm_pipeline import MODEL, make_responder, new_cache, query, seed_cache  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


def extract_and_answer() -> object:
    """Extraction prompts get one memory per turn; answer prompts the first memory's last word."""
    extract, answer = copy_responder(), make_responder()

    def respond(body: dict) -> str:
        prompt = next((m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user"), "")
        return extract(body) if "Turns to write memories about:" in str(prompt) else answer(body)

    return respond


def eval_command(server: FakeLLMServer, out: Path) -> list[str]:
    return [
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
        "--no-cache",
        "--out",
        str(out),
        "--quiet",
    ]


def journaled_call_ids(out: Path) -> list[str]:
    lines = (out / JOURNAL_NAME).read_text(encoding="utf-8").splitlines()
    return [item["id"] for item in map(json.loads, lines) if item.get("calls")]


@pytest.mark.slow
def test_calls_a_sigkill_interrupted_are_in_the_usage_table_exactly_once_after_resume(tmp_path: Path) -> None:
    """Killed after `delivered` extraction replies (memories are built before any record is written,
    so nothing flushes them): the resumed run's usage holds exactly the calls both servers delivered,
    call by call, none twice. Before the journal, usage of the run's setup was written only once the
    whole workspace was built, and a kill during extraction lost every call made so far."""
    out, delivered = tmp_path / "ev", 3
    gate = threading.Event()
    served = {"n": 0}
    lock = threading.Lock()
    respond_normally = extract_and_answer()

    def respond(body: dict) -> str:
        with lock:
            served["n"] += 1
            number = served["n"]
        if number > delivered:
            gate.wait(60)  # every later call hangs until the test lets go
        return respond_normally(body)

    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "HF_HUB_OFFLINE": "1"}
    with FakeLLMServer(respond) as server:
        process = subprocess.Popen(
            eval_command(server, out), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline, seen, still_since = time.monotonic() + 120, -1, time.monotonic()
        while time.monotonic() < deadline:  # wait until the process is stuck on the hanging calls
            if server.request_count != seen:
                seen, still_since = server.request_count, time.monotonic()
            elif seen > delivered and time.monotonic() - still_since > 1.0:
                break
            time.sleep(0.05)
        assert seen > delivered, f"the eval never went past {delivered} calls"
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        gate.set()
        assert server.settle()
        assert (server.answered, server.unread) == (delivered, 0)  # each delivered reply was read
        killed_ids = list(server.answered_ids)
    with RunStore(out, read_only=True) as store:  # as the kill left it: no record written yet
        assert store.query("SELECT count(*) AS n FROM question_records")[0]["n"] == 0

    with FakeLLMServer(extract_and_answer()) as healthy:
        resumed = subprocess.run(
            eval_command(healthy, out), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
        )
        assert resumed.returncode == 0, resumed.stderr
        assert healthy.settle()
        resumed_ids = list(healthy.answered_ids)
    assert query(out, "SELECT count(*) AS n FROM question_records")[0]["n"] == 60
    calls = query(out, "SELECT sum(calls) AS calls FROM usage")[0]["calls"]
    assert calls == server.answered + healthy.answered == delivered + len(resumed_ids)
    journaled = journaled_call_ids(out)  # call by call: the killed process's first, then the resumed one's
    assert sorted(journaled[:delivered]) == sorted(killed_ids) and sorted(journaled[delivered:]) == sorted(resumed_ids)
    setup = query(out, "SELECT sum(calls) AS calls FROM usage WHERE round = -1")[0]["calls"]
    assert setup >= delivered  # the killed run's extraction calls are the run's setup cost


def test_the_journal_is_folded_once_however_often_the_store_is_opened(tmp_path: Path) -> None:
    with RunStore(tmp_path) as store:
        with store.journal.phase(0, "dev"):
            store.journal.append("answer", Usage(calls=1, prompt_tokens=10, completion_tokens=2), "a")
            store.journal.append("answer", Usage(cache_hits=1))
        store.journal.append("extract", Usage(calls=1, prompt_tokens=100, completion_tokens=40), "b")
        assert store.fold_usage_journal() == 3
        assert store.fold_usage_journal() == 0
    with (tmp_path / JOURNAL_NAME).open("ab") as f:  # a line a kill cut short, then a resumed process
        f.write(b'{"round":0,"phase":"dev","role":"answer","calls":1,"prompt_to')
    with RunStore(tmp_path) as store:
        assert store.fold_usage_journal() == 0  # the torn line is never counted
        with store.journal.phase(0, "dev"):
            store.journal.append("answer", Usage(calls=1, prompt_tokens=7), "c")
    with RunStore(tmp_path) as again:  # folded when reopened, once
        rows = again.query("SELECT round, phase, role, calls, cache_hits, prompt_tokens FROM usage ORDER BY round")
    assert rows == [
        {"round": -1, "phase": "setup", "role": "extract", "calls": 1, "cache_hits": 0, "prompt_tokens": 100},
        {"round": 0, "phase": "dev", "role": "answer", "calls": 2, "cache_hits": 1, "prompt_tokens": 17},
    ]


def test_a_journal_left_without_its_store_is_not_folded_into_a_new_one(tmp_path: Path) -> None:
    (tmp_path / JOURNAL_NAME).write_text('{"round":0,"phase":"dev","role":"answer","calls":5}\n', encoding="utf-8")
    with RunStore(tmp_path) as store:
        assert store.query("SELECT count(*) AS n FROM usage")[0]["n"] == 0
    assert not (tmp_path / JOURNAL_NAME).exists()


def test_the_fake_server_counts_a_completion_only_once_its_client_read_it() -> None:
    """The benchmark's and the kill test's yardstick: read and closed → delivered; closed with the
    reply unread (the kernel resets the connection) → unread; closed before the reply → neither."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    with FakeLLMServer(latency=0.05) as server:
        host, port = server.url.split("/")[2].split(":")
        path = "/" + server.url.split("/", 3)[3] + "/chat/completions"

        def ask(call_id: str) -> socket.socket:
            sock = socket.create_connection((host, int(port)))
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"X-Evolvemem-Call-Id: {call_id}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            return sock

        read = ask("read")
        time.sleep(0.3)
        assert b'"choices"' in read.recv(65536)
        read.close()
        unread = ask("unread")
        time.sleep(0.3)
        unread.close()
        gone = ask("gone")
        time.sleep(0.01)
        gone.close()
        assert server.settle()
        time.sleep(0.2)  # the third request's handler wakes from its latency and finds its client gone
        assert (server.request_count, server.answered, server.unread, server.answered_ids) == (3, 1, 1, ["read"])
