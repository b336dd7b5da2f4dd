"""The LLM layer end to end: real litellm → openai SDK → httpx against the fake server on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evolvemem.llm import (
    LLMCallFailed,
    LLMClient,
    LLMJSONError,
    ResponseCache,
    UsageLedger,
    make_cache_key,
    parse_json_lenient,
    scrub_secrets,
)
from evolvemem.llm.client import JSON_FOLLOW_UP
from evolvemem.contracts.usage import Usage
from tests.fake_llm_server import FakeLLMServer, fake_llm, last_user_message  # noqa: F401 - fixture

MODEL = "openai/fake-model"


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.fixture
def make_client(fake_llm: FakeLLMServer, tmp_path: Path):  # noqa: F811 - fixture argument
    def build(**overrides) -> LLMClient:
        options = dict(
            api_base=fake_llm.url,
            cache=ResponseCache(tmp_path / "llm"),
            backoff_base=0.01,
            backoff_max=0.5,
            timeout=5.0,
        )
        options.update(overrides)
        return LLMClient(MODEL, **options)

    return build


# ----------------------------------------------------------------------------- plain calls and cache
def test_plain_completion_counts_tokens(fake_llm, make_client):  # noqa: F811
    client = make_client()
    reply = client.complete(
        [{"role": "system", "content": "be brief"}, *user("where does Tomasz live")], role="answer", max_tokens=64
    )
    assert reply.text == "echo: where does Tomasz live"
    assert not reply.cached
    assert (reply.prompt_tokens, reply.completion_tokens) == (6, 5)  # whitespace tokens of the fake server
    assert reply.as_cost() == Usage(calls=1, prompt_tokens=6, completion_tokens=5)
    body = fake_llm.requests[0]
    assert body["model"] == "fake-model" and body["max_tokens"] == 64 and body["temperature"] == 0.0
    assert "response_format" not in body
    assert fake_llm.headers[0]["authorization"] == "Bearer test-key"
    usage = client.usage.snapshot()["answer"]
    assert usage.calls == 1 and usage.prompt_tokens == 6 and usage.completion_tokens == 5
    assert usage.cache_hits == 0 and usage.failures == 0


def test_second_identical_call_is_a_cache_hit(fake_llm, make_client, tmp_path):  # noqa: F811
    client = make_client()
    first = client.complete(user("Priya Raman moved to Lisbon"), role="extract")
    second = client.complete(user("Priya Raman moved to Lisbon"), role="extract")
    assert fake_llm.request_count == 1
    assert second.cached and second.text == first.text
    assert (second.prompt_tokens, second.completion_tokens) == (first.prompt_tokens, first.completion_tokens)
    assert second.as_cost() == Usage(cache_hits=1)
    usage = client.usage.snapshot()["extract"]
    assert (usage.calls, usage.cache_hits, usage.prompt_tokens) == (1, 1, first.prompt_tokens)

    client.complete(user("Priya Raman moved to Porto"), role="extract")  # different messages: a miss
    client.complete(user("Priya Raman moved to Lisbon"), role="extract", max_tokens=99)  # different params
    assert fake_llm.request_count == 3

    # A fresh client on the same cache directory (another process, a later round) also hits.
    again = LLMClient(MODEL, api_base=fake_llm.url, cache=ResponseCache(tmp_path / "llm"))
    assert again.complete(user("Priya Raman moved to Lisbon"), role="extract").cached
    assert fake_llm.request_count == 3


def test_a_local_server_restarted_on_another_port_still_hits_the_cache(fake_llm, make_client, tmp_path):  # noqa: F811
    """A llama.cpp / Ollama server on this machine comes back on whatever port is free: the same
    model's replies are not asked again. A remote server's address stays part of the key."""
    first = make_client().complete(user("Priya Raman moved to Lisbon"), role="answer")
    with FakeLLMServer(prefix=fake_llm.prefix) as restarted:
        assert restarted.url != fake_llm.url
        again = LLMClient(
            MODEL, api_base=restarted.url.replace("127.0.0.1", "localhost"), cache=ResponseCache(tmp_path / "llm")
        )
        reply = again.complete(user("Priya Raman moved to Lisbon"), role="answer")
        assert reply.cached and reply.text == first.text and restarted.request_count == 0
        # another model name behind the new port is another model
        other = LLMClient("openai/other-model", api_base=restarted.url, cache=ResponseCache(tmp_path / "llm"))
        assert not other.complete(user("Priya Raman moved to Lisbon"), role="answer").cached
    params = {"model": MODEL, "messages": user("x")}
    assert make_cache_key({**params, "api_base": "http://10.0.0.5:8000/v1"}) != make_cache_key(
        {**params, "api_base": "http://10.0.0.5:8001/v1"}
    )


def test_cache_can_be_switched_off(fake_llm, make_client, monkeypatch, tmp_path):  # noqa: F811
    uncached = make_client(cache=None)
    uncached.complete(user("hello"), role="answer")
    uncached.complete(user("hello"), role="answer")
    assert fake_llm.request_count == 2

    monkeypatch.setenv("EVOLVEMEM_NO_LLM_CACHE", "1")
    env_off = make_client(cache=ResponseCache(tmp_path / "off"))
    env_off.complete(user("hello"), role="answer")
    env_off.complete(user("hello"), role="answer")
    assert fake_llm.request_count == 4
    assert not (tmp_path / "off").exists()


def test_json_mode_and_seed_reach_the_server(fake_llm, make_client):  # noqa: F811
    client = make_client(seed=7)
    value, reply = client.complete_json(user("list Tomasz's cities"), role="decompose")
    assert value == {"echo": "list Tomasz's cities"}
    body = fake_llm.requests[0]
    assert body["response_format"] == {"type": "json_object"} and body["seed"] == 7


def test_json_mode_can_be_turned_off_from_the_environment(fake_llm, make_client, monkeypatch):  # noqa: F811
    from evolvemem.roles.factory import client_options_from_env

    monkeypatch.setenv("EVOLVEMEM_LLM_JSON_MODE", "0")
    client = make_client(**client_options_from_env())
    with pytest.raises(LLMJSONError):  # the fake server answers JSON only when JSON mode asks for it
        client.complete_json(user("list Tomasz's cities"), role="decompose")
    assert fake_llm.requests and all("response_format" not in body for body in fake_llm.requests)


# ----------------------------------------------------------------------------- faults and retries
def test_429_with_retry_after_then_success(fake_llm, make_client):  # noqa: F811
    client = make_client(backoff_max=5.0)
    fake_llm.fail_next(429, retry_after=0.4)
    started = time.perf_counter()
    reply = client.complete(user("hi"), role="answer")
    elapsed = time.perf_counter() - started
    assert reply.text == "echo: hi"
    assert fake_llm.request_count == 2
    assert 0.4 <= elapsed < 3.0, elapsed  # waited for the server's Retry-After, not our tiny backoff
    assert client.usage.snapshot()["answer"].retries == 1


def test_retry_after_is_capped_by_backoff_max(fake_llm, make_client):  # noqa: F811
    client = make_client(backoff_max=0.2)
    fake_llm.fail_next(429, retry_after=30)
    started = time.perf_counter()
    client.complete(user("hi"), role="answer")
    assert time.perf_counter() - started < 3.0


def test_500_twice_then_success(fake_llm, make_client):  # noqa: F811
    client = make_client()
    fake_llm.fail_next(500, count=2)
    assert client.complete(user("again"), role="answer").text == "echo: again"
    assert fake_llm.request_count == 3
    assert client.usage.snapshot()["answer"].retries == 2


def test_timeout_then_success(fake_llm, make_client):  # noqa: F811
    fake_llm.hang_seconds = 3.0
    client = make_client(timeout=0.5)
    fake_llm.hang_next()
    started = time.perf_counter()
    assert client.complete(user("slow"), role="answer").text == "echo: slow"
    assert time.perf_counter() - started < 2.5
    assert fake_llm.request_count == 2


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_fail_at_once(fake_llm, make_client, status):  # noqa: F811
    client = make_client()
    fake_llm.fail_next(status, count=5)
    with pytest.raises(LLMCallFailed) as info:
        client.complete(user("hi"), role="answer")
    assert fake_llm.request_count == 1
    assert info.value.status_code == status and info.value.attempts == 1
    assert "\n" not in str(info.value) and f"HTTP {status}" in str(info.value)
    assert client.usage.snapshot()["answer"].failures == 1


def test_all_attempts_failing_raises_and_counts_a_failure(fake_llm, make_client):  # noqa: F811
    client = make_client(max_retries=2)
    fake_llm.fail_next(503, count=10)
    with pytest.raises(LLMCallFailed) as info:
        client.complete(user("hi"), role="verify")
    assert fake_llm.request_count == 3 and info.value.attempts == 3
    usage = client.usage.snapshot()["verify"]
    assert (usage.failures, usage.retries, usage.calls) == (1, 2, 0)


def test_unreachable_server_is_retried_then_fails(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = LLMClient(
        MODEL, api_base=f"http://127.0.0.1:{port}/v1", cache=None, max_retries=1, backoff_base=0.01, timeout=2.0
    )
    with pytest.raises(LLMCallFailed) as info:
        client.complete(user("anyone there"), role="answer")
    assert info.value.attempts == 2
    assert client.usage.snapshot()["answer"].retries == 1


def test_random_faults_are_absorbed_by_retries(fake_llm, make_client):  # noqa: F811
    client = make_client(cache=None, max_retries=8)
    fake_llm.set_fault_rate(0.35, kinds=("429", "500"), seed=3)
    replies = [client.complete(user(f"question {i}"), role="answer").text for i in range(20)]
    assert replies == [f"echo: question {i}" for i in range(20)]
    usage = client.usage.snapshot()["answer"]
    assert usage.calls == 20
    assert usage.retries == fake_llm.request_count - 20 > 0


def test_key_in_an_error_is_scrubbed(fake_llm, make_client, monkeypatch):  # noqa: F811
    monkeypatch.setenv("ACME_SERVICE_TOKEN", "tok-9f8e7d6c5b4a")
    client = make_client()
    fake_llm.fail_next(
        401, body="Incorrect API key provided: sk-proj-AbC123xyz789. Token tok-9f8e7d6c5b4a, key test-key"
    )
    with pytest.raises(LLMCallFailed) as info:
        client.complete(user("hi"), role="answer")
    message = str(info.value)
    assert "Incorrect API key provided" in message
    assert "AbC123xyz789" not in message and "tok-9f8e7d6c5b4a" not in message and "test-key" not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_scrub_secrets_patterns(monkeypatch):
    monkeypatch.setenv("SOME_API_KEY", "zz-secret-value-1")
    text = "sk-ant-api03-abcdef123 Authorization: Bearer abcdefgh12345678 api_key=qwertyuiop12 zz-secret-value-1"
    cleaned = scrub_secrets(text)
    for secret in ("abcdef123", "abcdefgh12345678", "qwertyuiop12", "zz-secret-value-1"):
        assert secret not in cleaned
    assert scrub_secrets("plain message about Lisbon") == "plain message about Lisbon"


# ----------------------------------------------------------------------------- JSON replies
def test_malformed_json_is_repaired_without_a_new_call(fake_llm, make_client):  # noqa: F811
    fake_llm.responder = lambda body: "Here you go:\n```json\n{'cities': ['Lisbon', 'Porto',], 'moved': True,}\n```"
    value, reply = make_client().complete_json(user("cities?"), role="extract")
    assert value == {"cities": ["Lisbon", "Porto"], "moved": True}
    assert fake_llm.request_count == 1 and reply.as_cost().calls == 1


def test_unparseable_json_is_asked_again_once(fake_llm, make_client):  # noqa: F811
    def responder(body: dict) -> str:
        return '{"verdict": "correct"}' if last_user_message(body) == JSON_FOLLOW_UP else "I think it is right."

    fake_llm.responder = responder
    client = make_client()
    value, reply = client.complete_json(user("judge this"), role="judge")
    assert value == {"verdict": "correct"}
    assert fake_llm.request_count == 2
    follow_up = fake_llm.requests[1]["messages"]
    assert follow_up[-2] == {"role": "assistant", "content": "I think it is right."}
    assert reply.as_cost().calls == 2  # the wasted first reply is still paid for
    assert client.usage.snapshot()["judge"].calls == 2


def test_json_still_bad_after_reask_raises_with_raw_text(fake_llm, make_client):  # noqa: F811
    fake_llm.set_fault_rate(1.0, kinds=("malformed",))
    client = make_client()
    with pytest.raises(LLMJSONError) as info:
        client.complete_json(user("judge this"), role="judge")
    assert fake_llm.request_count == 2  # one re-ask, no more
    assert "not valid json" in info.value.raw_text
    assert isinstance(info.value, LLMCallFailed) and info.value.reply.as_cost().calls == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
        ("```\n[1, 2, 3]\n```", [1, 2, 3]),
        (
            'Sure! The answer is {"name": "Priya Raman", "city": "Lisbon"} as requested.',
            {"name": "Priya Raman", "city": "Lisbon"},
        ),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        ("{'name': 'Tomasz', 'note': 'said \"hi\"'}", {"name": "Tomasz", "note": 'said "hi"'}),
        ("{'ok': True, 'missing': None, 'bad': False}", {"ok": True, "missing": None, "bad": False}),
        ('{"queries": ["when did Tomasz move", "where to', {"queries": ["when did Tomasz move", "where to"]}),
        ('{"a": {"b": [1, 2', {"a": {"b": [1, 2]}}),
        ('{"a": 1, "b":', {"a": 1, "b": None}),
        ('{"a": 1, "b": tr', {"a": 1}),
        ('{verdict: "wrong"}', {"verdict": "wrong"}),
        ('{"text": "line one\nline two"}', {"text": "line one\nline two"}),
        ('{"city": "Lisbon"} and then {"city": "Porto"}', {"city": "Lisbon"}),
        ('"just a string"', "just a string"),
        ("42", 42),
    ],
)
def test_parse_json_lenient_repairs(text, expected):
    assert parse_json_lenient(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "no json here at all", "The verdict: correct.", "{{{:::}}}"])
def test_parse_json_lenient_rejects_hopeless_text(text):
    with pytest.raises(ValueError):
        parse_json_lenient(text)


# ----------------------------------------------------------------------------- cache and ledger units
def test_cache_key_is_canonical_and_content_addressed():
    a = make_cache_key({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0.0})
    b = make_cache_key({"temperature": 0.0, "messages": [{"content": "x", "role": "user"}], "model": "m"})
    c = make_cache_key({"model": "m", "messages": [{"role": "user", "content": "y"}], "temperature": 0.0})
    assert a == b != c and len(a) == 64


def test_response_cache_roundtrip_corruption_and_clear(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    key = make_cache_key({"x": 1})
    assert cache.get(key) is None
    cache.put(key, {"text": "hello", "prompt_tokens": 3})
    assert cache.get(key) == {"text": "hello", "prompt_tokens": 3}
    assert len(cache) == 1
    entry = tmp_path / "c" / key[:2] / f"{key}.json"
    assert entry.is_file() and not list(entry.parent.glob(".tmp-*"))
    entry.write_text("{truncated", encoding="utf-8")
    assert cache.get(key) is None  # a damaged entry is a miss, not a crash
    cache.clear()
    assert len(cache) == 0 and cache.get(key) is None
    with pytest.raises(ValueError):
        cache.get("../../etc/passwd")


def test_default_cache_lives_under_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("EVOLVEMEM_CACHE_DIR", str(tmp_path / "root"))
    assert ResponseCache().root == tmp_path / "root" / "llm"


def test_usage_ledger_is_thread_safe():
    ledger = UsageLedger()

    def work(i: int) -> None:
        for _ in range(200):
            ledger.record_call("answer" if i % 2 else "judge", 2, 1, 0.001)
            ledger.record_cache_hit("answer")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))
    snapshot = ledger.snapshot()
    assert snapshot["answer"].calls == 800 and snapshot["judge"].calls == 800
    assert snapshot["answer"].cache_hits == 1600
    total = ledger.total()
    assert total.calls == 1600 and total.prompt_tokens == 3200
    assert total.cost_usd == pytest.approx(1.6)
    assert ledger.cost("judge") == Usage(800, 0, 1600, 800, pytest.approx(0.8))
    ledger.reset()
    assert ledger.snapshot() == {} and ledger.total().calls == 0


# ----------------------------------------------------------------------------- concurrency and import cost
def test_concurrent_calls_overlap(fake_llm, make_client):  # noqa: F811
    # the server counts the requests it holds at once: overlap is asserted, not timed (a wall-clock
    # bound fails on a loaded machine, where litellm's per-call CPU work delays each thread's request)
    latency, threads, calls = 0.5, 16, 32
    client = make_client(cache=None)
    client.complete(user("warm up"), role="answer")  # first call builds litellm's HTTP client
    fake_llm.latency = latency
    with ThreadPoolExecutor(threads) as pool:
        texts = list(pool.map(lambda i: client.complete(user(f"q{i}"), role="answer").text, range(calls)))
    assert texts == [f"echo: q{i}" for i in range(calls)]
    assert fake_llm.peak_in_flight >= threads // 2, f"at most {fake_llm.peak_in_flight} of {threads} calls overlapped"
    assert client.usage.snapshot()["answer"].calls == calls + 1


def test_importing_the_llm_package_does_not_import_litellm():
    code = "import sys, evolvemem.llm, evolvemem.scoring.judge; print('litellm' in sys.modules)"
    repo = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_fake_server_rejects_unknown_fault_kinds():
    with FakeLLMServer() as server:
        with pytest.raises(ValueError):
            server.set_fault_rate(0.5, kinds=("explode",))
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/v1")


def test_malformed_messages_are_rejected_before_any_call(fake_llm, make_client):  # noqa: F811
    client = make_client()
    for bad in ([], [{"content": "no role"}], ["just a string"]):
        with pytest.raises(ValueError):
            client.complete(bad, role="answer")
    assert fake_llm.request_count == 0
