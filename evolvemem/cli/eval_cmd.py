"""`evolve eval` and `evolve transfer`: score one retrieval config and render its table."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING

from evolvemem.cli.common import default_run_dir
from evolvemem.contracts.records import RIGHT_F1
from evolvemem.contracts.vocab import ContextMode, Metric
from evolvemem.cli.ui import (
    UI,
    category_table,
    full_wrong_text,
    reader_split_table,
    paired_table,
    report_failures,
    report_oversized,
    JsonResult,
)
from evolvemem.space.budget import TokenBudget

if TYPE_CHECKING:
    from evolvemem.cli.log_progress import LogBars
    from evolvemem.cli.ui import Bars
    from evolvemem.contracts.records import QuestionRecord
    from evolvemem.loop.paired import Comparison
    from evolvemem.scoring.aggregate import EvaluationScores
    from evolvemem.scoring.judge_summary import JudgeTally
    from evolvemem.session import LocalModels, ModelSettings
    from evolvemem.space.config import RetrievalConfig
    from evolvemem.store.rows import ReaderSplitCounts


def run_eval(
    ui: UI,
    *,
    benchmark: str,
    data: str | None,
    config_name: str,
    settings: ModelSettings,
    split: str,
    out: str | None,
    protocol: str,
    concurrency: int,
    local_models: LocalModels,
    cache_enabled: bool,
    kind: str = "eval",
    source_run: str | None = None,
    baseline: tuple[str, RetrievalConfig] | None = None,
    context_tokens: int | None = None,
    context: ContextMode = ContextMode.RETRIEVED,
    metric: str = "f1",
    budget: int | None = None,
) -> JsonResult:
    """Score one config; with `baseline` (label, config) the same questions again with it, and the
    paired difference (evolve transfer: the evolved config against the run's start on the target).
    An oracle `context` answers from the gold evidence (answering/oracle.py)."""
    from evolvemem.session import GuardSettings, Session, small_transfer_warning
    from evolvemem.session.setup import check_metric

    chosen_metric = check_metric(metric, settings)  # before any work: --metric judge needs its model
    config = _config_at_budget(ui, config_name, budget, context_tokens)
    run_dir = Path(out) if out else default_run_dir(kind, benchmark)
    with Session.open_eval(
        run_dir=run_dir,
        benchmark=benchmark,
        data=data,
        split=split,
        config=config,
        config_source=config_name,
        settings=settings,
        protocol=protocol,
        concurrency=concurrency,
        local_models=local_models,
        cache_enabled=cache_enabled,
        kind=kind,
        source_run=source_run,
        reporter=ui,
        context=context,
        metric=chosen_metric.value,
    ) as session:
        if baseline and (too_few := small_transfer_warning(session.dataset, GuardSettings().alpha)):
            ui.warn(too_few)
        with ui.progress() as bars:
            on_record = _answer_counter(bars, len(session.eval_questions(context)[0]))
            result = session.evaluate_once(config, config_name, on_record, bars.stage, context)
            compared = session.compare_with_baseline(baseline[1]) if baseline is not None else None
        causes = session.failure_causes()
        oversized = session.oversized_replies()
        reader = session.eval_reader_split()
        tally = session.judge_tally()
    summary = result.summary
    _print_scores(ui, summary, benchmark, split, config_name, protocol, config.budget)
    _print_reader(ui, context, result.skipped, reader)
    judged = _print_judge(ui, tally, settings.for_role("judge"))
    ui.result(f"records: {run_dir / 'run.duckdb'}  ({result.wall_seconds:.1f}s)")
    out_baseline = _baseline_comparison(ui, baseline[0], config_name, *compared) if baseline and compared else None
    report_failures(ui, causes)
    report_oversized(ui, oversized)
    _judge_outcome(ui, tally, chosen_metric)
    return {
        "run_dir": str(run_dir),
        "protocol": protocol,
        "overall": {k: v for k, v in summary.as_json().items() if k != "by_category"},
        "by_category": summary.by_category_json(),
        "baseline": out_baseline,
        "context": str(context),
        "skipped": result.skipped,
        "reader_split": reader.as_dict() if reader is not None else None,
        "metric": chosen_metric.value,
        "judge": judged,
    }


def _config_at_budget(ui: UI, config_name: str, budget: int | None, context_tokens: int | None) -> RetrievalConfig:
    """The config to score: a run directory's best carries the run's budget (`budget`: the run's point
    at that budget); `--context-tokens` replaces it for this command."""
    from evolvemem.session import resolve_config

    config = resolve_config(ui, config_name, budget)
    return config if context_tokens is None else config.with_budget(TokenBudget(context_tokens))


def _print_reader(ui: UI, context: ContextMode, skipped: int, reader: ReaderSplitCounts | None) -> None:
    """What an oracle mode handed the reader, and the reader failure split when a model answered."""
    if context is not ContextMode.RETRIEVED:
        handed = "the gold evidence turns" + (
            ", topped up to the budget" if context is ContextMode.ORACLE_DISTRACTORS else ""
        )
        ui.result(f"context {context}: the reader was handed {handed}; {skipped} questions without any skipped")
    if reader is not None:
        ui.print(reader_split_table(reader, "reader split"))
        ui.info(f"right = the judge's verdict, else F1 ≥ {RIGHT_F1}; {full_wrong_text(reader)}")


def _print_judge(ui: UI, tally: JudgeTally | None, model: str) -> JsonResult | None:
    """Judge accuracy beside F1, with the note that it is our judge (None: no judge configured)."""
    from evolvemem.scoring.judge import judge_version
    from evolvemem.scoring.judge_summary import honesty_note, judge_line

    if tally is None:
        return None
    ui.result(judge_line(tally, model))
    return {**tally.as_dict(), "model": model, "version": judge_version(model), "note": honesty_note(model)}


def _judge_outcome(ui: UI, tally: JudgeTally | None, metric: Metric) -> None:
    """The one warning line for answers without a verdict; with --metric judge, an error (exit != 0)
    when no answer got one (the records stay, and the answers' calls are in the reply cache)."""
    from evolvemem.errors import EvolveMemError
    from evolvemem.scoring.judge_summary import unjudged_warning

    if tally is None:
        return
    if metric is Metric.JUDGE and tally.answered and not tally.judged:
        raise EvolveMemError(
            f"--metric judge: the judge gave no verdict on any of the {tally.answered} answers "
            "(every reply malformed or every call failed); the answers' records are kept"
        )
    warning = unjudged_warning(tally)
    if warning:
        ui.warn(warning)


def _print_scores(
    ui: UI,
    summary: EvaluationScores,
    benchmark: str,
    split: str,
    config_name: str,
    protocol: str,
    budget: TokenBudget,
) -> None:
    """The per-category table, and with a token budget the evidence recall at that budget."""
    label = "" if protocol == "official" else " [adversarial scored with the EvolveMem paper protocol]"
    ui.print(category_table(summary, f"{benchmark} ({split}) · config {config_name}{label}"))
    if budget:
        main = summary.main_evidence_recall
        ui.result(
            f"{budget.describe()}: evidence recall (answerable) "
            f"{'-' if main is None else f'{main:.3f}'}, mean context {summary.context_tokens or 0:.0f} tokens"
        )


def _baseline_comparison(
    ui: UI, baseline_label: str, config_name: str, base_summary: EvaluationScores, comparison: Comparison
) -> JsonResult:
    """Print the paired table against the baseline; its block of the JSON result."""
    ui.print(
        paired_table(
            comparison, baseline_label, config_name, f"{config_name} vs {baseline_label} on the same questions (paired)"
        )
    )
    return {
        "label": baseline_label,
        "overall": {k: v for k, v in base_summary.as_json().items() if k != "by_category"},
        "paired": comparison.as_dict(),
    }


def _answer_counter(bars: Bars | LogBars, total: int) -> Callable[[QuestionRecord], None]:
    """A record callback that moves the answer bar: questions done, cache hits, failures and calls."""
    counts = {"done": 0, "failed": 0, "hits": 0, "calls": 0}

    def on_record(record: QuestionRecord) -> None:
        counts["done"] += 1
        counts["failed"] += int(bool(record.failed))
        counts["hits"] += int(record.cache_hits or 0)
        counts["calls"] += int(record.calls or 0)
        bars.questions(
            "answer", counts["done"], total, cache_hits=counts["hits"], failed=counts["failed"], calls=counts["calls"]
        )

    return on_record
