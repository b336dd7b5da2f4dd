"""Ctrl-C against a model that hangs: the command leaves within seconds (not after the calls in
flight time out), says the work is saved, and the same eval resumes to a complete round."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import pytest
from pathlib import Path

from tests.fake_llm_server import FakeLLMServer
from tests.test_llm_pipeline import MODEL, llm_eval, make_responder, query

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_ctrl_c_leaves_within_seconds_while_calls_hang_and_the_round_resumes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("EVOLVEMEM_NO_LLM_CACHE", "1")
    out = tmp_path / "ev"
    with FakeLLMServer(make_responder(), hang_seconds=120) as server:
        server.fail_next(0, count=10_000)  # every call hangs (the client would wait 60 s per try)
        env = {**os.environ, "OPENAI_API_KEY": "sk-test", "EVOLVEMEM_NO_LLM_CACHE": "1", "HF_HUB_OFFLINE": "1"}
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
                "--concurrency",
                "4",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # a user's shell delivers Ctrl-C; a test run launched in the background inherits SIGINT ignored
            # (POSIX shells do that to background jobs) and Python would then never raise KeyboardInterrupt
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 120
        while server.request_count < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server.request_count >= 4, "the eval never reached the server"
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        took = time.monotonic() - interrupted
        assert process.returncode == 130 and "finished work is saved" in err
        assert took < 10, f"Ctrl-C took {took:.1f} s"
    with FakeLLMServer(make_responder()) as healthy:
        resumed = llm_eval(healthy, out, "--no-cache")
        assert resumed.exit_code == 0, resumed.output
    rows = query(out, "SELECT count(*) AS n, count(*) FILTER (WHERE failed) AS failed FROM question_records")[0]
    assert rows == {"n": 60, "failed": 0}
