"""`evolve label` with a real model: Qwen2.5-Coder-0.5B-Instruct (llama-cpp-python, 4,096-token
window) labels one short invented conversation. A model this small writes bad questions, copies
ids and contradicts itself; what must hold is that only questions whose every check passed are
kept, that the counts add up, and that the file loads. Skips like tests/test_real_llm.py on a user's
machine without the model; fails under CI=true."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.local_llm_server import LocalModelUnavailable, LocalServer, serve
from evolvemem.cli.main import app
from evolvemem.data.custom import load_custom
from evolvemem.scoring.metrics import is_abstention, token_f1
from tests.conftest import skip_or_fail

pytestmark = pytest.mark.real_llm

WINDOW = 4096
CONVERSATION = Path(__file__).resolve().parent / "fixtures" / "label_conversation.json"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    try:
        with serve("0.5b", n_ctx=WINDOW) as running:
            yield running
    except LocalModelUnavailable as exc:
        skip_or_fail(
            f"the real local model is not available: {exc} (python benchmarks/local_llm_server.py fetch 0.5b "
            "fetches it; EVOLVEMEM_SKIP_REAL_LLM=1 skips these tests)"
        )


def test_a_real_model_labels_a_short_conversation(
    server: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-no-key")
    monkeypatch.setenv("EVOLVEMEM_NO_LLM_CACHE", "1")
    monkeypatch.setenv("EVOLVEMEM_LLM_TIMEOUT", "600")
    out = tmp_path / "dev.json"
    result = CliRunner().invoke(
        app,
        [
            "label",
            "--data",
            str(CONVERSATION),
            "--model",
            server.model,
            "--api-base",
            server.api_base,
            "--context-window",
            str(WINDOW),
            "--types",
            "single-hop,temporal,unanswerable",
            "--per-session",
            "3",
            "--out",
            str(out),
            "--json",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["candidates"] == 6  # two sessions, three kinds each
    assert summary["kept_total"] + sum(summary["rejected"].values()) == summary["candidates"]
    assert summary["spent"]["calls"] >= 6 and summary["spent"]["prompt_tokens"] > 0
    questions = json.loads(out.read_text(encoding="utf-8"))["questions"]
    assert len(questions) == summary["kept_total"]
    for question in questions:
        checks = question["provenance"]["checks"]
        assert all(c["verdict"] == "pass" for c in checks), checks
        names = [c["check"] for c in checks]
        if question["category"] == "unanswerable":
            assert names[-1] == "unanswerable_in_best_context" and is_abstention(checks[-1]["answer"], lenient=True)
        else:
            assert names[-2:] == ["answerable_from_evidence", "not_answerable_without_evidence"]
            assert token_f1(checks[-2]["answer"], question["answer"]) >= 0.5
    if questions:
        assert len(load_custom(out).questions) == len(questions)
