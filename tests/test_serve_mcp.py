"""The memory as MCP tools: a real MCP client session over stdio (`evolve mcp`) and over streamable
HTTP (`/mcp` on `evolve serve`, keyed like the JSON API)."""

from __future__ import annotations

import os
import sys

import anyio
import httpx

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


def check(results: dict) -> None:
    assert results["remember"]["turn_ids"] == ["session-1:1", "session-1:2"]
    hits = results["recall"]["hits"]
    assert any("Utrecht" in hit["text"] for hit in hits) and all(hit["turn_ids"] for hit in hits)
    assert "cello" in results["answer"]["answer"].lower()
    assert results["forget"]["forgotten_turns"] == 2
    assert results["recall-after-forget"]["hits"] == []


def test_mcp_over_stdio(tmp_path):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from evolvemem.cli.main import app; app()", "mcp", "--store", str(tmp_path / "m.duckdb")],
        env={k: v for k, v in os.environ.items() if k.startswith(("EVOLVEMEM", "HF_", "TRANSFORMERS", "LITELLM"))}
        | {"PYTHONPATH": str(REPO)},
    )

    async def main() -> dict:
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    return await exercise(session)

    check(anyio.run(main))


def test_mcp_over_streamable_http_needs_a_key(tmp_path):
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    with ServeProcess(tmp_path / "memory.duckdb", keys=[KEY]) as server:
        unkeyed = httpx.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert unkeyed.status_code == 401 and set(unkeyed.json()) == {"error"}

        async def main() -> dict:
            async with create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}) as http:
                async with streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        return await exercise(session)

        check(anyio.run(main))
        # the HTTP API with the same key sees what MCP wrote (and forgot): one memory, two doors
        search = httpx.post(
            f"{server.url}/v1/search",
            headers={"Authorization": f"Bearer {KEY}"},
            json={"user": "ines", "query": "cello"},
            timeout=30,
        )
        assert search.status_code == 200 and search.json()["hits"] == []
