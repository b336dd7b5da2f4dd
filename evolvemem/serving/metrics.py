"""Request metrics of the HTTP API in the Prometheus text format (`GET /metrics`).

Counted per route and status, with a latency histogram per route; the memory adds gauges of its
own (users loaded, memories indexed, the config's hash).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import defaultdict
from typing import Callable

from evolvemem.serving.http_guards import ASGIApp, HTTPMiddleware, Message, Receive, Scope, Send

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
ROUTES = ("/v1/memories", "/v1/search", "/v1/context", "/v1/answer", "/health", "/metrics")


def route_label(path: str) -> str:
    if path in ROUTES:
        return path
    if path.startswith("/v1/users/"):
        return "/v1/users/{user}"
    if path.startswith("/mcp"):
        return "/mcp"
    return "other"


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.histograms: dict[str, list[int]] = defaultdict(lambda: [0] * (len(BUCKETS) + 1))
        self.seconds: dict[str, float] = defaultdict(float)

    def observe(self, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(route, status)] += 1
            self.histograms[route][bisect.bisect_left(BUCKETS, seconds)] += 1
            self.seconds[route] += seconds

    def render(self, gauges: dict[str, float], info: dict[str, str]) -> str:
        lines = ["# TYPE evolvemem_requests_total counter"]
        with self._lock:
            for (route, status), count in sorted(self.requests.items()):
                lines.append(f'evolvemem_requests_total{{route="{route}",status="{status}"}} {count}')
            lines.append("# TYPE evolvemem_request_seconds histogram")
            for route, counts in sorted(self.histograms.items()):
                running = 0
                for bound, count in zip((*BUCKETS, float("inf")), counts):
                    running += count
                    le = "+Inf" if bound == float("inf") else f"{bound:g}"
                    lines.append(f'evolvemem_request_seconds_bucket{{route="{route}",le="{le}"}} {running}')
                lines.append(f'evolvemem_request_seconds_sum{{route="{route}"}} {self.seconds[route]:.6f}')
                lines.append(f'evolvemem_request_seconds_count{{route="{route}"}} {running}')
        for name, value in gauges.items():
            lines += [f"# TYPE evolvemem_{name} gauge", f"evolvemem_{name} {value:g}"]
        labels = ",".join(f'{k}="{v}"' for k, v in info.items())
        lines += ["# TYPE evolvemem_info gauge", f"evolvemem_info{{{labels}}} 1"]
        return "\n".join(lines) + "\n"


class MetricsMiddleware(HTTPMiddleware):
    def __init__(self, app: ASGIApp, metrics: Metrics, clock: Callable[[], float] = time.perf_counter):
        super().__init__(app)
        self.metrics = metrics
        self.clock = clock

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = self.clock()
        status = 500

        async def record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            self.metrics.observe(route_label(scope.get("path", "")), status, self.clock() - started)
