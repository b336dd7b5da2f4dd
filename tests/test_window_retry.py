"""A server that does not publish its context window (llama-cpp-python's own server) names it when
it rejects a prompt: the call that hit the rejection is fitted to that window and sent once more,
in the same round (llm/budget.py `ask_fitted`), and both requests are billed. Against the fake
server speaking llama-cpp-python's error (tests/fake_llm_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolvemem.llm.budget import ask_fitted, fit_prompt
from evolvemem.llm.client import LLMClient, PromptTooLong
from evolvemem.llm.context_window import estimate_tokens
from tests.fake_llm_server import LLAMA_CPP_PYTHON_WINDOW_ERROR, FakeLLMServer
from tests.test_small_models import (  # noqa: F401 - new_cache and seed_cache are fixtures
    MODEL,
    decisions,
    is_free_diagnosis,
    new_cache,
    query,
    responder,
    run,
    seed_cache,
)

WINDOW = 4200  # the synth run's full diagnosis prompt fills it (it grows with the action space); its shortest variant fits with a cut reply budget
PROPOSAL = json.dumps({"analysis": "Misses dominate.", "changes": {"semantic_top_k": 10}, "rationale": "more"})


def hidden_window_server(window: int = WINDOW, reply: str | None = PROPOSAL) -> FakeLLMServer:
    """llama-cpp-python's server started with n_ctx=`window`; replies: a diagnosis proposing
    `reply` (None: the echo of the prompt)."""
    return FakeLLMServer(responder(reply) if reply else None, context_window=window, window_errors="llama-cpp-python")


def rejection(window: int) -> str:
    return LLAMA_CPP_PYTHON_WINDOW_ERROR.format(window=window, total=window + 900, prompt=window + 500, completion=400)


def text(chars: int) -> str:
    """A prompt of `chars` characters, `chars // 5` words (the fake server's prompt tokens)."""
    return ("abcd " * (chars // 5 + 1))[:chars]


def fits(body: dict, window: int) -> bool:
    return estimate_tokens(body["messages"]) + int(body["max_tokens"]) <= window


def test_the_fake_server_rejects_like_llama_cpp_python_and_hides_its_window() -> None:
    with hidden_window_server(window=300, reply=None) as server:
        client = LLMClient(MODEL, api_base=server.url, cache=None)
        assert client.context_window() is None  # neither /models nor /props names it
        with pytest.raises(PromptTooLong) as info:
            client.complete([{"role": "user", "content": text(4000)}], role="answer", max_tokens=50)
        # served when only the reply would overflow: llama-cpp-python cuts the reply budget instead
        unsized = LLMClient(MODEL, api_base=server.url, cache=None)
        unsized.complete([{"role": "user", "content": text(500)}], role="answer", max_tokens=290)
    assert info.value.sent and info.value.window == 300 and info.value.status_code == 400
    assert len(server.oversized) == 1 and server.request_count == 2
    rejected = client.usage.snapshot()["answer"]
    assert (
        (rejected.calls, rejected.failures, rejected.prompt_tokens)
        == (1, 1, 0)
        == (info.value.cost.calls, info.value.cost.failures, info.value.cost.prompt_tokens)
    )


def test_a_rejected_call_is_refitted_to_the_named_window_and_sent_once_more() -> None:
    variants = [("", text(4000)), ("the older half", text(1200)), ("almost everything", text(100))]
    with hidden_window_server(window=600, reply=None) as server:
        client = LLMClient(MODEL, api_base=server.url, cache=None)
        fitted, reply_text, reply = ask_fitted(client, lambda: fit_prompt(client, variants, 120), role="answer")
    assert server.request_count == 2 and len(server.oversized) == 1
    assert (
        fitted.trimmed == ("the older half",) and reply_text == "echo: " + text(1200) and fits(server.requests[1], 600)
    )
    cost = reply.as_cost()
    assert (cost.calls, cost.failures) == (2, 1) and cost.prompt_tokens == 240  # the rejection has no tokens
    assert client.usage.snapshot()["answer"] == cost  # the ledger and the reply agree
    assert client.context_window() == 600


def test_a_second_rejection_or_nothing_shorter_to_send_raises_with_both_billed() -> None:
    variants = [("", text(4000)), ("the older half", text(1200))]
    with FakeLLMServer() as server:  # accepts anything: the scripted errors are the rejections
        server.fail_next(400, count=2, body=rejection(600))
        client = LLMClient(MODEL, api_base=server.url, cache=None)
        with pytest.raises(PromptTooLong) as twice:
            ask_fitted(client, lambda: fit_prompt(client, variants, 120), role="diagnose", json_reply=True)
    assert server.request_count == 2 and twice.value.sent and twice.value.cost.calls == 2
    with hidden_window_server(window=300, reply=None) as server:
        client = LLMClient(MODEL, api_base=server.url, cache=None)
        with pytest.raises(PromptTooLong) as unfit:
            ask_fitted(client, lambda: fit_prompt(client, variants, 120), role="answer")
    assert server.request_count == 1 and "does not fit the context window of 300" in str(unfit.value)
    assert (unfit.value.cost.calls, unfit.value.cost.failures) == (1, 1)


def test_the_first_diagnosis_against_a_hidden_window_is_retried_resized_in_the_same_round(tmp_path: Path) -> None:
    with hidden_window_server() as server:
        # round 1 (no gain on saturated synth) is built on, so round 1 is diagnosed anew
        run(server, tmp_path / "run", "--no-parsimony", rounds="2")
        diagnoses = [b for b in server.requests if is_free_diagnosis(b)]
        # one rejection (round 0's full prompt); its retry and every later prompt are sized
        assert len(server.oversized) == 1 and server.oversized[0] is diagnoses[0]
        assert all(fits(b, WINDOW) for b in diagnoses[1:]) and len(diagnoses) == 3
    rows = query(
        tmp_path / "run", "SELECT round, parse_error, prompt_trimmed, calls, prompt FROM diagnoses ORDER BY round"
    )
    first = rows[0]
    assert first["parse_error"] is None and first["calls"] == 2 and first["prompt_trimmed"]
    assert first["prompt"] == diagnoses[1]["messages"][0]["content"]  # the record shows the prompt that was answered
    assert rows[1]["calls"] == 1
    assert [d["fallback"] for d in decisions(tmp_path / "run")[:2]] == [None, None]
    usage = query(tmp_path / "run", "SELECT calls, failures FROM usage WHERE role = 'diagnose' AND round = 0")
    assert usage == [{"calls": 2, "failures": 1}]


def test_a_diagnosis_rejected_again_after_the_retry_falls_back_to_the_rubric(tmp_path: Path) -> None:
    with FakeLLMServer(responder(PROPOSAL)) as server:
        server.fail_next(400, count=2, body=rejection(WINDOW))
        run(server, tmp_path / "run")
        assert server.request_count == 2 and fits(server.requests[1], WINDOW)
    first = query(tmp_path / "run", "SELECT parse_error, calls FROM diagnoses")[0]
    assert f"context window is {WINDOW}" in first["parse_error"] and first["calls"] == 2
    fallback = decisions(tmp_path / "run")[0]["fallback"]
    assert "rubric fallback" in fallback and f"context window is {WINDOW}" in fallback
