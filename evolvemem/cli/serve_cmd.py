"""`evolve serve`, `evolve mcp`, `evolve traces export` and `evolve forget-audit`: parse, open the
memory, hand over.

The work is in evolvemem/serving/; this module only checks options, prints the one-line banners
and runs uvicorn or the MCP stdio loop.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from evolvemem.cli.ui import UI, JsonResult
from evolvemem.errors import EvolveMemError

if TYPE_CHECKING:
    from evolvemem.cli.options import ServedModels, ServerLimits
    from evolvemem.serving.memory import Memory
    from evolvemem.session import LocalModels

SERVE_EXTRA = 'pip install -e ".[serve]"'


def _need_serve_extra() -> None:
    missing = []
    for module in ("fastapi", "uvicorn", "mcp"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise EvolveMemError(f"serving needs {', '.join(missing)}: {SERVE_EXTRA}")


def open_memory(
    ui: UI, config: str, store: str, models: ServedModels, local_models: LocalModels, budget: int | None = None
) -> Memory:
    from evolvemem.serving.memory import Memory

    memory = Memory.open(store, config, models=models.settings(), local_models=local_models, budget=budget)
    for warning in memory.config_warnings:
        ui.warn(warning)
    return memory


def run_server(
    ui: UI,
    *,
    config: str,
    store: str,
    host: str,
    port: int,
    keys_file: str | None,
    models: ServedModels,
    local_models: LocalModels,
    limits: ServerLimits,
    reload_seconds: float,
    mcp: bool,
    budget: int | None = None,
) -> None:
    _need_serve_extra()
    import uvicorn

    from evolvemem.serving.http_app import ConfigWatcher, create_app
    from evolvemem.serving.http_guards import guarded_protocol
    from evolvemem.serving.keys import KEYS_ENV, check_exposure, keys_from

    keys = keys_from(keys_file)
    check_exposure(keys, host)
    memory = open_memory(ui, config, store, models, local_models, budget)
    try:
        watcher = ConfigWatcher(memory, memory.config_spec or config, reload_seconds)
        app = create_app(
            memory,
            keys,
            max_body_bytes=limits.max_body,
            max_in_flight=limits.max_in_flight,
            read_timeout=limits.read_timeout,
            watcher=watcher,
            with_mcp=mcp,
            host=host,
        )
        access = (
            f"{len(keys.digests)} API key(s), one namespace each"
            if not keys.open
            else f"no API keys ({KEYS_ENV} unset): one open namespace, 127.0.0.1 only"
        )
        ui.info(
            f"serving {store} with config {memory.config_hash} ({memory.config_source}) on "
            f"http://{host}:{port} — {access}; docs at /docs" + ("; MCP at /mcp" if mcp else "")
        )
        uvicorn.run(
            app,
            host=host,
            port=port,
            http=guarded_protocol(limits.read_timeout),
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
        )
    finally:
        memory.close()


def run_mcp_stdio(
    ui: UI, *, config: str, store: str, models: ServedModels, local_models: LocalModels, budget: int | None = None
) -> None:
    _need_serve_extra()
    import anyio

    from evolvemem.serving.mcp_stdio import serve_stdio
    from evolvemem.serving.mcp_tools import build_mcp_server

    memory = open_memory(ui, config, store, models, local_models, budget)
    try:
        print(
            f"evolvemem MCP over stdio: {store}, config {memory.config_hash} ({memory.config_source})",
            file=sys.stderr,
            flush=True,
        )
        anyio.run(serve_stdio, build_mcp_server(memory))
    finally:
        memory.close()


def export_traces(ui: UI, *, store: str, out: str, namespace: str | None, users: list[str] | None) -> JsonResult:
    """Write the store's conversations and traced queries in the custom benchmark format."""
    from evolvemem.serving.memory import DEFAULT_NAMESPACE, Memory
    from evolvemem.serving.traces import export_dataset

    if not Path(store).is_file():
        raise EvolveMemError(f"{store}: no memory store there")
    with Memory.open(store) as memory:
        spaces = [namespace] if namespace else memory.store.namespaces()
        if not spaces:
            spaces = [DEFAULT_NAMESPACE]
        if len(spaces) > 1:
            raise EvolveMemError(
                f"{store} holds {len(spaces)} namespaces (one per API key); pick one with "
                f"--namespace ({', '.join(spaces)})"
            )
        chosen = users or memory.users(spaces[0])
        document = export_dataset(memory, spaces[0], chosen, with_traces=True)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    summary = {
        "path": str(path),
        "namespace": spaces[0],
        "conversations": len(document["conversations"]),
        "questions": len(document["questions"]),
    }
    ui.info(
        f"wrote {summary['conversations']} conversations and {summary['questions']} traced queries to {path} "
        "(custom format; label the answers, then evolve run --benchmark custom --data ...)"
    )
    return summary


def forget_audit(ui: UI, *, store: str, text: str) -> JsonResult:
    """Print every file (and store column) of a served memory where `text` is still found."""
    from evolvemem.serving.forget_audit import audit

    report = audit(store, text)
    for finding in report.findings:
        ui.info(f"{finding.count:>6}  {finding.where}")
    tables = "and its tables" if report.tables_scanned else "(its tables not read: the store is open in a server)"
    ui.info(f"{report.found} occurrence(s) in {report.files_scanned} files of {store}, its WAL and the cache {tables}")
    return {
        "found": report.found,
        "files_scanned": report.files_scanned,
        "tables_scanned": report.tables_scanned,
        "findings": [{"where": f.where, "count": f.count} for f in report.findings],
    }
