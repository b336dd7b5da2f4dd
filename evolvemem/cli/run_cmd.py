"""`evolve run`: the AutoResearch loop from the command line, with resume."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from rich.table import Table

from evolvemem.cli.common import default_run_dir
from evolvemem.cli.log_progress import duration_text
from evolvemem.cli.defaults import RUN_DEFAULTS
from evolvemem.cli.ui import UI, JsonResult, fmt, report_failures, report_oversized
from evolvemem.errors import EvolveMemError
from evolvemem.loop.guard import kept_text, next_step_text
from evolvemem.loop.ladder import rung_text
from evolvemem.loop.spec import GuardSettings, RunSpec, objective_label, objective_metric, parse_budgets

if TYPE_CHECKING:
    from evolvemem.cli.options import RunOptions
    from evolvemem.contracts.records import QuestionRecord
    from evolvemem.loop.frontier import FrontierPoint
    from evolvemem.loop.paired import Comparison
    from evolvemem.session import EvaluationCost, LocalModels, RoundOutcome, RunResult, Session
    from evolvemem.space.changes import Change
    from evolvemem.store.rows import RoundSummary, ScreeningRow
    from evolvemem.space.config import RetrievalConfig


EMERGED_MARK = "✦"  # the round's config switched on a lever that emerged in the run


def emerged_text(used: Sequence[str]) -> str:
    """What a round's mark means, in words ("" when it used no emerged lever)."""
    return f"{EMERGED_MARK} used emerged lever(s): {', '.join(used)}" if used else ""


def round_label(round_no: int, emerged_used: Sequence[str]) -> str:
    """The round number, marked when its config used a lever that emerged in the run."""
    return str(round_no) + (f" {EMERGED_MARK}" if emerged_used else "")


def changes_text(changes: list[Change], limit: int = 4) -> str:
    parts = []
    for c in changes[:limit]:
        scope = "" if c.scope == "global" else f"[{c.scope}] "
        parts.append(f"{scope}{c.field}: {c.old}→{c.new}")
    if len(changes) > limit:
        parts.append(f"+{len(changes) - limit} more")
    from rich.markup import escape

    return escape("; ".join(parts)) or "-"


def paired_text(
    paired: Comparison | None,
    accepted: bool | None,
    screenings: Sequence[ScreeningRow] | None = None,
    objective: str = "balanced",
) -> str:
    """A round against the incumbent: paired difference (F1, or evidence recall for an evidence run) and
    p-value per group, and the verdict (a round whose every candidate was screened out kept the
    incumbent: it says so)."""
    if screenings and all(s.outcome == "screened_out" for s in screenings):
        n = len(screenings)
        where = "at rung 0 (contexts' evidence)" if all(s.rung == 0 for s in screenings) else "on the ladder"
        return (
            f"{n} candidate{'s' if n > 1 else ''} screened out {where} → "
            f"{kept_text(False, screenings[-1].compared_with)}"
        )
    if not paired:
        return "start" if accepted else "-"
    from evolvemem.loop.paired import named_p

    parts = []
    labels = (
        (("main", "answerable recall"),)
        if objective_metric(objective) == "evidence_recall"
        else (("main", "main F1"), ("adversarial", "adv F1"))
    )
    for group, label in labels:
        stat = paired.groups.get(group)
        if stat is not None and stat.n:
            parts.append(f"{label} {stat.diff:+.3f} ({named_p(stat, 2)})")
    return f"vs r{paired.incumbent_round}: {' · '.join(parts)} → {kept_text(accepted, paired.incumbent_round)}"


def decision_text(decision: str | None, fallback: str | None, flags: list[str]) -> str:
    """The guard's decision for the next round (the shared vocabulary of loop/guard.py), with a rubric
    fallback and evidence flags said out loud."""
    text = next_step_text(decision)
    if fallback:
        text += " (rubric fallback)"
    if flags:
        text += f" ⚑{len(flags)}"
    return text


def screening_lines(round_no: int, screenings: Sequence[ScreeningRow]) -> list[str]:
    """One line per minibatch screening of a round: its outcome, why, and what it cost."""
    from rich.markup import escape

    return [
        f"  round {round_no} screening {s.attempt} ({s.source}, {s.n_questions} questions, "
        f"{s.calls or 0} calls): {str(s.outcome).replace('_', ' ')}{rung_text(s.rung)}: {escape(s.reason or '')}"
        for s in screenings
    ]


def dev_scores_text(score: float, dev: RoundSummary, objective: str) -> str:
    """A round's dev figures as the console prints them: the objective by name, then its companions
    (F1 of both groups; an evidence run's contexts have no F1: their recall and size instead)."""
    if objective_metric(objective) == "evidence_recall":
        return (
            f"dev {objective_label(objective)} {score:.4f} (all questions {fmt(dev.evidence_recall)}, "
            f"context {fmt(dev.context_tokens, 0)} tokens)"
        )
    return (
        f"dev {objective_label(objective)} {score:.4f} (main F1 {fmt(dev.main_f1)}, adversarial F1 "
        f"{fmt(dev.adversarial_f1)})"
    )


def round_line(done: RoundOutcome, objective: str = "balanced") -> str:
    from evolvemem.session import vs_full_text

    lines = screening_lines(done.round, done.screenings)
    cost = f"; cost vs full evaluation {vs_full_text(done.cost)}" if made_calls([done]) else ""
    lever = f" {emerged_text(done.emerged_used)};" if done.emerged_used else ""
    paired = paired_text(done.paired, done.accepted, done.screenings, objective)
    built = "".join(f"; {text}" for text in done.stores_built)
    if done.summary.stopped_at:
        built += f"; stopped early: {done.summary.stopped_at}"
    lines.append(
        f"round {done.round}:{lever} {dev_scores_text(done.objective_score, done.summary, objective)} {paired}; "
        f"{decision_text(done.next_step, done.fallback, done.flags)}: {changes_text(done.changes)}{cost}{built}"
    )
    return "\n".join(lines)


def made_calls(rounds: list[RoundOutcome]) -> bool:
    """Whether any round called a model (its usage counted calls)."""
    return any(done.usage and done.usage.calls for done in rounds)


def rounds_table(rounds: list[RoundOutcome], title: str, objective: str = "balanced") -> Table:
    from evolvemem.session import vs_full_text

    table = Table(title=title, title_justify="left")
    # offline rounds make no call: the calls and cost columns would only squeeze the decisions
    with_calls = made_calls(rounds)
    for col in (
        "round",
        f"dev {objective_label(objective)}",
        "Δ",
        "main F1",
        "adv. F1",
        "evid. recall",
        "paired vs best (same questions)",
        "next round",
        "changes for next round",
        *(("calls", "cost vs full evaluation") if with_calls else ()),
        "time",
    ):
        wrap = col.startswith(("changes", "paired"))
        table.add_column(col, overflow="fold" if wrap else "ellipsis", no_wrap=not wrap)
    prev = None
    for done in rounds:
        dev, score = done.summary, done.objective_score
        table.add_row(
            round_label(done.round, done.emerged_used),
            f"{score:.4f}",
            "" if prev is None else f"{score - prev:+.4f}",
            fmt(dev.main_f1),
            fmt(dev.adversarial_f1),
            fmt(dev.evidence_recall),
            paired_text(done.paired, done.accepted, done.screenings, objective),
            decision_text(done.next_step, done.fallback, done.flags),
            changes_text(done.changes, limit=6),
            *((str(done.usage.calls if done.usage else 0), vs_full_text(done.cost)) if with_calls else ()),
            f"{done.seconds or 0.0:.1f}s",
        )
        prev = score
    return table


def run_loop(ui: UI, session: Session, started: float | None = None, resumed: bool = False) -> JsonResult:
    """Drive an opened run session round by round, with progress bars and the per-round lines; the
    total time printed at the end counts from `started` (the command's start: setup included)."""
    from evolvemem.session import Hooks

    started = time.perf_counter() if started is None else started
    spec = session.run_spec
    run_dir = session.run_dir
    ui.info(
        f"[bold]Run[/bold] {run_dir}  ·  diagnoser {spec.diagnoser}  ·  rounds 0..{spec.rounds}  ·  "
        f"objective dev {spec.objective} ({objective_label(spec.objective)})"
    )
    with session, ui.progress() as bars:
        counts: dict[str, list[int]] = {}

        def on_record(label: str, record: QuestionRecord, total: int) -> None:
            c = counts.setdefault(label, [0, 0, 0, 0])
            c[0] += 1
            c[1] += int(record.cache_hits or 0)
            c[2] += int(bool(record.failed))
            c[3] += int(record.calls or 0)
            bars.questions(label, c[0], total, cache_hits=c[1], failed=c[2], calls=c[3])

        hooks = Hooks(
            stage=bars.stage,
            record=on_record,
            round_done=lambda info: ui.info(round_line(info, spec.objective)),
            message=ui.warn,
        )
        try:
            result = session.run(hooks)
            causes = session.failure_causes()
            oversized = session.oversized_replies()
        except KeyboardInterrupt:
            ui.err.print(f"stopped: every finished question is saved; continue with  evolve run --resume {run_dir}")
            raise
    ui.print(rounds_table(result.rounds, f"{spec.benchmark} · {spec.diagnoser} · {run_dir.name}", spec.objective))
    if made_calls(result.rounds):
        ui.result(cost_line(result.cost))
    _print_dev_test(ui, result)
    ui.result(f"best round {result.best_round}; best config: {result.best_config_path}")
    for point in result.frontier:  # a --budgets run: each budget's best, in one line each
        ui.result(frontier_line(point))
    if result.frontier:
        ui.result(f"the frontier in full: evolve show {run_dir} --frontier")
    seconds = time.perf_counter() - started
    ui.result(
        f"total time: {duration_text(seconds)}"
        + (" (this invocation; the earlier part of the run is not counted)" if resumed else "")
    )
    report_failures(ui, causes)
    report_oversized(ui, oversized)
    return {
        "run_dir": str(run_dir),
        "rounds": [
            {
                "round": r.round,
                "dev_score": r.objective_score,
                "decision": r.next_step,
                "changes": [c.as_dict() for c in r.changes],
            }
            for r in result.rounds
        ],
        "best_round": result.best_round,
        "best_config_path": str(result.best_config_path),
        "dev": result.dev,
        "test": result.test,
        "cost": result.cost.as_dict() if result.cost else {},
        "seconds": round(seconds, 1),
        **({"frontier": [p.as_dict() for p in result.frontier]} if result.frontier else {}),
    }


def frontier_line(point: FrontierPoint) -> str:
    """One budget's best of a `--budgets` run: its round, file and held-out recall against the start."""
    held = ""
    if point.held_out is not None:
        s = point.held_out.groups["main"]
        held = f", held-out recall {fmt(point.test_start_recall)} → {fmt(point.test_recall)} ({s.diff:+.3f} [{s.ci_low:+.3f}, {s.ci_high:+.3f}])"
    return f"at {point.tokens} tokens: round {point.best_round} (best_config.{point.tokens}.toml){held}"


def cost_line(total: EvaluationCost | None) -> str:
    """The run's evaluations against full evaluation (every candidate on every dev question)."""
    if total is None:
        return ""
    text = (
        f"cost vs full evaluation: {total.scored} of {total.full_questions} dev questions answered "
        f"({total.reused_context} reused by context, {total.reused_config} by config, "
        f"{total.screened} on screening minibatches, {total.screened_out} candidates screened out)"
    )
    if total.call_ratio is not None:
        text += (
            f"; {total.calls} calls vs ~{total.full_calls:.0f} for full evaluation "
            f"({total.call_ratio:.2f}×), {total.tokens} tokens vs ~{total.full_tokens:.0f}"
        )
    return text


def _print_dev_test(ui: UI, result: RunResult) -> None:
    table = Table(
        title="start vs best (best = the last round that beat its incumbent on paired dev evidence; test scored once)",
        title_justify="left",
    )
    for col in (
        "split",
        "config",
        "main F1",
        "adversarial F1",
        "all F1",
        "evidence recall",
        "evidence recall (answerable)",
        "context tokens",
        "n",
    ):
        table.add_column(col)
    for split_name, block in (("dev", result.dev), ("test", result.test)):
        for which in ("start", "best"):
            s = block.get(which) or {}
            if s:
                table.add_row(
                    split_name,
                    which,
                    fmt(s.get("main_f1")),
                    fmt(s.get("adversarial_f1")),
                    fmt(s.get("all_f1")),
                    fmt(s.get("evidence_recall")),
                    fmt(s.get("main_evidence_recall")),
                    fmt(s.get("context_tokens"), 0),
                    str(s.get("n")),
                )
    ui.print(table)
    held = held_out_text(result.test.get("paired"), result.test.get("objective", "balanced"))
    if held:
        ui.result(held)


def held_out_text(paired: JsonResult | None, objective: str) -> str:
    """Whether the best config holds on the held-out conversations: best − start on the same test
    questions, per group, with the interval (conversations resampled) and one-sided p of a gain."""
    if not paired:
        return ""
    from evolvemem.loop.spec import objective_label, objective_metric

    what = "evidence recall" if objective_metric(objective) == "evidence_recall" else "F1"
    parts = []
    for group, label in (("main", "answerable"), ("adversarial", "unanswerable")):
        s = (paired.get("groups") or {}).get(group) or {}
        if s.get("n"):
            parts.append(
                f"{label} {s['diff']:+.4f} [{s['ci_low']:+.4f}, {s['ci_high']:+.4f}] p(better) {s['p_gain']:.3f} (n={s['n']})"
            )
    return (
        f"held out (test, best − start on the same questions, {what}; the run's objective is "
        f"{objective_label(objective)}): {' · '.join(parts) or 'nothing to compare'}"
    )


def new_run_dir(out: str | None, benchmark: str, diagnoser: str) -> Path:
    return Path(out) if out else default_run_dir(f"run-{diagnoser}", benchmark)


def check_executor(executor_name: str, ray_address: str | None) -> None:
    from evolvemem.session import EXECUTORS

    if executor_name not in EXECUTORS:
        raise EvolveMemError(f"--executor must be {' or '.join(EXECUTORS)}, not {executor_name!r}")
    if ray_address and executor_name != "ray":
        raise EvolveMemError("--ray-address needs --executor ray")


def new_run_spec(ui: UI, o: RunOptions, local_models: LocalModels) -> tuple[RunSpec, RetrievalConfig]:
    """The spec of a new run from its options (the spec checks itself and fills the defaults that
    hang on the models: loop/spec.py) and the starting config, or one error line."""
    from evolvemem.session import model_settings, resolve_config, run_local_models
    from evolvemem.space.action_space import files_space

    settings = model_settings(o)
    init_config = resolve_config(ui, o.init)
    spec = RunSpec.for_models(
        objective=o.objective,
        diagnoser=o.diagnoser,
        screen_fraction=o.screen_fraction,
        benchmark=o.benchmark,
        data=o.data,
        rounds=RUN_DEFAULTS.rounds if o.rounds is None else o.rounds,
        init=o.init,
        seed=o.seed,
        protocol=o.adversarial_protocol,
        models=dict(settings.__dict__),
        guard=GuardSettings(
            revert_threshold=o.tau_rev,
            explore_dims=o.explore_dims,
            alpha=o.alpha,
            min_effect=o.min_effect,
            max_loss=o.max_loss,
            folds=o.folds,
            parsimony=not o.no_parsimony,
            max_ms=o.max_ms,
        ),
        concurrency=o.concurrency,
        local_models=local_models.or_else(run_local_models(o.init)),
        patience=o.patience,
        reextract=not o.no_reextract,
        cache_enabled=not o.no_cache,
        frozen=files_space().expand([n for item in o.freeze or [] for n in item.split(",")]),
        diagnosis_mode=o.diagnosis_mode,
        screen_budget=o.screen_budget,
        screen_alpha=o.screen_alpha,
        candidates=o.candidates,
        context_reuse=not o.no_context_reuse,
        # an --init RUN config carries the budget its run measured it at: the new run goes on at it
        token_budget=o.context_tokens if o.context_tokens is not None or o.budgets else init_config.budget.tokens,
        budgets=parse_budgets(o.budgets),
        evidence_rung=not o.no_evidence_rung,
        sequential=not o.no_sequential,
    )
    return spec, init_config
