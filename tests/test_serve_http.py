"""`evolve serve`: a real server on 127.0.0.1, a real HTTP client.

Covers the JSON API's verbs and error shape, per-key isolation, 401/413/422/503, strict types, a
user id with "/" deleted, nothing but liveness without a key, the config hash on every response, a
config swapped without a restart, no key in the log or the store, and a fuzz of the API from its
own OpenAPI schema with no 5xx. The guards against slow clients are in test_serve_guards.py."""

from __future__ import annotations

import random
import socket
import time

import httpx
import pytest

from tests.serve_server import ServeProcess

KEYS = ["k-alpha-0123456789abcdef", "k-bravo-0123456789abcdef", "k-charlie-0123456789abcdef"]
USERS = ["ana", "ben", "chloe"]
PLACES = ["Lisbon", "Ghent", "Porto", "Tallinn", "Bergen", "Lyon", "Gdansk", "Turin", "Cork"]


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve")
    config = folder / "served.toml"
    config.write_text("max_context = 12\n")
    with ServeProcess(
        folder / "memory.duckdb", str(config), keys=KEYS, extra=["--max-body", "20000", "--reload-config", "0.2"]
    ) as proc:
        proc.config_path = config  # type: ignore[attr-defined]
        yield proc


def marker(key_index: int, user: str) -> str:
    """A fact only (key, user) was told: its own hobby word and place."""
    return f"zq{key_index}{user}hobby"


def test_verbs_and_the_config_hash_on_every_response(server):
    key = auth(KEYS[0])
    with httpx.Client(base_url=server.url, timeout=60) as client:
        added = client.post(
            "/v1/memories",
            headers=key,
            json={
                "user": "dora",
                "turns": [
                    {"speaker": "Dora", "text": "I adopted a grey cat named Miso last week.", "at": "2024-05-02T10:00"},
                    {"role": "Eli", "content": "Miso is a lovely name for a cat."},
                ],
            },
        )
        assert added.status_code == 200, added.text
        body = added.json()
        assert body["turn_ids"] == ["session-1:1", "session-1:2"] and body["config_hash"]
        config_hash = body["config_hash"]
        search = client.post("/v1/search", headers=key, json={"user": "dora", "query": "What is the cat called?"})
        hit = search.json()["hits"][0]
        assert "Miso" in hit["text"] and hit["turn_ids"] and hit["views"] and hit["session_date"].startswith("2024")
        context = client.post("/v1/context", headers=key, json={"user": "dora", "query": "What is the cat called?"})
        assert context.json()["context"].startswith("1. [2 May 2024] Dora:") and context.json()["tokens"] > 0
        answer = client.post("/v1/answer", headers=key, json={"user": "dora", "query": "What is the cat's name?"})
        assert "Miso" in answer.json()["answer"]
        for response in (
            added,
            search,
            context,
            answer,
            client.get("/health"),
            client.get("/metrics"),
            client.get("/openapi.json"),
        ):
            assert response.headers["x-evolvemem-config"] == config_hash
        assert 'evolvemem_requests_total{route="/v1/search",status="200"}' in client.get("/metrics", headers=key).text
        assert client.get("/docs").status_code == 200
        gone = client.request("DELETE", "/v1/users/dora", headers=key)
        assert gone.json()["forgotten_turns"] == 2
        assert client.post("/v1/search", headers=key, json={"user": "dora", "query": "cat"}).json()["hits"] == []


def test_keys_never_read_each_others_users(server):
    rng = random.Random(7)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for k, key in enumerate(KEYS):
            for u, user in enumerate(USERS):
                place = PLACES[(k * 3 + u) % len(PLACES)]
                turns = [
                    {"speaker": user.title(), "text": f"My hobby is {marker(k, user)} and I live in {place}."},
                    {"speaker": user.title(), "text": f"Every weekend I practise {marker(k, user)} with friends."},
                ]
                assert (
                    client.post("/v1/memories", headers=auth(key), json={"user": user, "turns": turns}).status_code
                    == 200
                )
        words = [marker(k, u) for k in range(len(KEYS)) for u in USERS] + PLACES + ["hobby", "weekend", "friends"]
        for _ in range(60):
            k, user = rng.randrange(len(KEYS)), rng.choice(USERS)
            query = f"What about {rng.choice(words)} and {rng.choice(words)}?"
            hits = client.post(
                "/v1/search", headers=auth(KEYS[k]), json={"user": user, "query": query, "limit": 10}
            ).json()["hits"]
            assert hits, query
            for hit in hits:
                assert marker(k, user) in hit["text"], (k, user, query, hit["text"])
        # no key, a wrong key, a malformed header: 401 and no data
        for headers in ({}, auth("k-unknown-0123456789abcdef"), {"Authorization": KEYS[0]}):
            response = client.post("/v1/search", headers=headers, json={"user": "ana", "query": "hobby"})
            assert response.status_code == 401 and set(response.json()) == {"error"}
            assert "hits" not in response.text


def test_bad_requests_get_one_json_message(server):
    key = auth(KEYS[1])
    with httpx.Client(base_url=server.url, timeout=60) as client:
        cases = [
            (
                client.post(
                    "/v1/search",
                    headers=key,
                    content=b"{not json",
                ),
                422,
            ),
            (client.post("/v1/search", headers=key, json={"user": "ana", "query": 5}), 422),
            (client.post("/v1/search", headers=key, json={"user": "ana", "query": "x", "limit": 0}), 422),
            (client.post("/v1/search", headers=key, json={"user": "ana", "query": "x", "question_type": "nope"}), 422),
            (client.post("/v1/memories", headers=key, json={"user": "ana", "turns": []}), 422),
            (client.post("/v1/memories", headers=key, json={"user": "ana", "turns": [{"text": "hi"}]}), 422),
            (
                client.post(
                    "/v1/memories", headers=key, json={"user": "ana", "turns": [{"speaker": "A", "text": "x" * 30_000}]}
                ),
                413,
            ),
            (client.get("/v1/nothing-here", headers=key), 404),
            # strict types: a boolean is no limit, a number is no date, a blank is no user
            (client.post("/v1/search", headers=key, json={"user": "ana", "query": "x", "limit": True}), 422),
            (client.post("/v1/search", headers=key, json={"user": "ana", "query": "x", "limit": 2.5}), 422),
            (client.post("/v1/search", headers=key, json={"user": "ana", "query": "x", "at": 0}), 422),
            (client.post("/v1/context", headers=key, json={"user": "  ", "query": "x"}), 422),
            (client.post("/v1/answer", headers=key, json={"user": "a\u0000b", "query": "x"}), 422),
            (
                client.post(
                    "/v1/memories", headers=key, json={"user": "ana", "turns": [{"speaker": "A", "text": "x", "at": 0}]}
                ),
                422,
            ),
            (
                client.post(
                    "/v1/search",
                    headers={**key, "Content-Type": "application/json"},
                    content=b'{"user": "\xff", "query": "x"}',
                ),
                422,
            ),
            (client.request("DELETE", "/v1/users/a%01b", headers=key), 422),
        ]
        for response, status in cases:
            assert response.status_code == status, (response.status_code, response.text)
            body = response.json()
            assert list(body) == ["error"] and isinstance(body["error"], str) and "\n" not in body["error"]
        assert "query" in cases[1][0].json()["error"]


def test_a_user_whose_id_holds_a_slash_is_deleted(server):
    key = auth(KEYS[2])
    turns = [{"speaker": "Alice", "text": "My locker code is zq-slash-4417."}]
    query = {"query": "What is the locker code?"}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for user, path in (("team/alice", "/v1/users/team%2Falice"), ("team/bob", "/v1/users/team/bob")):
            assert client.post("/v1/memories", headers=key, json={"user": user, "turns": turns}).status_code == 200
            assert "zq-slash-4417" in client.post("/v1/search", headers=key, json={"user": user, **query}).text
            gone = client.request("DELETE", path, headers=key)
            assert gone.status_code == 200 and gone.json()["forgotten_turns"] == 1, gone.text
            assert client.post("/v1/search", headers=key, json={"user": user, **query}).json()["hits"] == []


def test_nothing_leaks_without_a_key(server):
    with httpx.Client(base_url=server.url, timeout=60) as client:
        metrics = client.get("/metrics")
        assert metrics.status_code == 401 and list(metrics.json()) == ["error"]
        assert "evolvemem_" not in metrics.text
        assert client.get("/metrics", headers=auth(KEYS[0])).text.startswith("# TYPE")
        health = client.get("/health")
        assert health.status_code == 200 and set(health.json()) == {"status", "config_hash", "namespaces"}
        assert str(server.config_path.parent) not in health.text and "served.toml" not in health.text
        for path in ("/v1/nothing-here", "/v1/users/ana", "/mcp"):
            assert client.get(path).status_code == 401


def test_requests_beyond_the_in_flight_bound_get_503(tmp_path):
    with ServeProcess(tmp_path / "memory.duckdb", extra=["--max-in-flight", "1"]) as proc:
        # a client that sends half a body holds the one slot while the server waits for the rest
        slow = socket.create_connection(("127.0.0.1", proc.port))
        slow.sendall(
            b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"user": '
        )
        time.sleep(0.5)
        busy = httpx.post(f"{proc.url}/v1/search", json={"user": "a", "query": "b"}, timeout=30)
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1" and "busy" in busy.json()["error"]
        assert httpx.get(f"{proc.url}/health", timeout=30).status_code == 200  # health is never refused
        slow.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            response = httpx.post(f"{proc.url}/v1/search", json={"user": "a", "query": "b"}, timeout=30)
            if response.status_code != 503:
                break
            time.sleep(0.2)
        assert response.status_code == 200


def test_a_newly_evolved_config_is_swapped_in_without_a_restart(server):
    with httpx.Client(base_url=server.url, timeout=60) as client:
        before = client.get("/health").json()["config_hash"]
        server.config_path.write_text("max_context = 8\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and client.get("/health").json()["config_hash"] == before:
            time.sleep(0.2)
        after = client.get("/health").json()["config_hash"]
        assert after != before
        hits = client.post("/v1/search", headers=auth(KEYS[2]), json={"user": "ana", "query": "hobby weekend"}).json()
        assert hits["config_hash"] == after and len(hits["hits"]) <= 8
        server.config_path.write_text("max_context = [broken\n")  # a bad file keeps the served config
        time.sleep(1.0)
        assert client.get("/health").json()["config_hash"] == after


def test_open_namespace_is_loopback_only(tmp_path):
    import subprocess
    import sys

    from tests.serve_server import REPO

    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from evolvemem.cli.main import app; app()",
            "serve",
            "--store",
            str(tmp_path / "m.duckdb"),
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)},
    )
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "127.0.0.1 only" in out.stderr


@pytest.mark.slow
def test_fuzzed_from_its_own_schema_no_5xx_and_no_key_kept(server):
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis.generation.modes import GenerationMode

    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    strategy = schema.as_strategy(GenerationMode.POSITIVE) | schema.as_strategy(GenerationMode.NEGATIVE)
    seen: list[int] = []

    @given(case=strategy)
    @settings(max_examples=120, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    def no_server_error(case):
        response = case.call(base_url=server.url, headers=auth(KEYS[0]), timeout=60)
        seen.append(response.status_code)
        assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:300])

    no_server_error()
    assert len(seen) >= 100 and any(s < 300 for s in seen) and any(400 <= s < 500 for s in seen)
    # no key reaches the log or the store file
    log = server.log()
    folder = server.log_path.parent
    store_bytes = b"".join(path.read_bytes() for path in folder.glob("memory.duckdb*"))
    for key in KEYS:
        assert key not in log
        assert key.encode() not in store_bytes


def test_a_config_file_is_read_only_once_its_write_has_settled(tmp_path):
    from evolvemem import Memory
    from evolvemem.serving.http_app import ConfigWatcher

    config = tmp_path / "served.toml"
    config.write_text("max_context = 6\n")
    with Memory.open(tmp_path / "memory.duckdb", str(config)) as memory:
        watcher = ConfigWatcher(memory, str(config), interval=0)
        served = memory.config_hash
        config.write_text("")  # an in-place write caught half-way: empty is a valid TOML config
        assert not watcher.check() and memory.config_hash == served  # changed, not yet settled
        config.write_text("max_context = 9\n")  # the write goes on
        assert not watcher.check() and memory.config_hash == served
        assert watcher.check() and memory.config_hash != served  # unchanged since the last check: read
        assert memory.config.max_context == 9
        assert not watcher.check()  # nothing new


def test_a_granularity_swap_builds_its_stores_before_it_is_served(tmp_path):
    """Swapping to a routed granularity builds the raw and episode stores of every loaded user
    before the new config is served, so no request after the swap waits for a build."""
    from evolvemem import Memory
    from evolvemem.serving.http_app import ConfigWatcher

    config = tmp_path / "served.toml"
    config.write_text("max_context = 6\n")
    turns = [
        {"speaker": "Ana" if i % 2 else "Ben", "text": f"On day {i} we cycled to lake {i % 4}."} for i in range(12)
    ]
    with Memory.open(tmp_path / "memory.duckdb", str(config)) as memory:
        for user in ("ana", "ben"):
            memory.add(user, turns, session="s1", at="2024-03-01")
            memory.search(user, "Where did we cycle?")  # loaded, under the fact granularity
        workspaces = [memory._states[("local", user)].workspace for user in ("ana", "ben")]
        assert not any(ws.has_store(user, "raw") for ws, user in zip(workspaces, ("ana", "ben")))
        served = memory.config_hash
        watcher = ConfigWatcher(memory, str(config), interval=0)
        config.write_text('max_context = 6\nmemory_granularity = "routed"\n')
        assert not watcher.check() and watcher.check()  # settled, then swapped
        assert memory.config_hash != served
        for ws, user in zip(workspaces, ("ana", "ben")):
            assert ws.has_store(user, "raw") and ws.has_store(user, "episode")
        assert memory.search("ana", "Why did we go to the lake?").hits
