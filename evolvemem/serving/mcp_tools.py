"""The memory as MCP tools (remember, recall, answer, forget) with the official `mcp` SDK.

The same `Memory` verbs as the HTTP API, so an MCP client gets the same contexts. Over stdio
(`evolve mcp`) the caller is the local process and uses the open namespace; over streamable HTTP
(`/mcp` on `evolve serve`) the bearer key of the request picks the namespace, as for the JSON API.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Mapping

from mcp.server.mcpserver import Context, MCPServer

from evolvemem.errors import EvolveMemError
from evolvemem.serving.memory import DEFAULT_NAMESPACE, Memory
from evolvemem.serving.models import AddResult, AnswerResult, ForgetResult, SearchResult, TurnIn, check_user_id

NamespaceFn = Callable[[Mapping[str, str] | None], str | None]

INSTRUCTIONS = (
    "Long-term memory of conversations, retrieved with a config tuned by evolvemem. Call `remember` "
    "with new turns of a conversation, `recall` for the memories relevant to a question, `answer` for "
    "an answer read from them, `forget` to delete a user's memories."
)


def open_namespace(_headers: Mapping[str, str] | None) -> str:
    return DEFAULT_NAMESPACE


def build_mcp_server(memory: Memory, namespace: NamespaceFn = open_namespace) -> MCPServer:
    """An MCP server whose tools call `memory` in the namespace `namespace(headers)` names."""
    server: MCPServer = MCPServer("evolvemem", instructions=INSTRUCTIONS, log_level="WARNING")

    def resolve(ctx: Context) -> str:
        try:
            headers = ctx.headers
        except ValueError:  # no request (stdio has none with headers)
            headers = None
        found = namespace(headers)
        if found is None:
            raise EvolveMemError("missing or unknown API key")
        return found

    @server.tool()
    def remember(
        user: str, turns: list[TurnIn], ctx: Context, session: str | None = None, at: datetime | None = None
    ) -> AddResult:
        """Store new turns of `user`'s conversation (speaker, text; optional at, session, id)."""
        return memory.add(user, turns, session=session, at=at, namespace=resolve(ctx))

    @server.tool()
    def recall(user: str, query: str, ctx: Context, limit: int | None = None) -> SearchResult:
        """The memories of `user` relevant to `query`, ranked, with their source turns."""
        return memory.search(user, query, limit=limit, namespace=resolve(ctx))

    @server.tool()
    def answer(user: str, query: str, ctx: Context) -> AnswerResult:
        """An answer to `query` read from `user`'s memories, with the context it was read from."""
        return memory.answer(user, query, namespace=resolve(ctx))

    @server.tool()
    def forget(user: str, ctx: Context, session: str | None = None) -> ForgetResult:
        """Forget `user` entirely, or one of its sessions."""
        return memory.forget(check_user_id(user), session=session, namespace=resolve(ctx))

    return server
