"""`evolve run`: the AutoResearch loop from the command line, with resume."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from evolvemem.cli.common import announce_models, command_line, default_run_dir
from evolvemem.cli.ui import UI, fmt
from evolvemem.errors import EvolveMemError


def resolve_init(ui: UI, init: str) -> Any:
    """A preset, a config file, or a run directory (its best config)."""
    from evolvemem.space.config import load_config

    path = Path(init)
    if path.is_dir():
        best = path / "best_config.toml"
        if not best.is_file():
            raise EvolveMemError(f"{path}: run has no best_config.toml yet (finish or resume it first)")
        init = str(best)
    config, clamps = load_config(init)
    for clamp in clamps:
        ui.warn(str(clamp))
    return config


def changes_text(changes: list[dict], limit: int = 4) -> str:
    parts = []
    for c in changes[:limit]:
        scope = "" if c.get("scope", "global") == "global" else f"[{c['scope']}] "
        parts.append(f"{scope}{c['field']}: {c['old']}→{c['new']}")
    if len(changes) > limit:
        parts.append(f"+{len(changes) - limit} more")
    from rich.markup import escape

    return escape("; ".join(parts)) or "-"


def round_line(info: dict) -> str:
    dev = info["dev"]
    return (f"round {info['round']}: dev {info['score']:.4f} (main {fmt(dev.get('main'))}, adversarial "
            f"{fmt(dev.get('adversarial'))}) → {info['decision']}: {changes_text(info['changes'])}")


def rounds_table(rounds: list[dict], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("round", "dev objective", "Δ", "main", "adv.", "evid. recall", "decision", "changes for next round",
                "calls", "time"):
        table.add_column(col, overflow="fold" if col.startswith("changes") else None,
                         no_wrap=not col.startswith("changes"))
    prev = None
    for info in rounds:
        dev = info["dev"]
        delta = "" if prev is None else f"{info['score'] - prev:+.4f}"
        usage = info.get("usage") or {}
        table.add_row(str(info["round"]), f"{info['score']:.4f}", delta, fmt(dev.get("main")),
                      fmt(dev.get("adversarial")), fmt(dev.get("evidence_recall")), info["decision"],
                      changes_text(info["changes"], limit=6), str(usage.get("calls") or 0),
                      f"{info.get('seconds', 0):.1f}s")
        prev = info["score"]
    return table


def run_loop(ui: UI, spec: Any, run_dir: Path, resume: bool, init_config: Any = None) -> dict:
    from evolvemem.cli.eval_cmd import build_workspace
    from evolvemem.data.loader import load_benchmark
    from evolvemem.loop.runner import EvolutionRunner, Hooks
    from evolvemem.loop.usage import usage_rows
    from evolvemem.roles.factory import ModelSettings
    from evolvemem.space.config import parse_config
    from evolvemem.store import RunStore

    with RunStore(run_dir) as store:
        manifest = store.manifest()
        if resume:
            if "spec" not in manifest:
                raise EvolveMemError(f"{run_dir}: not an evolve run (no spec in its manifest)")
            init_config = parse_config(manifest["init_config"], source=f"{run_dir} manifest")[0]
            # a resume with more rounds extends a finished run
            store.con.execute("DELETE FROM decisions WHERE decision = 'stopped' AND round < ?", [spec.rounds])
        dataset = load_benchmark(spec.benchmark, spec.data)
        if resume and manifest.get("data_hash") and manifest["data_hash"] != dataset.content_hash:
            raise EvolveMemError(f"{run_dir}: the data file changed since the run started (hash "
                                 f"{dataset.content_hash} ≠ {manifest['data_hash']})")
        settings = ModelSettings(**spec.models)
        announce_models(ui, settings)
        if not resume:
            from evolvemem import __version__
            from evolvemem.data.split import split_dataset
            store.set_manifest({
                "kind": "run", "spec": spec.as_dict(), "init_config": init_config.model_dump(),
                "benchmark": spec.benchmark, "data_source": dataset.source, "data_hash": dataset.content_hash,
                "models": settings.as_dict(), "diagnoser": spec.diagnoser, "seed": spec.seed,
                "version": __version__, "command": command_line(),
                "dev_conversations": sorted(split_dataset(dataset, "dev").conversations),
                "test_conversations": sorted(split_dataset(dataset, "test").conversations),
            })
        workspace = build_workspace(ui, dataset, settings, cache_enabled=spec.cache_enabled,
                                    embedding_model=spec.embedding_model)
        dataset = workspace.dataset
        store.insert("usage", usage_rows({}, workspace.roles.usage_snapshot(), -1, "setup"))  # LLM extraction, if any
        if not store.query("SELECT 1 FROM memories LIMIT 1"):
            store.insert("memories", workspace.memory_rows())
        else:
            restored = workspace.restore_added(store.query("SELECT * FROM memories WHERE added_round > 0"))
            if restored:
                ui.info(f"[dim]restored {restored} re-extracted memories[/dim]")
        ui.info(f"[bold]Run[/bold] {run_dir}  ·  diagnoser {spec.diagnoser}  ·  rounds 0..{spec.rounds}  ·  "
                f"objective dev {spec.objective} F1")
        with ui.progress() as bars:
            counts: dict[str, list[int]] = {}

            def on_record(label: str, record: dict, total: int) -> None:
                c = counts.setdefault(label, [0, 0, 0])
                c[0] += 1
                c[1] += int(record.get("cache_hits") or 0)
                c[2] += int(bool(record.get("failed")))
                bars.update(label, c[0], total, extra=f"cache hits {c[1]} · failed {c[2]}")

            hooks = Hooks(stage=bars.stage, record=on_record,
                          round_done=lambda info: ui.info(round_line(info)), message=ui.warn)
            runner = EvolutionRunner(spec, store, workspace, dataset, init_config, hooks)
            try:
                result = runner.run()
            except KeyboardInterrupt:
                ui.err.print(f"stopped: every finished question is saved; continue with  evolve run --resume {run_dir}")
                raise
    ui.print(rounds_table(result.rounds, f"{spec.benchmark} · {spec.diagnoser} · {run_dir.name}"))
    _print_dev_test(ui, result)
    ui.info(f"best round {result.best_round}; best config: {result.best_config_path}")
    return {
        "run_dir": str(run_dir),
        "rounds": [{"round": r["round"], "dev_score": r["score"], "decision": r["decision"],
                    "changes": r["changes"]} for r in result.rounds],
        "best_round": result.best_round, "best_config_path": str(result.best_config_path),
        "dev": result.dev, "test": result.test,
    }


def _print_dev_test(ui: UI, result: Any) -> None:
    table = Table(title="start vs best (best chosen on dev; test scored once)", title_justify="left")
    for col in ("split", "config", "main F1", "adversarial F1", "all F1", "evidence recall", "n"):
        table.add_column(col)
    for split_name, block in (("dev", result.dev), ("test", result.test)):
        for which in ("start", "best"):
            s = block.get(which) or {}
            if s:
                table.add_row(split_name, which, fmt(s.get("main_f1")), fmt(s.get("adversarial_f1")),
                              fmt(s.get("all_f1")), fmt(s.get("evidence_recall")), str(s.get("n")))
    ui.print(table)


def new_run_dir(out: str | None, benchmark: str, diagnoser: str) -> Path:
    run_dir = Path(out) if out else default_run_dir(f"run-{diagnoser}", benchmark)
    if (run_dir / "run.duckdb").exists():
        raise EvolveMemError(f"{run_dir} already holds a run; use --resume {run_dir} to continue it or pick another --out")
    return run_dir
