"""The memory as MCP tools (remember, recall, answer, forget) with the official `mcp` SDK.

The same `Memory` verbs as the HTTP API, so an MCP client gets the same contexts, behind the same
rules: a tool's arguments are validated with the HTTP API's request models (sizes, the 1,000-turn
cap, limit bounds), and a refusal reaches the client as the HTTP API words it. The SDK hands the
client only "Error executing tool <name>" for any exception but its `ToolError` (the reason stays
in the server's log), so every refusal is raised as a `ToolError` carrying its one-line reason.

Over stdio (`evolve mcp`) the caller is the local process and uses the open namespace; over
streamable HTTP (`/mcp` on `evolve serve`) the bearer key of the request picks the namespace, as
for the JSON API.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Mapping, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ValidationError

from evolvemem.errors import EvolveMemError
from evolvemem.serving.memory import DEFAULT_NAMESPACE, Memory
from evolvemem.serving.models import (
    AddRequest,
    AddResult,
    AnswerResult,
    ForgetRequest,
    ForgetResult,
    QueryRequest,
    SearchRequest,
    SearchResult,
    TurnIn,
    validation_message,
)

NamespaceFn = Callable[[Mapping[str, str] | None], str | None]
Request = TypeVar("Request", bound=BaseModel)
Result = TypeVar("Result")

INSTRUCTIONS = (
    "Long-term memory of conversations, retrieved with a config tuned by evolvemem. Call `remember` "
    "with new turns of a conversation, `recall` for the memories relevant to a question, `answer` for "
    "an answer read from them, `forget` to delete a user's memories."
)


def open_namespace(_headers: Mapping[str, str] | None) -> str:
    return DEFAULT_NAMESPACE


def checked(model: type[Request], **arguments: object) -> Request:
    """The arguments as the HTTP API's request model (its user-id rule included), or a ToolError with
    the HTTP API's message."""
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        raise ToolError(validation_message(exc.errors())) from None


def served(call: Callable[[], Result]) -> Result:
    """`call()`, with the memory's refusals (EvolveMemError) reaching the client in one line."""
    try:
        return call()
    except EvolveMemError as exc:
        raise ToolError(str(exc).splitlines()[0] if str(exc) else "bad request") from None


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
            raise ToolError("missing or unknown API key")
        return found

    @server.tool()
    def remember(
        user: str, turns: list[TurnIn], ctx: Context, session: str | None = None, at: datetime | None = None
    ) -> AddResult:
        """Store new turns of `user`'s conversation (speaker, text; optional at, session, id)."""
        request = checked(AddRequest, user=user, turns=turns, session=session, at=at)
        ns = resolve(ctx)
        return served(
            lambda: memory.add(request.user, request.turns, session=request.session, at=request.at, namespace=ns)
        )

    @server.tool()
    def recall(user: str, query: str, ctx: Context, limit: int | None = None) -> SearchResult:
        """The memories of `user` relevant to `query`, ranked, with their source turns."""
        request = checked(SearchRequest, user=user, query=query, limit=limit)
        ns = resolve(ctx)
        return served(lambda: memory.search(request.user, request.query, limit=request.limit, namespace=ns))

    @server.tool()
    def answer(user: str, query: str, ctx: Context) -> AnswerResult:
        """An answer to `query` read from `user`'s memories, with the context it was read from."""
        request = checked(QueryRequest, user=user, query=query)
        ns = resolve(ctx)
        return served(lambda: memory.answer(request.user, request.query, namespace=ns))

    @server.tool()
    def forget(user: str, ctx: Context, session: str | None = None) -> ForgetResult:
        """Forget `user` entirely, or one of its sessions."""
        request = checked(ForgetRequest, user=user, session=session)
        ns = resolve(ctx)
        return served(lambda: memory.forget(request.user, session=request.session, namespace=ns))

    return server
