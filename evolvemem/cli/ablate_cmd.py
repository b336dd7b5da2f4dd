"""`evolve ablate RUN`: the Δ of switching each enabled mechanism of the best config off, and the
retrieval ms a question each mechanism costs (loop/ablate.py)."""

from __future__ import annotations

from rich.table import Table

from evolvemem.cli.ui import UI, fmt, JsonResult


def run_ablate(ui: UI, run: str, split: str) -> JsonResult:
    from evolvemem.session import Session

    session, config, best_round = Session.open_ablation(run, split, reporter=ui)
    with session, ui.progress() as bars:
        done: list[str] = []

        def on_variant(row: JsonResult) -> None:
            done.append(row["mechanism"])
            bars.update("ablation", len(done), len(done), extra=row["mechanism"])

        rows = session.ablate(config, split, best_round, on_variant)
    spec = session.run_spec
    evidence_run = spec.objective == "evidence"  # contexts only: no answers, no F1
    cut = f", {spec.budget.describe()}" if spec.budget else ""
    table = Table(
        title=f"ablation of the best config (round {best_round}) on {split}{cut}: each mechanism off in turn",
        title_justify="left",
    )
    columns = (
        ("mechanism", "switched off", "recall (answerable)", "Δ recall", "ms", "its ms")
        if evidence_run
        else (
            "mechanism",
            "switched off",
            "all F1",
            "Δ all",
            "main F1",
            "Δ main",
            "adv. F1",
            "evid. recall",
            "Δ recall",
            "ms",
            "its ms",
        )
    )
    for col in columns:
        table.add_column(col)
    for r in rows:

        def delta(key: str, r: JsonResult = r) -> str:
            return "" if r[key] is None or r["mechanism"] == "full config" else f"{r[key]:+.4f}"

        ms = (fmt(r["retrieval_ms"], 2), "" if r["lever_ms"] is None else f"{r['lever_ms']:+.2f}")

        if evidence_run:
            table.add_row(
                r["mechanism"], r["what"], fmt(r["main_evidence_recall"], 4), delta("delta_main_evidence_recall"), *ms
            )
            continue
        table.add_row(
            r["mechanism"],
            r["what"],
            fmt(r["all_f1"], 4),
            delta("delta_all_f1"),
            fmt(r["main_f1"], 4),
            delta("delta_main_f1"),
            fmt(r["adversarial_f1"], 4),
            fmt(r["evidence_recall"], 4),
            delta("delta_evidence_recall"),
            *ms,
        )
    ui.print(table)
    if len(rows) == 1:
        ui.info("the best config uses none of the switchable mechanisms")
    elif any(r["lever_ms"] is not None for r in rows):
        ui.info(
            "ms: retrieval ms a question beyond the query embedding (best of 3 passes on up to 60 questions); "
            "its ms: what the mechanism costs (the full config's ms minus the row's, at their shared BM25 scale)"
        )
    return {"run_dir": run, "split": split, "best_round": best_round, "rows": rows}
