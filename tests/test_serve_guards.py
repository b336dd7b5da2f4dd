"""`evolve serve`'s guards: nothing without a key is queued or read, and no client holds the server.

A real server on 127.0.0.1 and raw sockets: slow unauthenticated bodies (the stall of issue 46),
a keyed body that never arrives (408), a head trickled byte by byte (closed), two Authorization
headers (refused the same way by the JSON API and /mcp). The in-flight bound is also driven
in-process, through the ASGI stack `create_app` builds."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest

from tests.serve_server import ServeProcess

KEY = "k-guard-0123456789abcdef"
READ_TIMEOUT = 1.5
SEARCH = b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def auth(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("guards")
    extra = ["--max-in-flight", "2", "--read-timeout", str(READ_TIMEOUT)]
    with ServeProcess(folder / "memory.duckdb", keys=[KEY], extra=extra) as proc:
        added = httpx.post(
            f"{proc.url}/v1/memories",
            headers=auth(),
            json={"user": "ana", "turns": [{"speaker": "Ana", "text": "My bike is a green Brompton."}]},
            timeout=60,
        )
        assert added.status_code == 200, added.text
        yield proc


def slow_socket(port: int, head: bytes, body: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(30)
    sock.sendall(head + b"\r\n" + body)
    return sock


def status_of(sock: socket.socket) -> int | None:
    """The status of the response on `sock`; None when the server closed it without one."""
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    return int(data.split(b" ", 2)[1])


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed `sock` (reading and dropping what it sent), None if it did not."""
    started = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except socket.timeout:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - started


def test_slow_unauthenticated_bodies_do_not_stall_keyed_searches(server):
    # issue 46's repro: POST /v1/search announcing 1000 bytes, sending 10, and holding
    head = SEARCH + b"Content-Length: 1000\r\n"
    slow = [slow_socket(server.port, head, b'{"user": "') for _ in range(6)]
    try:
        time.sleep(0.3)
        statuses = [
            httpx.post(
                f"{server.url}/v1/search", headers=auth(), json={"user": "ana", "query": "Which bike?"}, timeout=30
            ).status_code
            for _ in range(12)
        ]
        assert statuses == [200] * 12
        assert [status_of(sock) for sock in slow] == [401] * 6  # refused at once, the body never read
    finally:
        for sock in slow:
            sock.close()


def test_a_keyed_body_that_never_arrives_gets_408_and_frees_its_slot(server):
    head = SEARCH + f"Authorization: Bearer {KEY}\r\nContent-Length: 100\r\n".encode()
    held = [slow_socket(server.port, head, b'{"user": "') for _ in range(2)]  # both slots of --max-in-flight 2
    try:
        time.sleep(0.3)
        busy = httpx.post(f"{server.url}/v1/search", headers=auth(), json={"user": "ana", "query": "bike"}, timeout=30)
        assert busy.status_code == 503
        started = time.monotonic()
        assert [status_of(sock) for sock in held] == [408, 408]
        assert time.monotonic() - started < READ_TIMEOUT + 5
        assert all(closed_within(sock, 5) is not None for sock in held)
    finally:
        for sock in held:
            sock.close()
    again = httpx.post(f"{server.url}/v1/search", headers=auth(), json={"user": "ana", "query": "bike"}, timeout=30)
    assert again.status_code == 200


def test_a_trickled_or_missing_head_is_closed_at_the_deadline(server):
    silent = socket.create_connection(("127.0.0.1", server.port))
    trickled = socket.create_connection(("127.0.0.1", server.port))
    try:
        trickled.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        trickled.settimeout(5)
        closed = False
        while time.monotonic() - started < READ_TIMEOUT + 5:  # one header byte every 0.2 s, never done
            try:
                trickled.sendall(b"X")
            except OSError:
                closed = True
                break
            trickled.settimeout(0.2)
            try:
                if trickled.recv(4096) == b"":
                    closed = True
                    break
            except socket.timeout:
                pass
        assert closed and time.monotonic() - started < READ_TIMEOUT + 3
        assert closed_within(silent, READ_TIMEOUT + 3) is not None
    finally:
        silent.close()
        trickled.close()
    assert httpx.get(f"{server.url}/health", timeout=30).status_code == 200


def test_two_authorization_headers_are_refused_by_the_api_and_by_mcp(server):
    headers = [("Authorization", f"Bearer {KEY}"), ("Authorization", "Bearer k-other-0123456789abcdef")]
    mcp_call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    mcp_headers = [*headers, ("Accept", "application/json, text/event-stream")]
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for swapped in (headers, headers[::-1]):
            api = client.post("/v1/search", headers=swapped, json={"user": "ana", "query": "bike"})
            mcp = client.post("/mcp", headers=[*swapped, mcp_headers[-1]], json=mcp_call)
            assert api.status_code == mcp.status_code == 401
            assert api.json() == mcp.json() == {"error": "more than one Authorization header (send one)"}
        one = client.post("/mcp", headers=[headers[0], mcp_headers[-1]], json=mcp_call)
        assert one.status_code == 200 and "recall" in one.text


def test_keyed_requests_fill_their_bound_only(tmp_path):
    """A keyed request whose body has not arrived holds its slot; the paths open without a key are
    still answered (they have a bound of their own and never wait for a body), and a request with
    no key elsewhere is refused before anything is counted."""
    from evolvemem import Memory
    from evolvemem.serving.http_app import create_app
    from evolvemem.serving.keys import key_ring

    async def call(app, path: str, headers: list[tuple[bytes, bytes]], gate: asyncio.Event | None = None) -> int:
        sent: list[int] = []

        async def receive():
            if gate is not None:
                await gate.wait()  # the body arrives only when the gate opens
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            if message["type"] == "http.response.start":
                sent.append(message["status"])

        scope = {
            "type": "http",
            "method": "GET",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": headers,
            "http_version": "1.1",
            "scheme": "http",
            "server": ("127.0.0.1", 80),
            "client": ("127.0.0.1", 1),
            "root_path": "",
        }
        await app(scope, receive, send)
        return sent[0]

    async def scenario(memory: Memory) -> None:
        app = create_app(memory, key_ring([KEY]), max_in_flight=1, max_unauthenticated=1, with_mcp=False)
        keyed = [(b"authorization", f"Bearer {KEY}".encode())]
        gate = asyncio.Event()
        holding = asyncio.ensure_future(call(app, "/metrics", keyed, gate))  # holds the one keyed slot
        await asyncio.sleep(0.05)
        assert await call(app, "/metrics", keyed) == 503
        assert await call(app, "/openapi.json", []) == 200
        assert await call(app, "/health", []) == 200
        assert await call(app, "/metrics", []) == 401
        assert await call(app, "/health", keyed) == 200  # keyed health is never refused
        gate.set()
        assert await holding == 200
        assert await call(app, "/metrics", keyed) == 200

    with Memory.open(tmp_path / "memory.duckdb") as memory:
        asyncio.run(scenario(memory))


def test_a_request_the_parser_refuses_gets_the_json_error_shape(server):
    for raw in (b"NOT HTTP AT ALL\r\n\r\n", b"GET /v1/users/" + b"x" * 120_000 + b" HTTP/1.1\r\nHost: a\r\n\r\n"):
        sock = socket.create_connection(("127.0.0.1", server.port))
        try:
            sock.settimeout(30)
            sock.sendall(raw)
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        finally:
            sock.close()
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in head.lower()
        assert list(json.loads(body)) == ["error"]
