"""Guards in front of the HTTP API, so that no client holds the server for long and none without a key
holds it at all: the key check first (401 before a byte of the body is read), a bound on requests
in flight (503) counted for keyed requests and, apart, for the few paths open without a key, a
body-size limit (413), a deadline for the body (408) and, in the HTTP protocol, for the headers.

Each answers with the API's JSON error shape, `{"error": "<one message>"}`, before the request
reaches a route, so an oversized or trickled body is never waited for without end and a burst
never queues without end.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable

if TYPE_CHECKING:
    from evolvemem.serving.keys import Caller

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


CLOSE = ((b"connection", b"close"),)  # on a refusal that leaves a body unread: the connection goes too


class KeyGate(HTTPMiddleware):
    """The key check, before anything is queued or read. A request with a known key goes on to
    `keyed` (the in-flight bound, the body read); one without goes to `public` when its path needs
    no key (health, the schema, the docs), with its body never read, and otherwise gets 401 at once."""

    def __init__(
        self,
        keyed: ASGIApp,
        public: ASGIApp,
        caller: Callable[[Iterable[tuple[bytes, bytes]]], Caller],
        public_paths: frozenset[str],
    ):
        super().__init__(keyed)
        self.public = public
        self.caller = caller
        self.public_paths = public_paths

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self.caller(scope.get("headers") or [])
        if found.namespace is not None:
            await self.app(scope, receive, send)
        elif scope.get("path") in self.public_paths:
            await self.public(scope, _bodiless(receive), send)
        else:
            await send_error(send, 401, found.refusal, ((b"www-authenticate", b"Bearer"), *CLOSE))


def _bodiless(receive: Receive) -> Receive:
    """A request's messages with its body skipped: the first read is an empty body, the later ones
    (a response listening for a disconnect) the real ones."""
    first = True

    async def skipped() -> Message:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b"", "more_body": False}
        return await receive()

    return skipped


class BodyLimit(HTTPMiddleware):
    """Refuse request bodies larger than `max_bytes` (413, by Content-Length or while reading one)
    and bodies not received whole within `timeout` seconds of the first read (408)."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout: float):
        super().__init__(app)
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = dict(scope.get("headers") or []).get(b"content-length")
        too_big = f"request body larger than {self.max_bytes} bytes"
        if declared is not None:
            try:
                if int(declared) > self.max_bytes:
                    await send_error(send, 413, too_big, CLOSE)
                    return
            except ValueError:
                await send_error(send, 400, "invalid Content-Length header", CLOSE)
                return
        try:
            chunks = await asyncio.wait_for(self._read(receive), self.timeout)
        except asyncio.TimeoutError:
            await send_error(send, 408, f"request body not received within {self.timeout:g} s", CLOSE)
            return
        if chunks is None:  # the client went away
            return
        if sum(len(chunk) for chunk in chunks) > self.max_bytes:
            await send_error(send, 413, too_big, CLOSE)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> list[bytes] | None:
        """The body's chunks, up to one past `max_bytes`; None when the client went away."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if size > self.max_bytes or not message.get("more_body"):
                return chunks


class InFlightLimit(HTTPMiddleware):
    """At most `limit` requests handled at once; more get 503 with Retry-After at once. Paths in
    `exempt` (health checks) always pass. Behind `KeyGate`, so what it counts are requests that
    carry a key (or, as its own instance, the few that need none)."""

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


def guarded_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with a deadline on each request's head, and its own refusals in the
    API's error shape.

    A connection that has not sent a whole request line and headers `seconds` after it opened, or
    after its last response, is closed: without it a client that trickles its head (or sends none)
    holds a socket for ever, as uvicorn's keep-alive timer is reset by every byte. A request the
    parser refuses (malformed, or a head larger than it takes) gets 400 as `{"error": ...}` JSON,
    not uvicorn's plain text."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:  # uvicorn without httptools: its h11 protocol has the same hooks
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base  # type: ignore[assignment]

    class Guarded(Base):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            body = json.dumps({"error": f"{msg.rstrip('.')} (malformed, or its head too large)"}).encode()
            head = [b"HTTP/1.1 400 Bad Request"]
            head += [name + b": " + value for name, value in self.server_state.default_headers]
            head += [b"content-type: application/json", b"content-length: " + str(len(body)).encode()]
            self.transport.write(b"\r\n".join([*head, b"connection: close", b"", body]))
            self.transport.close()

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(seconds, self._expire, self.cycle)

        def _expire(self, waiting: object) -> None:
            """Close the connection unless a request's head arrived since the deadline was set, or
            the request it was set in is still being answered (a pipelined one)."""
            self._deadline = None
            headed = self.cycle is not waiting
            answering = self.cycle is not None and not self.cycle.response_complete
            if not headed and not answering and not self.transport.is_closing():
                self.transport.close()

    return Guarded
