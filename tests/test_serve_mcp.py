"""The memory as MCP tools: a real MCP client session over stdio (`evolve mcp`) and over streamable
HTTP (`/mcp` on `evolve serve`, keyed like the JSON API)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import anyio
import httpx
import pytest
from pydantic import ValidationError

from evolvemem.serving.models import SearchRequest, validation_message

from tests.serve_server import REPO, ServeProcess

KEY = "k-mcp-0123456789abcdef"
TURNS = [
    {"speaker": "Ines", "text": "I started learning the cello in March.", "at": "2024-04-10T09:00"},
    {"speaker": "Ines", "text": "My teacher Ruth lives in Utrecht.", "at": "2024-04-10T09:01"},
]


async def exercise(session) -> dict:
    """remember → recall → answer → forget through one client session; the structured results."""
    await session.initialize()
    names = {tool.name for tool in (await session.list_tools()).tools}
    assert {"remember", "recall", "answer", "forget"} <= names
    out = {}
    for name, arguments in (
        ("remember", {"user": "ines", "turns": TURNS}),
        ("recall", {"user": "ines", "query": "Where does the cello teacher live?"}),
        ("answer", {"user": "ines", "query": "Which instrument is Ines learning?"}),
        ("forget", {"user": "ines"}),
        ("recall", {"user": "ines", "query": "cello"}),
    ):
        result = await session.call_tool(name, arguments)
        assert not result.is_error, result
        out[name if name not in out else f"{name}-after-forget"] = result.structured_content
    return out


REFUSED = {  # tool, arguments: what the HTTP API refuses, MCP must refuse too
    "limit -1": ("recall", {"user": "ines", "query": "cello", "limit": -1}),
    "limit 1e9": ("recall", {"user": "ines", "query": "cello", "limit": 10**9}),
    "1001 turns": ("remember", {"user": "ines", "turns": [{"speaker": "Ines", "text": "hi"}] * 1001}),
    "blank query": ("answer", {"user": "ines", "query": "   "}),
}


async def refusals(session) -> dict[str, str]:
    """The text each refused call brings back to the client."""
    out = {}
    for label, (name, arguments) in REFUSED.items():
        result = await session.call_tool(name, arguments)
        assert result.is_error, (label, result)
        out[label] = result.content[0].text
    return out


def http_message(**body) -> str:
    """What the HTTP API answers a search body with (the same request model, the same words)."""
    try:
        SearchRequest.model_validate(body)
    except ValidationError as exc:
        return validation_message(exc.errors())
    raise AssertionError(f"{body} is accepted")


def check_refusals(texts: dict[str, str], limit_messages: dict[str, str]) -> None:
    for label in ("limit -1", "limit 1e9"):
        assert texts[label].endswith(limit_messages[label]), texts[label]
    assert texts["limit -1"].endswith("limit: Input should be greater than or equal to 1")
    assert "turns: List should have at most 1000 items" in texts["1001 turns"]
    assert "query: String should match pattern" in texts["blank query"]
    assert all("\n" not in text for text in texts.values())  # one line each


def check(results: dict) -> None:
    assert results["remember"]["turn_ids"] == ["session-1:1", "session-1:2"]
    hits = results["recall"]["hits"]
    assert any("Utrecht" in hit["text"] for hit in hits) and all(hit["turn_ids"] for hit in hits)
    assert "cello" in results["answer"]["answer"].lower()
    assert results["forget"]["forgotten_turns"] == 2
    assert results["recall-after-forget"]["hits"] == []


@pytest.mark.slow
def test_mcp_over_stdio(tmp_path):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from evolvemem.cli.main import app; app()", "mcp", "--store", str(tmp_path / "m.duckdb")],
        env={k: v for k, v in os.environ.items() if k.startswith(("EVOLVEMEM", "HF_", "TRANSFORMERS", "LITELLM"))}
        | {"PYTHONPATH": str(REPO)},
    )

    async def main() -> tuple[dict, dict]:
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    return await exercise(session), await refusals(session)

    results, texts = anyio.run(main)
    check(results)
    check_refusals(
        texts,
        {
            "limit -1": http_message(user="u", query="q", limit=-1),
            "limit 1e9": http_message(user="u", query="q", limit=10**9),
        },
    )


def test_mcp_over_stdio_answers_every_line(tmp_path):
    """A garbage line gets a JSON-RPC parse error, and a request holding a lone surrogate gets an
    error reply with its id within 5 s; the server goes on serving."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [
        sys.executable,
        "-c",
        "from evolvemem.cli.main import app; app()",
        "mcp",
        "--store",
        str(tmp_path / "m.duckdb"),
    ]
    with open(tmp_path / "stderr.log", "w") as errlog:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=env)
    try:

        def send(line: str) -> None:
            assert proc.stdin is not None
            proc.stdin.write(line.encode("utf-8") + b"\n")
            proc.stdin.flush()

        def reply(timeout: float) -> dict:
            assert proc.stdout is not None
            box: list[bytes] = []
            reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
            reader.start()
            reader.join(timeout)
            assert box and box[0], f"no reply within {timeout} s"
            return json.loads(box[0])

        send("this is not json")
        garbage = reply(120)  # the first reply waits for the process to start
        assert garbage["id"] is None and garbage["error"]["code"] == -32700
        lone = '{"name": "recall", "arguments": {"user": "a\\ud800", "query": "x"}}'  # JSON text: "a\ud800"
        send('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": ' + lone + "}")
        started = time.monotonic()
        surrogate = reply(5)
        assert time.monotonic() - started < 5
        assert surrogate["id"] == 7 and surrogate["error"]["code"] == -32700, surrogate
        send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
        assert reply(10) == {"jsonrpc": "2.0", "id": 8, "result": {}}  # still serving
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_mcp_over_streamable_http_needs_a_key(tmp_path):
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    with ServeProcess(tmp_path / "memory.duckdb", keys=[KEY]) as server:
        unkeyed = httpx.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert unkeyed.status_code == 401 and set(unkeyed.json()) == {"error"}

        async def main() -> tuple[dict, dict]:
            async with create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}) as http:
                async with streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        return await exercise(session), await refusals(session)

        results, texts = anyio.run(main)
        check(results)
        said = {}
        for label, limit in (("limit -1", -1), ("limit 1e9", 10**9)):
            refused = httpx.post(
                f"{server.url}/v1/search",
                headers={"Authorization": f"Bearer {KEY}"},
                json={"user": "ines", "query": "cello", "limit": limit},
                timeout=30,
            )
            assert refused.status_code == 422
            said[label] = refused.json()["error"]
        check_refusals(texts, said)
        # the HTTP API with the same key sees what MCP wrote (and forgot): one memory, two doors
        search = httpx.post(
            f"{server.url}/v1/search",
            headers={"Authorization": f"Bearer {KEY}"},
            json={"user": "ines", "query": "cello"},
            timeout=30,
        )
        assert search.status_code == 200 and search.json()["hits"] == []
