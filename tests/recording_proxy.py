"""A transparent HTTP proxy on 127.0.0.1 that forwards every request to a real server and keeps
each chat request with the reply it got, so real-model tests can say which prompts reached the
model and what it answered, without changing a byte of either."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass


@dataclass
class Exchange:
    body: dict
    status: int
    reply: dict | None

    @property
    def prompt(self) -> str:
        return " ".join(str(m.get("content", "")) for m in self.body.get("messages", []))

    @property
    def content(self) -> str:
        try:
            return str(self.reply["choices"][0]["message"]["content"]) if self.reply else ""
        except (KeyError, IndexError, TypeError):
            return ""


class RecordingProxy:
    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")  # e.g. http://127.0.0.1:PORT/v1
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _forward(self, method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                data = self.rfile.read(length) if length else None
                path = self.path[len("/v1") :] if self.path.startswith("/v1") else self.path
                request = urllib.request.Request(
                    owner.upstream + path, data=data, method=method, headers={"content-type": "application/json"}
                )
                try:
                    with urllib.request.urlopen(request, timeout=600) as reply:
                        status, payload = reply.status, reply.read()
                except urllib.error.HTTPError as exc:
                    status, payload = exc.code, exc.read()
                if data and path.endswith("/chat/completions"):
                    try:
                        parsed = json.loads(payload)
                    except ValueError:
                        parsed = None
                    with owner._lock:
                        owner.exchanges.append(Exchange(json.loads(data), status, parsed))
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> "RecordingProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(self) -> list[Exchange]:
        with self._lock:
            taken, self.exchanges = self.exchanges, []
        return taken
