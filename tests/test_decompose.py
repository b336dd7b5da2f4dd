"""Query decomposition: the offline rules, and the LLM decomposer against a real HTTP server."""

from __future__ import annotations

import json

import pytest

from evolvemem.llm.client import LLMClient
from evolvemem.prompts import load_prompt
from evolvemem.retrieval.decompose import LLMDecomposer, RuleDecomposer, parse_sub_queries
from evolvemem.contracts.usage import Usage
from tests.fake_llm_server import FakeLLMServer, last_user_message, wants_json

MODEL = "openai/fake-model"


@pytest.mark.parametrize(
    "question, expected",
    [
        ("In which city does Priya's sister's husband work?", ["Priya's sister", "sister's husband"]),
        ("What did Priya cook and where did Tomasz travel?", ["What did Priya cook", "where did Tomasz travel"]),
        (
            "When did Tomasz move to Lisbon, and why did he leave Porto?",
            ["When did Tomasz move to Lisbon", "why did he leave Porto"],
        ),
        ("Is Priya taller than Tomasz?", ["Is Priya taller", "Is Tomasz taller"]),
        (
            "Which did Priya visit first, Lisbon or Porto?",
            ["Which did Priya visit first Lisbon", "Which did Priya visit first Porto"],
        ),
        (
            "Which instruments do both Tomasz and Priya play?",
            ["Which instruments do Tomasz play", "Which instruments do Priya play"],
        ),
        ("What did Tomasz and Priya buy in Lisbon?", ["What did Tomasz buy in Lisbon", "What did Priya buy in Lisbon"]),
        (
            "What are Priya's hobbies, pets and favourite foods?",
            ["What are Priya's hobbies", "What are Priya's pets", "What are Priya's favourite foods"],
        ),
    ],
)
def test_rule_decomposer_splits(question, expected):
    parts, cost = RuleDecomposer().decompose(question, 5)
    assert parts == expected
    assert cost == Usage()


@pytest.mark.parametrize(
    "question",
    [
        "What is the name of Tomasz's dog?",
        "When did Priya adopt a cat?",
        "Who did Priya go hiking with and where?",  # a bare "where" is not a sub-query of its own
    ],
)
def test_rule_decomposer_keeps_single_fact_questions(question):
    assert RuleDecomposer().decompose(question, 3) == ([question], Usage())


def test_rule_decomposer_respects_max_sub_queries():
    parts, _ = RuleDecomposer().decompose("What are Priya's hobbies, pets, plants and favourite foods?", 2)
    assert parts == ["What are Priya's hobbies", "What are Priya's pets"]


def test_parse_sub_queries_accepts_object_or_list():
    assert parse_sub_queries({"sub_queries": ["a", " b ", ""]}) == ["a", "b"]
    assert parse_sub_queries(["x", 3]) == ["x", "3"]
    with pytest.raises(ValueError):
        parse_sub_queries({"answer": "no list"})


def test_prompt_has_placeholders_and_no_dangling_dollars():
    prompt = load_prompt("decompose")
    text = prompt.render(question="Where does Tomasz's cousin live?", max_sub_queries=3)
    assert "Where does Tomasz's cousin live?" in text and "at most 3 sub-queries" in text
    assert "$" not in text


def _client(server: FakeLLMServer, **options) -> LLMClient:
    return LLMClient(MODEL, api_base=server.url, cache=None, backoff_base=0.01, backoff_max=0.05, **options)


def test_llm_decomposer_parses_json_and_reports_cost(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")

    def responder(body):
        assert wants_json(body)
        asked = last_user_message(body)
        assert "Question: Which cities did Priya and Tomasz both visit?" in asked
        return json.dumps(
            {
                "sub_queries": [
                    "Which cities did Priya visit",
                    "Which cities did Tomasz visit",
                    "Which cities did they visit together",
                ]
            }
        )

    with FakeLLMServer(responder=responder) as server:
        decomposer = LLMDecomposer(_client(server))
        parts, cost = decomposer.decompose("Which cities did Priya and Tomasz both visit?", 2)
    assert parts == ["Which cities did Priya visit", "Which cities did Tomasz visit"]  # capped at 2
    assert cost.calls == 1 and cost.prompt_tokens > 50 and cost.completion_tokens > 5
    assert decomposer.failures == [] and decomposer.name == f"llm:{MODEL}"


def test_llm_decomposer_falls_back_on_http_failure(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeLLMServer() as server:
        server.fail_next(500, count=5)
        decomposer = LLMDecomposer(_client(server, max_retries=1))
        parts, cost = decomposer.decompose("Where did Priya go?", 3)
        assert server.request_count == 2  # one try and one retry, then give up
    assert parts == ["Where did Priya go?"] and cost.calls == 0
    assert len(decomposer.failures) == 1 and "500" in decomposer.failures[0]


def test_llm_decomposer_falls_back_on_non_json(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeLLMServer(responder=lambda body: "Sorry, I cannot split this.") as server:
        decomposer = LLMDecomposer(_client(server))
        parts, cost = decomposer.decompose("Where did Priya go?", 3)
    assert parts == ["Where did Priya go?"]
    assert cost.calls == 2  # the reply and the re-ask were both paid for
    assert len(decomposer.failures) == 1


def test_llm_decomposer_falls_back_on_json_without_a_list(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeLLMServer(responder=lambda body: json.dumps({"note": "single fact"})) as server:
        decomposer = LLMDecomposer(_client(server))
        parts, cost = decomposer.decompose("Where did Priya go?", 3)
    assert parts == ["Where did Priya go?"] and cost.calls == 1
    assert "unusable reply" in decomposer.failures[0]
