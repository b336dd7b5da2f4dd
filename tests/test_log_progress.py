"""Progress when stderr is not a terminal: plain lines every few seconds (cli/log_progress.py),
read from the pipe of a running `evolve` command, so a log or CI shows the run moving."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import pytest
from pathlib import Path

from evolvemem.cli.log_progress import INTERVAL_ENV, LogBars, duration_text
from tests.fake_llm_server import FakeLLMServer
from tests.test_llm_pipeline import MODEL

QUESTION_LINE = re.compile(r"^(?P<name>[^:]+): (?P<done>\d+)/(?P<total>\d+) questions(?P<rest>.*)$")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_are_throttled_per_bar_with_rate_eta_and_a_last_line() -> None:
    lines: list[str] = []
    clock = Clock()
    bars = LogBars(lines.append, interval=5.0, clock=clock)
    bars.questions("round 2 dev", 1, 120, calls=1)  # the first update of a bar: at once
    for done in range(2, 38):
        clock.now += 0.25
        bars.questions("round 2 dev", done, 120, calls=done + 4)
    assert lines == ["round 2 dev: 1/120 questions, 1 calls", "round 2 dev: 21/120 questions, 25 calls, 4 q/s, eta 25s"]
    clock.now += 60
    bars.questions("round 2 dev", 38, 120, failed=1, calls=42)
    assert lines[-1] == "round 2 dev: 38/120 questions, 42 calls, 1 failed, 0.54 q/s, eta 2m33s"
    bars.stage("extract", 1, 3)
    clock.now += 1
    bars.stage("extract", 3, 3)  # the last update of a bar: at once, whatever the interval
    assert lines[-2:] == ["extract: 1/3", "extract: 3/3, 2/s, done"]
    clock.now += 1
    bars.questions("round 2 dev", 39, 120, calls=43)  # throttled ...
    assert lines[-1].startswith("extract")
    bars.close()  # ... but its state is written when the command's progress ends
    assert lines[-1].startswith("round 2 dev: 39/120 questions, 43 calls")
    assert duration_text(3725) == "1h02m" and duration_text(92) == "1m32s" and duration_text(7) == "7s"


def stream(command: list[str], env: dict[str, str]) -> tuple[list[tuple[float, str]], float, int]:
    """Run `command` with stderr to a pipe; (arrival time, line) of every stderr line, the time the
    process ended, and its exit code."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.monotonic(), line.rstrip("\n")))

    reader = threading.Thread(target=read)
    reader.start()
    code = proc.wait(timeout=600)
    ended = time.monotonic()
    reader.join()
    return lines, ended, code


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "evolvemem.cli.main", *args]


def environment(interval: str) -> dict[str, str]:
    env = {**os.environ, INTERVAL_ENV: interval, "OPENAI_API_KEY": "sk-test-key", "EVOLVEMEM_NO_LLM_CACHE": "1"}
    env.pop("FORCE_COLOR", None)
    env.pop("FORCE_TERMINAL", None)
    return env


def question_lines(lines: list[tuple[float, str]], name: str) -> list[tuple[float, int, int, str]]:
    found = []
    for at, line in lines:
        match = QUESTION_LINE.match(line)
        if match and match["name"] == name:
            found.append((at, int(match["done"]), int(match["total"]), match["rest"]))
    return found


@pytest.mark.slow
def test_an_llm_eval_logs_questions_calls_and_rate_while_it_runs(tmp_path: Path) -> None:
    with FakeLLMServer(latency=0.1) as server:
        lines, ended, code = stream(
            cli(
                "eval",
                "--benchmark",
                "synth",
                "--model",
                MODEL,
                "--api-base",
                server.url,
                "--extract-model",
                "offline",
                "--concurrency",
                "2",
                "--out",
                str(tmp_path / "ev"),
            ),
            environment("0.5"),
        )
    text = "\n".join(line for _, line in lines)
    assert code == 0, text
    assert "\x1b[" not in text  # plain lines, no terminal codes
    answer = question_lines(lines, "answer")
    assert len(answer) >= 4, text
    done = [d for _, d, _, _ in answer]
    assert done == sorted(done) and done[-1] == answer[-1][2] == 60 and done[0] < 60
    # lines arrive while the command runs, not all at its end
    assert sum(at < ended - 1.0 for at, _, _, _ in answer) >= 3
    middle = answer[len(answer) // 2][3]
    assert re.search(r", \d+ calls, [\d.]+ q/s, eta \d+", middle), middle
    assert answer[-1][3].endswith(", done")


def test_an_offline_run_logs_every_phase_with_its_rate(tmp_path: Path) -> None:
    lines, ended, code = stream(
        cli("run", "--benchmark", "synth", "--rounds", "1", "--out", str(tmp_path / "run")), environment("0")
    )
    text = "\n".join(line for _, line in lines)
    assert code == 0, text
    assert "\x1b[" not in text
    for phase in ("round 0 dev", "round 1 dev"):
        found = question_lines(lines, phase)
        assert found and found[-1][1] == found[-1][2] and found[-1][3].endswith(", done"), (phase, text)
        assert "calls" not in found[-1][3] and any("q/s" in rest for _, _, _, rest in found)
        assert found[0][0] < ended  # written as it happened
    assert re.search(r"^(extract|index): \d+/\d+", text, re.MULTILINE), text
