"""The README's test command on a user's machine: without the development LoCoMo file or
llama-cpp-python, a test that needs them skips with a reason naming what is missing and how to get
it; under CI=true the same test fails. Each case runs one real test of the suite in a child pytest
with the environment a user (or CI) would have."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cut_locomo import DEV8, DEV8_SHA256, cut, main as cut_main

REPO = Path(__file__).resolve().parents[1]
DATA_TEST = "tests/test_benchmarks.py::test_locomo_dev_file_loads_completely"
REAL_MODEL_TEST = "tests/test_real_llm.py::test_llm_extraction_of_a_short_conversation"


def child_pytest(test: str, tmp_path: Path, *, ci: bool, extra_env: dict[str, str] | None = None) -> tuple[str, str]:
    """Run one test in a child pytest; its outcome word (passed / skipped / failed / error) and output."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "EVOLVEMEM_SKIP_REAL_LLM", "PYTEST_ADDOPTS")}
    env.update({"EVOLVEMEM_DEV_DATA": str(tmp_path / "nowhere" / "locomo10_dev8.json"), **(extra_env or {})})
    if ci:
        env["CI"] = "true"
    report = tmp_path / "report.json"
    plugin = tmp_path / "outcome_plugin.py"
    plugin.write_text(
        "import json\n"
        "def pytest_runtest_logreport(report):\n"
        "    if report.when == 'call' or report.outcome != 'passed':\n"
        f"        open({str(report)!r}, 'w').write(json.dumps([report.when, report.outcome, str(report.longrepr)]))\n",
        encoding="utf-8",
    )
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            test,
            "-n",
            "0",
            "-p",
            "outcome_plugin",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rs",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    when, outcome, text = json.loads(report.read_text(encoding="utf-8"))
    word = "error" if outcome == "failed" and when != "call" else outcome
    return word, text + proc.stdout


def test_without_the_dev_data_a_test_skips_and_names_the_file_and_how_to_make_it(tmp_path):
    outcome, text = child_pytest(DATA_TEST, tmp_path, ci=False)
    assert outcome == "skipped", text
    assert "locomo10_dev8.json" in text and "benchmarks/cut_locomo.py" in text


def test_without_the_dev_data_ci_fails(tmp_path):
    outcome, text = child_pytest(DATA_TEST, tmp_path, ci=True)
    assert outcome in ("failed", "error"), text
    assert "CI=true" in text


def _no_llama_cpp(tmp_path: Path) -> dict[str, str]:
    """A package named llama_cpp that cannot be imported, first on the path: a machine without it."""
    blocker = tmp_path / "blocked" / "llama_cpp"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('llama_cpp is not installed here')\n", encoding="utf-8")
    return {"PYTHONPATH": str(blocker.parent)}


def test_without_llama_cpp_the_real_model_tests_skip_and_say_how_to_install_it(tmp_path):
    env = _no_llama_cpp(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], os.environ.get("PYTHONPATH", "")])
    outcome, text = child_pytest(REAL_MODEL_TEST, tmp_path, ci=False, extra_env=env)
    assert outcome == "skipped", text
    assert "llama-cpp-python" in text and "[local-llm]" in text and "cmake" in text


def test_without_llama_cpp_ci_fails_the_real_model_tests(tmp_path):
    env = _no_llama_cpp(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], os.environ.get("PYTHONPATH", "")])
    outcome, text = child_pytest(REAL_MODEL_TEST, tmp_path, ci=True, extra_env=env)
    assert outcome in ("failed", "error"), text
    assert "llama-cpp-python" in text


# --------------------------------------------------------------- the development file from locomo10.json


def test_cut_keeps_the_named_samples_in_file_order_and_refuses_unknown_ids():
    samples = [{"sample_id": f"conv-{i}", "qa": []} for i in (3, 1, 2)]
    assert [s["sample_id"] for s in cut(samples, ["conv-2", "conv-3"])] == ["conv-3", "conv-2"]
    with pytest.raises(ValueError, match="conv-9"):
        cut(samples, ["conv-9"])


def test_cut_writes_the_file_and_reports_it(tmp_path, capsys):
    out = tmp_path / "cut.json"
    assert cut_main([str(REPO / "tests/fixtures/locomo_tiny.json"), "--keep", "tiny-1", "--out", str(out)]) == 0
    assert [s["sample_id"] for s in json.loads(out.read_text())] == ["tiny-1"]
    assert "1 conversations (tiny-1)" in capsys.readouterr().out
    assert cut_main([str(REPO / "tests/fixtures/locomo_tiny.json"), "--keep", "conv-26", "--out", str(out)]) == 2


def test_cutting_the_dev_conversations_reproduces_the_dev_file_byte_for_byte(locomo_path, tmp_path, capsys):
    """The development file is the eight samples written as json.dumps writes them: cutting them out of
    a file that holds them (here: itself) gives the same bytes, the sha256 the README names."""
    out = tmp_path / "dev8.json"
    assert cut_main([str(locomo_path), "--out", str(out)]) == 0
    assert out.read_bytes() == locomo_path.read_bytes()
    assert tuple(s["sample_id"] for s in json.loads(out.read_text())) == DEV8
    printed = capsys.readouterr().out
    assert DEV8_SHA256 in printed and "development copy: identical" in printed
