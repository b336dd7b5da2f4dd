"""`evolve ablate RUN`: the Δ of switching each enabled mechanism of the best config off."""
from __future__ import annotations

from pathlib import Path

from rich.table import Table

from evolvemem.cli.ui import UI, fmt
from evolvemem.errors import EvolveMemError


def run_ablate(ui: UI, run: str, split: str) -> dict:
    from evolvemem.cli.eval_cmd import build_workspace
    from evolvemem.data.loader import load_benchmark
    from evolvemem.data.split import SPLITS, split_dataset
    from evolvemem.loop.ablate import run_ablation
    from evolvemem.loop.spec import RunSpec
    from evolvemem.roles.factory import ModelSettings
    from evolvemem.space.config import load_config
    from evolvemem.store import RunStore

    run_dir = Path(run)
    best_path = run_dir / "best_config.toml"
    if not best_path.is_file():
        raise EvolveMemError(f"{run}: no best_config.toml (is it a finished evolve run?)")
    if split not in SPLITS:  # checked before the (slow) workspace build
        raise EvolveMemError(f"--split must be one of {', '.join(SPLITS)}, not {split!r}")
    with RunStore(run_dir) as store:
        manifest = store.manifest()
        if "spec" not in manifest:
            raise EvolveMemError(f"{run}: not an evolve run")
        spec = RunSpec.from_dict(manifest["spec"])
        best_round = store.query("SELECT min(round) AS r FROM rounds WHERE phase = 'test_best'")[0]["r"] or 0
        config = load_config(str(best_path))[0]
        dataset = load_benchmark(spec.benchmark, spec.data)
        workspace = build_workspace(ui, dataset, ModelSettings(**spec.models), cache_enabled=spec.cache_enabled,
                                    embedding_model=spec.embedding_model)
        questions = split_dataset(workspace.dataset, split).questions
        with ui.progress() as bars:
            done: list[str] = []

            def on_variant(row: dict) -> None:
                done.append(row["mechanism"])
                bars.update("ablation", len(done), len(done), extra=row["mechanism"])
            rows = run_ablation(workspace, config, questions, store, best_round, spec.protocol,
                                spec.concurrency, on_variant)
    table = Table(title=f"ablation of the best config (round {best_round}) on {split}: each mechanism off in turn",
                  title_justify="left")
    for col in ("mechanism", "switched off", "all F1", "Δ all", "main F1", "Δ main", "adv. F1", "evid. recall", "Δ recall"):
        table.add_column(col)
    for r in rows:
        delta = (lambda k: "" if r[k] is None or r["mechanism"] == "full config" else f"{r[k]:+.4f}")
        table.add_row(r["mechanism"], r["what"], fmt(r["all_f1"], 4), delta("delta_all_f1"), fmt(r["main_f1"], 4),
                      delta("delta_main_f1"), fmt(r["adversarial_f1"], 4), fmt(r["evidence_recall"], 4),
                      delta("delta_evidence_recall"))
    ui.print(table)
    if len(rows) == 1:
        ui.info("the best config uses none of the switchable mechanisms")
    return {"run_dir": run, "split": split, "best_round": best_round, "rows": rows}
