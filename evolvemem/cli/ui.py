"""Console output: progress bars, tables, the one-line error style, the final JSON object.

Human-readable output goes to stderr when `--json` is given so that stdout carries exactly one
JSON object; `--quiet` hides progress (bars, setup and round lines), never a result line. When
stderr is not a terminal (a log, CI) progress is written as plain lines every few seconds instead
(cli/log_progress.py)."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

if TYPE_CHECKING:
    from evolvemem.cli.log_progress import LogBars
    from evolvemem.scoring.aggregate import EvaluationScores
    from evolvemem.store.rows import ReaderSplitCounts


JsonResult = dict[str, Any]  # a command's --json document: one JSON object, whatever its command puts in it


class UI:
    def __init__(self, json_mode: bool = False, quiet: bool = False):
        self.json_mode = json_mode
        self.quiet = quiet
        # tables are wide; when output goes to a file or pipe, do not squeeze them to 80 columns
        # (unless the user says how wide with COLUMNS)
        self.console = Console(stderr=json_mode, highlight=False)
        if not self.console.is_terminal and not os.environ.get("COLUMNS"):
            self.console = Console(stderr=json_mode, highlight=False, width=160)
        self.err = Console(stderr=True, highlight=False)
        self._line_interval: float | None = None  # seconds between progress lines off a terminal

    def info(self, message: str) -> None:
        if not self.quiet:
            self.console.print(message)

    def result(self, message: str) -> None:
        """A result line (a verdict, the best round, a summary): printed with --quiet too, which
        hides progress only."""
        self.console.print(message)

    def warn(self, message: str) -> None:
        self.err.print(f"[yellow]warning:[/yellow] {message}")

    def print(self, renderable: Any) -> None:
        self.console.print(renderable)

    def emit_json(self, payload: JsonResult) -> None:
        sys.stdout.write(json.dumps(payload, default=str) + "\n")
        sys.stdout.flush()

    def emit_result(self, payload: JsonResult) -> None:
        """A command's result as the one JSON object on stdout, when --json asked for it."""
        if self.json_mode:
            self.emit_json(payload)

    @contextmanager
    def progress(self) -> Iterator[Bars | LogBars]:
        bars = Bars(self)
        if self.quiet:
            yield bars
            return
        if not self.err.is_terminal:
            from evolvemem.cli.log_progress import LogBars, progress_interval

            if self._line_interval is None:
                self._line_interval = progress_interval(self.warn)
            lines = LogBars(
                lambda line: self.err.print(line, markup=False, highlight=False, soft_wrap=True), self._line_interval
            )
            try:
                yield lines
            finally:
                lines.close()
            return
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[extra]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.err,
            transient=False,
        ) as progress:
            bars.progress = progress
            yield bars


class Bars:
    """Named progress bars; a stage callback `(stage, done, total)` updates or creates one."""

    def __init__(self, ui: UI):
        self.ui = ui
        self.progress: Progress | None = None
        self.tasks: dict[str, Any] = {}

    def update(self, name: str, done: int, total: int, extra: str = "") -> None:
        if self.progress is None:
            return
        if name not in self.tasks:
            self.tasks[name] = self.progress.add_task(name, total=total, extra=extra)
        self.progress.update(self.tasks[name], completed=done, total=total, extra=extra)

    def stage(self, stage: str, done: int, total: int) -> None:
        self.update(stage, done, total)

    def questions(
        self, name: str, done: int, total: int, *, cache_hits: int = 0, failed: int = 0, calls: int = 0
    ) -> None:
        """Questions scored so far in one phase (`calls`: new LLM calls; the bar does not show them)."""
        self.update(name, done, total, extra=f"cache hits {cache_hits} · failed {failed}")


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def category_table(summary: EvaluationScores, title: str) -> Table:
    """Per-category F1 / BLEU-1 / evidence recall / n, then the headline averages."""
    table = Table(title=title, title_justify="left")
    for col in ("category", "n", "F1", "BLEU-1", "evidence recall", "failed"):
        table.add_column(col, justify="left" if col == "category" else "right")
    for key, group in summary.by_category.items():
        name = group.name or ""
        label = key if name.replace(" ", "_") in ("", key) else f"{key} {name}"
        table.add_row(
            label,
            str(group.n),
            fmt(group.f1),
            fmt(group.bleu1),
            fmt(group.evidence_recall),
            str(group.n_failed),
        )
    table.add_section()
    table.add_row("main (non-adversarial)", str(summary.n_main), fmt(summary.main_f1), "", "", "")
    table.add_row("adversarial", str(summary.n_adversarial), fmt(summary.adversarial_f1), "", "", "")
    table.add_row(
        "all",
        str(summary.n_questions),
        fmt(summary.all_f1),
        fmt(summary.bleu1),
        fmt(summary.evidence_recall),
        str(summary.n_failed),
    )
    return table


def report_oversized(ui: UI, replies: int) -> None:
    """The end of a command: replies the client cut because the server sent more than was asked."""
    if replies:
        from evolvemem.llm.client import REPLY_CHARS_PER_TOKEN, REPLY_FLOOR_CHARS

        ui.warn(
            f"{replies} repl{'ies were' if replies != 1 else 'y was'} longer than asked (does the server ignore "
            f"max_tokens?) and cut at {REPLY_CHARS_PER_TOKEN} characters per requested token "
            f"(at least {REPLY_FLOOR_CHARS})"
        )


def report_failures(ui: UI, causes: list[tuple[str, int]]) -> None:
    """The end of a command: failed questions summarised by cause (nothing when none failed)."""
    if not causes:
        return
    total = sum(n for _, n in causes)
    ui.warn(f"{total} question{'s' if total != 1 else ''} failed (not scored; --resume or a re-run retries them):")
    for cause, n in causes[:5]:
        ui.warn(f"  {n} × {cause}")
    if len(causes) > 5:
        ui.warn(f"  … and {len(causes) - 5} other causes (question_records.error)")


def paired_table(paired: Any, before: str, after: str, title: str) -> Table:
    """`after` − `before` on the same questions, per group, with the guard's paired statistics
    (evolve diff: two rounds; evolve transfer: the evolved config against the run's start)."""
    table = Table(title=title, title_justify="left")
    for col in ("group", "n", before, after, "difference", "95% interval", "p (better)", "p (worse)"):
        table.add_column(col)
    for group, stat in paired.groups.items():
        if stat.n:
            table.add_row(
                group,
                str(stat.n),
                fmt(stat.incumbent, 4),
                fmt(stat.candidate, 4),
                f"{stat.diff:+.4f}",
                f"[{stat.ci_low:+.4f}, {stat.ci_high:+.4f}]",
                f"{stat.p_gain:.3f}",
                f"{stat.p_loss:.3f}",
            )
    conversations = ", ".join(f"{c} {d:+.3f}" for c, d in paired.by_conversation.items())
    table.caption = f"per conversation: {conversations}"
    return table


def reader_split_table(split: ReaderSplitCounts, title: str) -> Table:
    """The reader failure split: rows by how much gold evidence was in context, columns right /
    wrong (right: the judge's verdict, else F1 >= RIGHT_F1)."""
    table = Table(title=f"{title} · context {split.context}", title_justify="left")
    for col in ("gold evidence in context", "right", "wrong"):
        table.add_column(col, justify="left" if col.startswith("gold") else "right")
    for bucket, right, wrong in split.cells:
        if right or wrong:
            table.add_row(bucket, str(right), str(wrong))
    return table


def full_wrong_text(split: ReaderSplitCounts) -> str:
    """The line under the split: why the answers with the whole evidence in context went wrong."""
    classes = ", ".join(f"{name} {n}" for name, n in split.full_wrong) or "none"
    return f"wrong with the full evidence in context: {classes}"
