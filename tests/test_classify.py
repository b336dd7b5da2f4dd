"""Question types for questions that come without one: rules at load time, optionally an LLM."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from evolvemem.cli.main import app
from evolvemem.data.custom import load_custom
from evolvemem.llm.cache import ResponseCache
from evolvemem.llm.client import LLMClient
from evolvemem.qtypes import classify_question
from evolvemem.roles.classify import LLMQuestionClassifier, reclassify
from tests.fake_llm_server import FakeLLMServer

DOMAIN = {
    "name": "tiny",
    "conversations": [
        {
            "id": "c1",
            "sessions": [
                {
                    "id": "s1",
                    "date": "2024-03-05T10:00",
                    "turns": [
                        {"id": "t1", "speaker": "Priya", "text": "I adopted a beagle called Pip last spring."},
                        {"id": "t2", "speaker": "Tomasz", "text": "I moved from Porto to Lisbon in May."},
                    ],
                }
            ],
        }
    ],
    "questions": [
        {"id": "q1", "conversation_id": "c1", "question": "What dog does Priya have?", "answer": "a beagle"},
        {"id": "q2", "conversation_id": "c1", "question": "When did Tomasz move to Lisbon?", "answer": "May 2024"},
        {
            "id": "q3",
            "conversation_id": "c1",
            "question": "Which city is Tomasz based in?",
            "answer": "Lisbon",
            "question_type": "knowledge_update",
        },
    ],
}


def test_rules_type_questions_and_mark_the_source(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(DOMAIN))
    ds = load_custom(path)
    assert [q.type_source for q in ds.questions] == ["rules", "rules", "benchmark"]
    assert ds.questions[1].question_type == "temporal" == classify_question(DOMAIN["questions"][1]["question"])
    assert classify_question("How many times did Ana go climbing?") == "counting"


def test_llm_retypes_only_rule_typed_questions_and_survives_garbage(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    path = tmp_path / "d.json"
    path.write_text(json.dumps(DOMAIN))
    ds = load_custom(path)
    replies = {"What dog": '{"question_type": "preference"}', "When did": "no idea, sorry"}

    def responder(body):
        text = " ".join(m["content"] for m in body["messages"])  # the re-ask carries the question too
        return next((v for k, v in replies.items() if k in text), '{"question_type": "single_fact"}')

    with FakeLLMServer(responder=responder) as srv:
        client = LLMClient(
            "openai/fake-model", api_base=srv.url, cache=ResponseCache(tmp_path / "c"), backoff_base=0.01, max_retries=1
        )
        out, changed, cost = reclassify(ds, LLMQuestionClassifier(client))
        asked = [r["messages"][-1]["content"] for r in srv.requests]
    types = {q.question_id: (q.question_type, q.type_source) for q in out.questions}
    assert types["q1"] == ("preference", "llm")
    assert types["q2"] == ("temporal", "rules")  # garbage, and garbage again on the re-ask: the rule's type stays
    assert types["q3"] == ("knowledge_update", "benchmark")  # a given label is never re-typed
    assert changed == 1 and not any("Which city is Tomasz based in" in a for a in asked)


def test_cli_classify_model_flag(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("EVOLVEMEM_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "d.json"
    path.write_text(json.dumps(DOMAIN))
    with FakeLLMServer(responder=lambda body: '{"question_type": "counting"}') as srv:
        result = CliRunner().invoke(
            app,
            [
                "eval",
                "--benchmark",
                "custom",
                "--data",
                str(path),
                "--classify-model",
                "openai/fake-model",
                "--api-base",
                srv.url,
                "--out",
                str(tmp_path / "o"),
                "--json",
                "--quiet",
            ],
            catch_exceptions=False,
        )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(payload["by_category"]) == {"counting", "knowledge_update"}
