"""ASGI guards in front of the HTTP API: a body-size limit (413) and a bound on requests in flight (503).

Both answer with the API's JSON error shape, `{"error": "<one message>"}`, before the request
reaches a route, so an oversized body is never read whole and a burst never queues without end.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def send_error(send: Send, status: int, message: str, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    body = json.dumps({"error": message}).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


class HTTPMiddleware:
    """An ASGI middleware that acts on HTTP requests only (`handle`): anything `passes` lets through
    (lifespan and websocket scopes) reaches the app untouched."""

    def __init__(self, app: ASGIApp):
        self.app = app

    def passes(self, scope: Scope) -> bool:
        kind: str = scope["type"]
        return kind != "http"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.passes(scope):
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class BodyLimit(HTTPMiddleware):
    """Refuse request bodies larger than `max_bytes` (by Content-Length, or while reading one)."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        super().__init__(app)
        self.max_bytes = max_bytes

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = dict(scope.get("headers") or []).get(b"content-length")
        too_big = f"request body larger than {self.max_bytes} bytes"
        if declared is not None:
            try:
                if int(declared) > self.max_bytes:
                    await send_error(send, 413, too_big)
                    return
            except ValueError:
                await send_error(send, 400, "invalid Content-Length header")
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await send_error(send, 413, too_big)
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class InFlightLimit(HTTPMiddleware):
    """At most `limit` requests handled at once; more get 503 with Retry-After at once. Paths in
    `exempt` (health checks) always pass."""

    def __init__(self, app: ASGIApp, limit: int, exempt: tuple[str, ...] = ("/health",)):
        super().__init__(app)
        self.limit = limit
        self.exempt = exempt
        self.in_flight = 0

    def passes(self, scope: Scope) -> bool:
        return super().passes(scope) or scope.get("path") in self.exempt

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.in_flight >= self.limit:  # one event loop: the check and the increment cannot interleave
            await send_error(
                send, 503, f"server busy: {self.limit} requests in flight; retry shortly", ((b"retry-after", b"1"),)
            )
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
