"""An OpenAI-compatible chat-completions server on 127.0.0.1 for tests.

Tests drive the real litellm → openai SDK → httpx path against it, so retries, timeouts,
caching and token accounting are exercised end to end without a model or the internet.

    with FakeLLMServer() as server:
        client = LLMClient("openai/fake-model", api_base=server.url)
        server.fail_next(429, retry_after=0.1)

Faults can be scripted (`fail_next`, `hang_next`) or random (`set_fault_rate`). Token counts
in `usage` are whitespace token counts, so accounting can be checked exactly.

`answered` counts the completions a client read, which is not every completion written: a client
killed with a reply still in its socket buffer never saw it. TCP tells the two apart: a client's
next request on the connection, or its clean close (FIN), shows it read the reply whole; a reset
(RST: Linux closes a socket that still holds unread data with one) shows it died first (`unread`).
The verdict comes when the client acts, so read the counters after `settle()`.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Sequence

import pytest

Responder = Callable[[dict], str]

FAULT_KINDS = ("429", "500", "timeout", "malformed", "drop", "not_chat")
DROP, NOT_CHAT = -1, -2  # _Fault statuses: close the connection unanswered; a 200 that is no chat completion
WINDOW_ERRORS = ("llama.cpp", "llama-cpp-python")
# llama-cpp-python's server (llama_cpp/server/errors.py) for a chat prompt that fills n_ctx: HTTP 400
LLAMA_CPP_PYTHON_WINDOW_ERROR = (
    "This model's maximum context length is {window} tokens. However, you requested "
    "{total} tokens ({prompt} in the messages, {completion} in the completion). "
    "Please reduce the length of the messages or completion."
)
MALFORMED_CONTENT = "Sure! Here is what you asked for: {not valid json at all"


def message_text(message: dict) -> str:
    """The text of one chat message (plain string or a list of content parts)."""
    content = message.get("content") or ""
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def last_user_message(body: dict) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            return message_text(message)
    return ""


def wants_json(body: dict) -> bool:
    response_format = body.get("response_format") or {}
    return isinstance(response_format, dict) and response_format.get("type") in ("json_object", "json_schema")


def echo_responder(body: dict) -> str:
    """Default reply: deterministic in the last user message; a JSON object in JSON mode."""
    text = last_user_message(body)
    if wants_json(body):
        return json.dumps({"echo": text})
    return f"echo: {text}"


def count_tokens(text: str) -> int:
    return len(text.split())


@dataclass
class _Fault:
    status: int  # 0 means "hang past the client's timeout"
    retry_after: float | None = None
    body: str | None = None


class FakeLLMServer:
    """A threaded OpenAI-compatible server in a background thread; use as a context manager."""

    def __init__(
        self,
        responder: Responder | None = None,
        latency: float = 0.0,
        hang_seconds: float = 3.0,
        context_window: int | None = None,
        report_window: bool = True,
        window_errors: str = "llama.cpp",
        prefix: str | None = None,
    ):
        self.prefix = prefix or uuid.uuid4().hex[:12]  # the same prefix again: a server restarted on a new port
        self.responder: Responder = responder or echo_responder
        # like a llama.cpp server started with --n_ctx: a prompt plus its max_tokens beyond the
        # window is rejected (HTTP 400, the window named); /props reports it unless told not to.
        # window_errors="llama-cpp-python": like llama-cpp-python's own server instead, which never
        # publishes its window, cuts the reply budget to what is left, rejects only a prompt that
        # fills the window, and says so in OpenAI's words (llama_cpp/server/errors.py)
        if window_errors not in WINDOW_ERRORS:
            raise ValueError(f"window_errors must be one of {WINDOW_ERRORS}")
        self.context_window = context_window
        self.report_window = report_window and window_errors == "llama.cpp"
        self.window_errors = window_errors
        self.oversized: list[dict] = []
        self.latency = latency
        self.hang_seconds = hang_seconds  # how long a "timeout" fault sleeps before answering
        self.requests: list[dict] = []
        self.answered = 0  # chat completions the client read whole (see the module docstring)
        self.unread = 0  # chat completions written to a client that died with them unread
        self.answered_ids: list[str] = []  # the call id header of each answered completion, if it had one
        self._awaiting = 0  # completions written whose verdict (read or unread) has not come yet
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0  # requests inside their latency sleep right now
        self.peak_in_flight = 0  # the most at once: whether a client's calls really overlapped
        self._lock = threading.Lock()
        self._scripted: deque[_Fault] = deque()
        self._fault_rate = 0.0
        self._fault_kinds: tuple[str, ...] = ()
        self._rng = random.Random(0)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # ----------------------------------------------------------------- fault scripting
    def fail_next(self, status: int, count: int = 1, retry_after: float | None = None, body: str | None = None) -> None:
        """Answer the next `count` requests with HTTP `status` (optionally a Retry-After header)."""
        with self._lock:
            self._scripted.extend(_Fault(status, retry_after, body) for _ in range(count))

    def drop_next(self, count: int = 1) -> None:
        """Close the connection of the next `count` requests without an answer."""
        with self._lock:
            self._scripted.extend(_Fault(DROP) for _ in range(count))

    def garble_next(self, count: int = 1) -> None:
        """Answer the next `count` requests with HTTP 200 and a JSON body that is not a chat completion."""
        with self._lock:
            self._scripted.extend(_Fault(NOT_CHAT) for _ in range(count))

    def hang_next(self, count: int = 1) -> None:
        """Make the next `count` requests sleep `hang_seconds` before answering (a client timeout)."""
        with self._lock:
            self._scripted.extend(_Fault(0) for _ in range(count))

    def set_fault_rate(self, rate: float, kinds: Sequence[str] = FAULT_KINDS, seed: int = 0) -> None:
        """Fail a random `rate` share of requests with one of `kinds` (deterministic per seed)."""
        unknown = set(kinds) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; choose from {FAULT_KINDS}")
        with self._lock:
            self._fault_rate = rate
            self._fault_kinds = tuple(kinds)
            self._rng = random.Random(seed)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def settle(self, timeout: float = 10.0) -> bool:
        """Wait until every completion written has its verdict (its client read it, or died first);
        False if some still wait after `timeout` seconds (a live client holding an idle connection)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if not self._awaiting:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def _written(self) -> None:
        with self._lock:
            self._awaiting += 1

    def _verdict(self, call_id: str | None, read: bool) -> None:
        with self._lock:
            self._awaiting -= 1
            if read:
                self.answered += 1
                if call_id:
                    self.answered_ids.append(call_id)
            else:
                self.unread += 1

    def _next_fault(self, body: dict) -> _Fault | str | None:
        with self._lock:
            if self._scripted:
                return self._scripted.popleft()
            if self._fault_rate > 0 and self._rng.random() < self._fault_rate:
                kind = self._rng.choice(self._fault_kinds)
                if kind == "429":
                    return _Fault(429, retry_after=0.0)
                if kind == "500":
                    return _Fault(500)
                if kind == "timeout":
                    return _Fault(0)
                if kind == "malformed" and wants_json(body):
                    return "malformed"
                if kind == "drop":
                    return _Fault(DROP)
                if kind == "not_chat":
                    return _Fault(NOT_CHAT)
        return None

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> "FakeLLMServer":
        server = self

        class Handler(_Handler):
            owner = server

        httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd = httpd
        # A per-instance path prefix makes every server's api_base unique, so replies cached by
        # one test (the cache key includes api_base) can never be served to another test.
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}/{self.prefix}/v1"
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "FakeLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- request handling
    def _handle_chat(self, body: dict, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) of the reply; a chat completion is a 200 whose body has choices."""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
        prompt_tokens = sum(count_tokens(message_text(m)) for m in body.get("messages", []))
        window_tokens = sum(len(message_text(m)) // 4 + 4 for m in body.get("messages", []))  # ~ a BPE count
        rejection = self._window_rejection(window_tokens, int(body.get("max_tokens") or 0))
        if rejection is not None:
            with self._lock:
                self.oversized.append(body)
            return 400, {"Content-Type": "application/json"}, json.dumps({"error": rejection}).encode()
        fault = self._next_fault(body)
        if isinstance(fault, _Fault):
            if fault.status == 0:
                time.sleep(self.hang_seconds)
            elif fault.status == DROP:
                return DROP, {}, b""
            elif fault.status == NOT_CHAT:
                return 200, {}, json.dumps({"status": "ok", "note": "a proxy's page, not a completion"}).encode()
            else:
                return _error_response(fault)
        if self.latency:
            with self._lock:
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                time.sleep(self.latency)
            finally:
                with self._lock:
                    self.in_flight -= 1
        content = MALFORMED_CONTENT if fault == "malformed" else self.responder(body)
        completion_tokens = count_tokens(content)
        with self._lock:
            number = len(self.requests)
        payload = {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return 200, {}, json.dumps(payload).encode("utf-8")

    def _window_rejection(self, prompt_tokens: int, max_tokens: int) -> dict | None:
        """The error body of a request beyond the window, or None when it is served."""
        window = self.context_window
        if not window:
            return None
        if self.window_errors == "llama.cpp":
            if prompt_tokens + max_tokens <= window:
                return None
            return {"message": f"Requested tokens ({prompt_tokens + max_tokens}) exceed context window of {window}"}
        if prompt_tokens < window:
            return None
        return {
            "message": LLAMA_CPP_PYTHON_WINDOW_ERROR.format(
                window=window, total=prompt_tokens + max_tokens, prompt=prompt_tokens, completion=max_tokens
            ),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }


def _error_response(fault: _Fault) -> tuple[int, dict[str, str], bytes]:
    headers: dict[str, str] = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = f"{fault.retry_after:g}"
    text = fault.body if fault.body is not None else f"fake server error {fault.status}"
    error = {"error": {"message": text, "type": "fake_error", "code": str(fault.status)}}
    return fault.status, headers, json.dumps(error).encode("utf-8")


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # hanging "timeout" handlers must not block shutdown
    request_queue_size = 128  # 16+ concurrent clients must not overflow the listen backlog

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (timeout) leaves a broken pipe; that is expected here


CALL_ID_HEADER = "x-evolvemem-call-id"  # evolvemem/llm/client.py sends it with every call


class _Handler(BaseHTTPRequestHandler):
    owner: FakeLLMServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # one small response must not wait 40 ms for a delayed ACK
    # a completion written on this connection whose verdict has not come yet: (call id,)
    _pending: tuple[str | None] | None = None

    def handle(self) -> None:
        """Serve the connection's requests, then learn whether its last completion was read."""
        try:
            super().handle()
            if self._pending is not None:
                # the client closes a connection it read everything from with a FIN (recv: b""),
                # one that still held unread data with a reset
                self.connection.settimeout(60)
                self.connection.recv(1)
            self._settle(read=True)
        except (ConnectionResetError, BrokenPipeError):
            self._settle(read=False)
        except OSError:  # a timeout: a live client that kept the connection idle; it had the reply
            self._settle(read=True)

    def parse_request(self) -> bool:
        self._settle(read=True)  # a new request on this connection: the client read the last reply whole
        return super().parse_request()

    def _settle(self, read: bool) -> None:
        if self._pending is not None:
            (call_id,) = self._pending
            self._pending = None
            self.owner._verdict(call_id, read)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {}, b'{"error": {"message": "not found"}}')
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, {}, b'{"error": {"message": "request body is not JSON"}}')
            return
        status, headers, payload = self.owner._handle_chat(body, {k.lower(): v for k, v in self.headers.items()})
        if status == DROP:  # hang up without a word
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if self._peer_gone():  # the client died waiting (a kill): nothing is delivered, nothing counted
            self.close_connection = True
            return
        completion = status == 200 and b'"choices"' in payload
        if completion:  # counted before the write: the client may read it and ask again at once
            self._pending = (self.headers.get(CALL_ID_HEADER),)
            self.owner._written()
        try:
            self._send(status, headers, payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self._settle(read=False)
            self.close_connection = True

    def _peer_gone(self) -> bool:
        """Whether the client closed its end while its request was served (a killed process):
        a waiting client sends nothing, so a readable socket that reads empty means it is gone."""
        import select

        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        window = self.owner.context_window if self.owner.report_window else None
        if self.path.rstrip("/").endswith("/props") and window:
            self._send(200, {}, json.dumps({"default_generation_settings": {"n_ctx": window}}).encode())
        elif self.path.rstrip("/").endswith("/models"):
            self._send(
                200, {}, json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}).encode()
            )
        else:
            self._send(404, {}, b'{"error": {"message": "not found"}}')


@pytest.fixture
def fake_llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    """A running fake server; OPENAI_API_KEY is set to a dummy for the `openai/` provider."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeLLMServer() as server:
        yield server
