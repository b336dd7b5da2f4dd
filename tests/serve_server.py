"""A real `evolve serve` process on 127.0.0.1 for the serving tests (and benchmarks/serve_load.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServeProcess:
    """`evolve serve --store STORE --config CONFIG` in a subprocess; stderr goes to `log_path`."""

    def __init__(
        self,
        store: Path,
        config: str = "default",
        *,
        keys: list[str] | None = None,
        extra: list[str] | None = None,
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path or store.with_suffix(".log")
        environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        environment.pop("EVOLVEMEM_API_KEYS", None)
        if keys:
            environment["EVOLVEMEM_API_KEYS"] = ",".join(keys)
        command = [
            sys.executable,
            "-c",
            "from evolvemem.cli.main import app; app()",
            "serve",
            "--store",
            str(store),
            "--config",
            config,
            "--port",
            str(self.port),
            *(extra or []),
        ]
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=environment)

    def wait_ready(self, timeout: float = 120.0) -> "ServeProcess":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"evolve serve exited {self.proc.returncode}: {self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"evolve serve did not start in {timeout:.0f}s: {self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()

    def __enter__(self) -> "ServeProcess":
        return self.wait_ready()

    def __exit__(self, *exc: object) -> None:
        self.stop()
