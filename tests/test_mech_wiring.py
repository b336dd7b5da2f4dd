"""The mechanisms' LLM variants are reached through the real pipeline: `evolve eval` with an
answer model (a fake OpenAI-compatible server on 127.0.0.1) and a config that switches every
question-time mechanism on. Each mechanism's own tests check its behaviour; this one checks
that the workspace hands the model to them and that their calls are billed on the records."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app
from evolvemem.prompts import load_prompt
from tests.fake_llm_server import FakeLLMServer, message_text, wants_json

MECHANISM_PROMPTS = ("cue_traverse", "route", "answer_judge", "sufficiency", "episode", "foresight")
CONFIG = """
cue_graph_top_k = 10
cue_graph_mode = "llm"
cue_graph_steps = 2
memory_granularity = "routed"
judge_retries = 1
scene_top_k = 10
scene_llm = true
scene_sufficiency_rounds = 1
foresight_top_k = 5
foresight_llm = true
"""


def prompt_of(body: dict) -> str | None:
    """Which mechanism prompt a request carries (by the prompt's first line)."""
    text = " ".join(message_text(m) for m in body.get("messages", []))
    for name in MECHANISM_PROMPTS:
        if load_prompt(name).text.splitlines()[0] in text:
            return name
    return None


@pytest.mark.slow
def test_question_time_mechanisms_use_the_answer_model_and_bill_their_calls(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-wiring")
    monkeypatch.setenv("EVOLVEMEM_NO_LLM_CACHE", "1")  # embeddings come from the shared test cache; replies never
    monkeypatch.setenv("EVOLVEMEM_LLM_BACKOFF_BASE", "0.01")
    seen: list[str | None] = []

    def respond(body: dict) -> str:
        seen.append(prompt_of(body))
        return "{}" if wants_json(body) else "a plain answer"  # "{}" is unusable: every mechanism falls back

    config = tmp_path / "all-on.toml"
    config.write_text(CONFIG, encoding="utf-8")
    out = tmp_path / "run"
    with FakeLLMServer(respond) as server:
        result = CliRunner().invoke(
            app,
            [
                "eval",
                "--benchmark",
                "synth",
                "--model",
                "openai/fake-model",
                "--extract-model",
                "offline",
                "--api-base",
                server.url,
                "--config",
                str(config),
                "--out",
                str(out),
                "--quiet",
                "--json",
            ],
        )
    assert result.exit_code == 0, result.output
    reached = {name for name in seen if name}
    assert reached == set(MECHANISM_PROMPTS)
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    calls, n, routed = con.execute(
        "SELECT sum(calls), count(*), count(*) FILTER (WHERE route = 'rules-fallback') FROM question_records"
    ).fetchone()
    con.close()
    assert n > 0 and routed == n  # the router asked the model and fell back on its unusable reply
    # every question paid at least its answer, the router, the judge and one cue-graph step
    assert calls >= 4 * n
    assert json.loads(result.stdout.strip().splitlines()[-1])["overall"]
