"""`evolve eval`: score one retrieval config and write every question's record to DuckDB."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from evolvemem.cli.common import (
    announce_models,
    command_line,
    default_run_dir,
    load_config_reporting,
    load_split,
    reclassify_if_asked,
)
from evolvemem.cli.ui import UI, category_table


def build_workspace(ui: UI, dataset: Any, settings: Any, *, cache_enabled: bool, embedding_model: str | None) -> Any:
    """Roles for `settings`, the questions re-typed if --classify-model asks, then memories and
    indexes: everything every command that answers questions needs first."""
    from evolvemem.roles.factory import build_roles
    from evolvemem.workspace import Workspace

    roles = build_roles(settings, cache_enabled=cache_enabled)
    dataset = reclassify_if_asked(ui, dataset, roles)
    workspace = Workspace(dataset, roles, embedding_model)
    with ui.progress() as bars:
        stats = workspace.build(progress=bars.stage)
    ui.info(f"[dim]{stats.memories} memories in {len(dataset.conversations)} conversations "
            f"({stats.conversations_from_cache} from cache); extraction {stats.extraction_seconds:.1f}s, "
            f"indexing {stats.index_seconds:.1f}s[/dim]")
    return workspace


def run_eval(ui: UI, *, benchmark: str, data: str | None, config_name: str, settings: Any, split: str,
             out: str | None, protocol: str, concurrency: int, embedding_model: str | None,
             cache_enabled: bool, kind: str = "eval", source_run: str | None = None) -> dict:
    from evolvemem.evaluate import evaluate
    from evolvemem.loop.usage import usage_rows
    from evolvemem.store import RunStore

    config = load_config_reporting(ui, config_name)
    full, dataset = load_split(benchmark, data, split)
    announce_models(ui, settings)
    run_dir = Path(out) if out else default_run_dir("eval", benchmark)
    with RunStore(run_dir) as store:
        _check_resumable(ui, store, run_dir, config, full.content_hash, split, protocol)
        store.set_manifest({
            "kind": kind, "source_run": source_run, "benchmark": benchmark, "data_source": full.source, "data_hash": full.content_hash,
            "split": split, "models": settings.as_dict(), "adversarial_protocol": protocol,
            "config_source": config_name, "command": command_line(),
            "embedding_model": embedding_model or "default",
        })
        workspace = build_workspace(ui, dataset, settings, cache_enabled=cache_enabled, embedding_model=embedding_model)
        roles, dataset = workspace.roles, workspace.dataset
        setup_usage = roles.usage_snapshot()  # LLM extraction, when a model extracts
        store.insert("usage", usage_rows({}, setup_usage, -1, "setup"))
        if not store.query("SELECT 1 FROM memories LIMIT 1"):
            store.insert("memories", workspace.memory_rows())
        store.begin_round(0, "eval", config)
        total = len(dataset.questions)
        counts = {"done": 0, "failed": 0, "hits": 0}
        with ui.progress() as bars:
            def on_record(record: dict) -> None:
                counts["done"] += 1
                counts["failed"] += int(bool(record.get("failed")))
                counts["hits"] += int(record.get("cache_hits") or 0)
                bars.update("answer", counts["done"], total,
                            extra=f"cache hits {counts['hits']} · failed {counts['failed']}")
            outcome = evaluate(workspace, config, dataset.questions, store=store, round_no=0, phase="eval",
                               concurrency=concurrency, protocol=protocol, on_record=on_record,
                               on_stage=bars.stage)
        store.insert("usage", usage_rows(setup_usage, roles.usage_snapshot(), 0, "eval"))
        store.finish_round(0, "eval", outcome.summary, outcome.wall_seconds)
        (run_dir / "config.toml").write_text(_config_toml(config, config_name), encoding="utf-8")
    label = "" if protocol == "official" else " [adversarial scored with the EvolveMem paper protocol]"
    ui.print(category_table(outcome.summary, f"{benchmark} ({split}) · config {config_name}{label}"))
    ui.info(f"records: {run_dir / 'run.duckdb'}  ({outcome.wall_seconds:.1f}s)")
    return {"run_dir": str(run_dir), "protocol": protocol, "overall": _overall(outcome.summary),
            "by_category": outcome.summary["by_category"]}


def _check_resumable(ui: UI, store: Any, run_dir: Path, config: Any, data_hash: str, split: str,
                     protocol: str) -> None:
    """A second eval into the same directory resumes the first (its failed questions are asked
    again); it must therefore score the same config on the same questions in the same way."""
    from evolvemem.errors import EvolveMemError

    existing = store.round_row(0, "eval")
    if existing is None:
        return
    manifest = store.manifest()
    differences = [name for name, old, new in (
        ("config", existing["config_fingerprint"], config.fingerprint()),
        ("data", manifest.get("data_hash"), data_hash),
        ("split", manifest.get("split"), split),
        ("adversarial protocol", manifest.get("adversarial_protocol"), protocol),
    ) if old != new]
    if differences:
        raise EvolveMemError(f"{run_dir} holds an eval with another {', '.join(differences)}; "
                             "repeat its options to resume it, or pick another --out")
    done = store.query("SELECT count(*) AS n FROM question_records WHERE round = 0 AND phase = 'eval' AND NOT failed")
    ui.info(f"[dim]resuming {run_dir}: {done[0]['n']} questions already answered; failed ones are asked again[/dim]")


def _overall(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "by_category"}


def _config_toml(config: Any, source: str) -> str:
    from evolvemem.space.config import config_to_toml

    return config_to_toml(config, header=f"evolvemem config (from {source})")
