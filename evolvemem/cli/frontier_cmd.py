"""`evolve show RUN --frontier`: a `--budgets` run's best config at each budget, in one table.

What a reader needs to pick a budget: per budget, the round whose config is best there (and its
fingerprint), the answerable questions' evidence recall on dev and on the held-out test questions
against the start at the same budget, the mean context size, and retrieval milliseconds when the
run recorded them. The figures come from the run store (loop/frontier.py), as the run wrote them.
"""

from __future__ import annotations

from rich.table import Table

from evolvemem.cli.ui import UI, JsonResult, fmt
from evolvemem.errors import EvolveMemError
from evolvemem.loop.frontier import FrontierPoint, frontier_points
from evolvemem.loop.spec import RunSpec


def held_text(point: FrontierPoint) -> str:
    """The held-out gain of a point over the start at its budget, with its interval."""
    if point.held_out is None:
        return "-"
    stat = point.held_out.groups["main"]
    return f"{stat.diff:+.3f} [{stat.ci_low:+.3f}, {stat.ci_high:+.3f}]"


def show_frontier(ui: UI, run: str) -> JsonResult:
    """Print a frontier run's points; one error line for a run without `--budgets`."""
    from evolvemem.session import open_run

    with open_run(run) as store:
        stored = store.manifest().get("spec")
        if not isinstance(stored, dict) or len(stored.get("budgets") or []) < 2:
            raise EvolveMemError(f"{run} scored one token budget; --frontier needs a run made with --budgets")
        spec = RunSpec.from_dict(stored)
        points = frontier_points(store, spec, store.best_round())
    table = Table(
        title=f"{run}: the best config at each budget (recall of the answerable questions' evidence)",
        title_justify="left",
    )
    with_ms = any(p.ms is not None for p in points)
    columns = ["budget", "best round", "config", "dev start", "dev best", "test start", "test best"]
    columns += ["test best − start [95% CI]", "context tokens", *(["ms"] if with_ms else [])]
    for column in columns:
        table.add_column(column)
    for p in points:
        table.add_row(
            f"{p.tokens}{' (primary)' if p.primary else ''}",
            str(p.best_round),
            p.fingerprint or "-",
            fmt(p.dev_start_recall),
            fmt(p.dev_recall),
            fmt(p.test_start_recall),
            fmt(p.test_recall),
            held_text(p),
            fmt(p.test_context_tokens if p.test_context_tokens is not None else p.dev_context_tokens, 0),
            *([fmt(p.ms, 2)] if with_ms else []),
        )
    ui.print(table)
    ui.info(
        "the primary budget's best is the loop's own; each other budget keeps the last round the guard's "
        "paired test found significantly better at that budget (docs: guides/frontier.md)"
    )
    return {"run_dir": run, "budgets": list(spec.budgets), "points": [p.as_dict() for p in points]}
