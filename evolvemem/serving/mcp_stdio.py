"""`evolve mcp`'s stdio loop: the SDK's, plus an answer to every line it cannot read.

The SDK's stdio transport (mcp 2.x, `mcp.server.stdio.stdio_server`) turns a line that does not
parse as a JSON-RPC message into an exception on its read stream, and the server's dispatcher
only logs it at debug level: the client gets no reply and waits until it times out. That covers a
garbage line, and a request whose JSON holds a lone surrogate such as "\\ud800" (valid to Python's
json, refused by pydantic's parser), which the client sent with an id and waits on.

So the read stream passes through `answer_unreadable`: a message goes on to the server unchanged;
an unreadable line gets a JSON-RPC error on the write stream — "Parse error" (-32700), or "Invalid
Request" (-32600) for JSON that is not a JSON-RPC message — carrying the line's id when Python's
lenient json can still read one (else null, as JSON-RPC says).
"""

from __future__ import annotations

import json

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

Inbound = SessionMessage | Exception


def error_reply(failure: Exception) -> JSONRPCError:
    """The JSON-RPC error answering a line the transport could not read as a message."""
    line = ""
    if isinstance(failure, ValidationError) and failure.errors():
        first = failure.errors()[0]
        line = first["input"] if isinstance(first.get("input"), str) else ""
        parse_failed = first["type"] == "json_invalid"
        reason = str(first["msg"]).splitlines()[0]
    else:
        parse_failed, reason = True, str(failure).splitlines()[0] if str(failure) else type(failure).__name__
    request_id: str | int | None = None
    try:
        document = json.loads(line)  # Python's json reads lone surrogates: the id can still be found
    except ValueError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("id"), (str, int)):
        request_id = document["id"]
        if isinstance(request_id, str):  # the id goes back out as UTF-8: no lone surrogate in it
            request_id = request_id.encode("utf-8", "replace").decode("utf-8")
    code, title = (PARSE_ERROR, "Parse error") if parse_failed else (INVALID_REQUEST, "Invalid Request")
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=f"{title}: {reason}"))


async def answer_unreadable(
    incoming: ReadStream[Inbound], replies: WriteStream[SessionMessage], onward: MemoryObjectSendStream[Inbound]
) -> None:
    """Pass messages on to the server; answer each unreadable line with a JSON-RPC error."""
    async with onward:
        async for item in incoming:
            if isinstance(item, Exception):
                await replies.send(SessionMessage(error_reply(item)))
            else:
                await onward.send(item)


async def serve_stdio(server: MCPServer) -> None:
    """`server.run_stdio_async()` with every line answered (see the module docstring)."""
    lowlevel = server._lowlevel_server  # what run_stdio_async runs; the SDK offers no hook on its read stream
    async with stdio_server() as (incoming, replies):
        onward, messages = anyio.create_memory_object_stream[Inbound](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(answer_unreadable, incoming, replies, onward)
            await lowlevel.run(messages, replies, lowlevel.create_initialization_options())
            tasks.cancel_scope.cancel()
