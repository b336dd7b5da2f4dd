"""The report page: one self-contained HTML file (inline CSS and SVG, no script, no network).

Every section and chart has a stable id (`trajectory`, `categories`, `failures`, `round-3`,
`usage`, `dev-vs-test`, `ablation`, `proposed-dimensions`, ...) so people can link to them and tests can
find them; round articles carry their numbers as data attributes."""

from __future__ import annotations

import json
import os
from html import escape
from pathlib import Path
from typing import Any, Iterable

from evolvemem.loop.ladder import rung_text
from evolvemem.loop.spec import objective_column, objective_label
from evolvemem.loop.guard import next_step_text
from evolvemem.report import svg
from evolvemem.contracts.records import RIGHT_F1
from evolvemem.contracts.usage import Usage
from evolvemem.loop.paired import GROUPS, Comparison, PairedStat, named_p
from evolvemem.report.data import GROUP_NAMES, FinalScore, ReportData, RoundView
from evolvemem.report.frontier import frontier_section
from evolvemem.scoring.judge_summary import honesty_note
from evolvemem.space.changes import Change
from evolvemem.store.costs import EvaluationCost
from evolvemem.store.rows import ProposedDimension, RoundSummary


# ---- small formatting helpers ---------------------------------------------------------------
def f3(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def f4(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def signed(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:+.{digits}f}"


def count(value: int | None) -> str:
    return "0" if not value else f"{value:,}"


def value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    return value if isinstance(value, str) else json.dumps(value)


def heat_cell(value: float | None) -> str:
    """A number cell tinted by its value in [0, 1] (white → blue), so a table reads like a heatmap."""
    if value is None:
        return '<td class="num">–</td>'
    alpha = max(0.0, min(1.0, value)) * 0.4
    return f'<td class="num heat" style="background:rgba(37,99,235,{alpha:.2f})">{value:.3f}</td>'


def badge(decision: str | None) -> str:
    """The guard's decision for the next round, coloured by its stored name, worded as every view words it."""
    kind = decision or "pending"
    text = next_step_text(decision) if decision else kind
    return f'<span class="badge" style="background:{svg.decision_color(kind)}">{escape(text)}</span>'


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], cls: str = "", table_id: str = "") -> str:
    """Cells are already-escaped HTML; numeric-looking columns are right-aligned by CSS class `num`."""
    grid = [list(row) for row in rows]
    first = grid[0] if grid else []
    head = "".join(
        f'<th class="num">{h}</th>' if i < len(first) and first[i].startswith('<td class="num') else f"<th>{h}</th>"
        for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>" + "".join(cell if cell.startswith("<td") else f"<td>{cell}</td>" for cell in row) + "</tr>"
        for row in grid
    )
    ident = f' id="{table_id}"' if table_id else ""
    return (
        f'<div class="table-wrap"><table class="{cls}"{ident}><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def num(text: str, cls: str = "") -> str:
    return f'<td class="num {cls}">{text}</td>'


def changes_table(changes: list[Change], with_old: bool = True) -> str:
    rows = []
    for c in changes:
        where = "all questions" if c.scope == "global" else f"type <code>{escape(c.scope)}</code>"
        new = f"<code>{escape(value_text(c.new))}</code>"
        name = f"<code>{escape(c.field)}</code>"
        rows.append(
            [name, where, f"<code>{escape(value_text(c.old))}</code> → {new}"] if with_old else [name, where, new]
        )
    return table(["dimension", "scope", "old → new" if with_old else "value"], rows, cls="changes")


# ---- charts ---------------------------------------------------------------------------------
def _x_ticks(rounds: list[RoundView]) -> list[tuple[float, str]]:
    every = max(1, len(rounds) // 20)
    return [(r.round, str(r.round)) for i, r in enumerate(rounds) if i % every == 0]


def _test_scores(data: ReportData) -> dict[int, RoundSummary]:
    """Held-out test scores by dev round: only the start and best configs are scored on test, once."""
    return {f.round: f.test for f in data.finals if f.test}


def trajectory_chart(data: ReportData) -> str:
    """The headline score with the guard's decisions as markers, both groups' dev F1 as thinner lines
    (a balanced run judges them apart), and the held-out test scores of the start and best configs."""
    rounds = [r for r in data.rounds if r.score is not None]
    series = _trajectory_series(data, rounds)
    markers = _test_markers(data) + [_decision_marker(data, r, r.score) for r in rounds if r.score is not None]
    values = [y for s in series for _, y in s.points if y is not None] + [m.y for m in markers]
    title = (
        f"{data.score_label} per round"
        if data.metric == "evidence_recall"
        else f"{data.score_label} per round, with main and adversarial F1"
    )
    return svg.line_chart(
        "trajectory-chart",
        title,
        series,
        _x_ticks(rounds),
        markers=markers,
        legend=_trajectory_legend(rounds, series, markers),
        y_range=svg.auto_range(values),
        y_label=data.metric_label,
        height=360,
    )


def _trajectory_series(data: ReportData, rounds: list[RoundView]) -> list[svg.Series]:
    """Each group's dev F1 (when scored), the best score so far, and the headline score, drawn last (on top)."""
    series = [
        svg.Series(
            f"dev {name} F1",
            svg.GROUP_COLORS[group],
            [(r.round, r.scores.column(f"{group}_f1")) for r in rounds],
            width=1.6,
        )
        for group, name in GROUP_NAMES.items()
    ]
    series = [s for s in series if any(y is not None for _, y in s.points)]
    if any(r.best_so_far is not None for r in rounds):
        series.append(
            svg.Series(
                "best so far",
                svg.BEST_SO_FAR_COLOR,
                [(r.round, r.best_so_far) for r in rounds],
                dashed=True,
                step=True,
                dots=False,
            )
        )
    series.append(
        svg.Series(data.score_label, svg.OBJECTIVE_COLOR, [(r.round, r.score) for r in rounds], width=2.5, dots=False)
    )
    return series


def _test_markers(data: ReportData) -> list[svg.Marker]:
    """The held-out test F1 of each group, as diamonds at the round whose config was tested."""
    markers = []
    for number, test in sorted(_test_scores(data).items()):
        for group in GROUP_NAMES:
            value = test.column(f"{group}_f1")
            if value is not None:
                markers.append(
                    svg.Marker(
                        number,
                        value,
                        svg.GROUP_COLORS[group],
                        radius=4.5,
                        shape="diamond",
                        tooltip=f"test {group} F1 of round {number}'s config: {value:.4f} (held out, scored once)",
                    )
                )
    return markers


def _decision_marker(data: ReportData, r: RoundView, score: float) -> svg.Marker:
    """A scored round's dot, coloured by the guard's decision, linked to its article (the best ringed)."""
    kind = r.decision or "pending"
    change = "; ".join(f"{c.field} {value_text(c.old)}→{value_text(c.new)}" for c in r.changes[:3])
    tip = (
        f"round {r.round}: dev {f4(r.score)} {signed(r.delta)} (main {f3(r.scores.main_f1)}, adversarial "
        f"{f3(r.scores.adversarial_f1)}) — {kind}" + (f": {change}" if change else "")
    )
    best = r.round == data.best_round
    return svg.Marker(
        r.round,
        score,
        svg.decision_color(kind),
        tooltip=tip,
        href=f"#round-{r.round}",
        ring=svg.BEST_RING_COLOR if best else "",
        label=f"best {f4(score)}" if best else "",
    )


def _trajectory_legend(
    rounds: list[RoundView], series: list[svg.Series], markers: list[svg.Marker]
) -> list[svg.LegendItem]:
    """The lines (top one first), the test diamonds drawn, the decisions seen (in the guard's order) and the ring."""
    seen = [r.decision or "pending" for r in rounds]
    kinds = [k for k in svg.DECISION_COLORS if k in seen] + sorted(set(seen) - set(svg.DECISION_COLORS))
    legend = [svg.LegendItem(s.name, s.color, "dashed" if s.dashed else "line") for s in reversed(series)]
    legend += [
        svg.LegendItem(f"test {group} F1", svg.GROUP_COLORS[group], "diamond")
        for group in GROUP_NAMES
        if any(m.shape == "diamond" and m.color == svg.GROUP_COLORS[group] for m in markers)
    ]
    legend += [
        svg.LegendItem(next_step_text(k) if k not in ("start", "pending") else k, svg.decision_color(k), "dot")
        for k in kinds
    ]
    legend.append(svg.LegendItem("best round (the guard's)", svg.BEST_RING_COLOR, "ring"))
    return legend


def _last(points: list[tuple[float, float | None]]) -> float | None:
    return next((y for _, y in reversed(points) if y is not None), None)


def categories_chart(data: ReportData) -> str:
    metric, label_text = data.metric, data.metric_label
    title = f"{label_text} per category and round"
    if len(data.rounds) == 1:
        r = data.rounds[0]
        stack = svg.BarStack(
            label_text,
            svg.OBJECTIVE_COLOR,
            [float((r.by_category.get(k) or {}).get(metric) or 0.0) for k, _ in data.categories],
            [
                f"{label_text} {f3((r.by_category.get(k) or {}).get(metric))} "
                f"(n={(r.by_category.get(k) or {}).get('n')})"
                for k, _ in data.categories
            ],
        )
        return svg.bar_chart(
            "categories-chart",
            title,
            [lab for _, lab in data.categories],
            [stack],
            y_max=1.0,
            y_label=label_text,
            y_format=lambda v: f"{v:.2f}",
            height=320,
        )
    series = [
        svg.Series(
            label, svg.series_color(i), [(r.round, (r.by_category.get(key) or {}).get(metric)) for r in data.rounds]
        )
        for i, (key, label) in enumerate(data.categories)
    ]
    legend = [svg.LegendItem(f"{s.name} {f3(_last(s.points))}", s.color) for s in series]
    return svg.line_chart(
        "categories-chart",
        title,
        series,
        _x_ticks(data.rounds),
        legend=legend,
        y_range=(0.0, 1.0),
        y_label=label_text,
        height=320,
    )


def failures_chart(data: ReportData) -> str:
    present = [c for c in data.failure_classes if any(r.failures.get(c) for r in data.rounds)]
    stacks = []
    for c in present:
        tips = []
        for r in data.rounds:
            wrong = sum(r.failures.values())
            n = r.failures.get(c, 0)
            tips.append(f"{c}: {n} of {wrong} wrong answers ({n / wrong:.0%})" if wrong else f"{c}: 0")
        stacks.append(
            svg.BarStack(
                c, svg.FAILURE_COLORS.get(c, "#9ca3af"), [float(r.failures.get(c, 0)) for r in data.rounds], tips
            )
        )
    legend = [svg.LegendItem(s.name.replace("_", " "), s.color, "box") for s in reversed(stacks)]
    return svg.bar_chart(
        "failures-chart",
        "wrong answers per round by failure class",
        [str(r.round) for r in data.rounds],
        stacks,
        legend=legend,
        x_label="round",
        y_label="wrong answers",
        height=320,
    )


# ---- sections -------------------------------------------------------------------------------
def how_to_read(data: ReportData) -> str:
    if data.kind == "run":
        body = (
            "<p>evolvemem tuned the <em>retrieval</em> settings of an agent memory round by round. "
            "Each round scores one config on the <strong>dev</strong> questions; a <strong>diagnoser</strong> reads "
            "why answers failed and proposes a change; the <strong>guard</strong> then judges the round against the "
            "best round so far (<em>new best</em> or <em>not kept</em>) and decides the next round: it <em>builds on "
            "it</em> (the proposal applied to this round's config, which was not significantly worse), <em>reverts to "
            "best</em> after a significant loss, <em>explores</em> a random change when progress stalls, or "
            "<em>stops</em>. So a marker on the trajectory shows the score of that round's config, and its "
            "colour says what the guard did next; click it for the round's details.</p>"
            "<p>The <strong>best round</strong> (ringed) is the last round that beat the best before it on paired "
            "evidence, not the round with the highest mean: a round whose mean is higher by a few questions that "
            "could be noise, or that bought its gain with a loss on the other group, is not kept, so a ringed "
            "point can sit below another round's.</p>"
            f"<p>Decisions are <strong>paired</strong>: a round and the best round so far answered the same dev "
            "questions, so each question gives one difference; a round becomes the new best only when the difference "
            "is significant (sign-flip permutation p-value, 95% interval resampled by conversation) and a majority of "
            f"conversations hold. The objective of this run is <strong>{escape(data.objective)}</strong>: "
            f'{escape(data.objective_meaning)}. Section <a href="#decisions">decisions</a> lists every verdict '
            "with both groups; ⚑ marks a proposal that the round's own failures contradict.</p>"
            "<p>The best round is chosen on dev only. Its config and the starting config are then scored once on the "
            'held-out <strong>test</strong> conversations (section <a href="#dev-vs-test">dev vs test</a>): that is '
            "the honest estimate of the gain. <strong>F1</strong> is token overlap with the gold answer (official LoCoMo "
            "scoring); <strong>main</strong> leaves adversarial (unanswerable) questions out; <strong>evidence "
            "recall</strong> is the share of gold evidence turns that reached the answer context. Failure classes come "
            "from the gold evidence: an <em>extraction gap</em> means no memory covers the evidence, a <em>retrieval "
            "miss</em> that no view ranked it, a <em>budget cut</em> that it was ranked but cut by "
            "<code>max_context</code>; the others are answering problems.</p>"
        )
    else:
        body = (
            f"<p>This directory holds a single evaluation (<code>evolve {escape(data.kind)}</code>): one config scored "
            "on one set of questions, so there is one round and no guard decisions. <strong>F1</strong> is token "
            "overlap with the gold answer; <strong>main</strong> leaves adversarial questions out; <strong>evidence "
            "recall</strong> is the share of gold evidence turns that reached the answer context. The failure classes "
            "say why wrong answers went wrong, using the gold evidence.</p>"
        )
    return f'<section id="how-to-read" class="card intro"><h2>How to read this report</h2>{body}</section>'


def summary_cards(data: ReportData) -> str:
    cards = []
    start = next((f for f in data.finals if f.which == "start"), None)
    best = next((f for f in data.finals if f.which == "best"), None)
    if start and best:
        # the headline: both groups and all, held-out test first (dev is where the loop chose)
        headline = (
            (
                ("main_evidence_recall", "evidence recall (answerable)"),
                ("evidence_recall", "evidence recall (all)"),
                ("context_tokens", "context tokens"),
            )
            if data.metric == "evidence_recall"
            else (("main_f1", "main F1 (answerable)"), ("adversarial_f1", "adversarial F1"), ("all_f1", "all F1"))
        )
        for key, label in headline:
            digits = 0 if key == "context_tokens" else 4

            def value(v: float | None, digits: int = digits) -> str:
                return "–" if v is None else f"{v:.{digits}f}"

            dev = f"dev {value(start.dev.column(key))} → {value(best.dev.column(key))} (round {start.round} → {best.round})"
            if start.test and best.test:
                a, b = start.test.column(key), best.test.column(key)
                delta = signed(b - a, digits) if a is not None and b is not None else "–"
                delta += held_out_interval(data.held_out, key)
                cards.append((f"test {label}", f"{value(a)} → {value(b)}", f"held out: {delta}; {dev}"))
            else:
                cards.append(
                    (
                        f"dev {label}",
                        f"{value(start.dev.column(key))} → {value(best.dev.column(key))}",
                        "test not scored: the run has not finished",
                    )
                )
        judged = data.judged
        flagged = sum(c.flagged for c in data.flag_counts())
        cards.append(
            (
                "paired decisions",
                f"{sum(bool(r.accepted) for r in judged)} of {len(judged)} accepted",
                (
                    f"objective {data.objective}; {flagged} proposal(s) flagged ⚑, "
                    f"{sum(bool(r.fallback) for r in data.rounds)} rubric fallback(s)"
                ),
            )
        )
        cards.append(
            (
                "rounds",
                str(len(data.rounds)),
                f"{sum(r.decision == 'reverted' for r in data.rounds)} reverted, "
                f"{sum(r.decision == 'explored' for r in data.rounds)} explored",
            )
        )
    elif data.rounds:
        r = data.rounds[0]
        cards += [
            ("all F1", f4(r.scores.all_f1), f"{count(r.scores.n_questions)} questions"),
            ("main F1", f4(r.scores.main_f1), "non-adversarial"),
            ("adversarial F1", f4(r.scores.adversarial_f1), "unanswerable questions"),
            ("evidence recall", f3(r.scores.evidence_recall), "gold evidence in context"),
        ]
    calls = sum(u.usage.calls for u in data.usage)
    tokens = sum(u.usage.tokens for u in data.usage)
    cards.append(("LLM calls", count(calls), f"{count(tokens)} tokens" if calls else "offline roles"))
    html = "".join(
        f'<div class="stat"><div class="stat-label">{escape(a)}</div><div class="stat-value">{escape(b)}</div>'
        f'<div class="stat-note">{escape(c)}</div></div>'
        for a, b, c in cards
    )
    return f'<section id="summary" class="stats">{html}</section>'


def run_header(data: ReportData) -> str:
    rows = "".join(
        f"<dt>{escape(k)}</dt><dd>{'<code>' + escape(v) + '</code>' if k == 'command' else escape(v)}</dd>"
        for k, v in data.header
    )
    return f'<section id="run" class="card"><h2>Run</h2><dl class="meta">{rows}</dl></section>'


def trajectory_section(data: ReportData) -> str:
    decided = data.kind == "run"
    tests = _test_scores(data)
    headers = ["round", data.score_label.removesuffix(" F1"), "Δ", "main", "adversarial", "evidence recall", "n"]
    headers += ["test main", "test adversarial"] if tests else []
    headers += ["then"] if decided else []
    rows = []
    for r in data.rounds:
        best = ' class="best-row"' if r.round == data.best_round else ""
        test = tests.get(r.round)
        rows.append(
            [
                f'<td{best}><a href="#round-{r.round}">{r.round}</a></td>',
                num(f4(r.score), "score"),
                num(signed(r.delta), "delta"),
                num(f3(r.scores.main_f1)),
                num(f3(r.scores.adversarial_f1)),
                num(f3(r.scores.evidence_recall)),
                num(count(r.scores.n_questions)),
            ]
            + ([num(f3(test.main_f1) if test else ""), num(f3(test.adversarial_f1) if test else "")] if tests else [])
            + ([badge(r.decision)] if decided else [])
        )
    if sum(r.score is not None for r in data.rounds) < 2:
        chart = '<p class="note">Only one round was scored: there is no trajectory to draw.</p>'
        lead = ""
    else:
        chart = f"<figure>{trajectory_chart(data)}</figure>"
        lead = (
            f'<p class="lead">The {escape(data.score_label)} of every round (thick line) with its two groups: '
            "<strong>main</strong> (answerable questions) and <strong>adversarial</strong> (unanswerable ones, "
            "where abstaining is right). Marker colour = the guard's decision after that round (click a marker "
            "for the round); the ringed marker is the best round"
            + (
                "; hollow diamonds are the held-out test scores of the start and best configs, scored once"
                if tests
                else ""
            )
            + ".</p>"
        )
    return (
        f'<section id="trajectory" class="card"><h2>Score trajectory</h2>{lead}{chart}'
        f"{table(headers, rows, 'numbers', 'rounds-table')}</section>"
    )


def categories_and_failures(data: ReportData) -> str:
    cats = data.categories
    cat_rows = [
        [f'<a href="#round-{r.round}">{r.round}</a>']
        + [heat_cell((r.by_category.get(k) or {}).get(data.metric)) for k, _ in cats]
        for r in data.rounds
    ]
    n_row = ["n"] + [num(count(max((r.by_category.get(k) or {}).get("n") or 0 for r in data.rounds))) for k, _ in cats]
    present = [c for c in data.failure_classes if any(r.failures.get(c) for r in data.rounds)]
    fail_headers = ["round"] + [escape(c.replace("_", " ")) for c in present] + ["wrong", "correct"]
    fail_rows = [
        [f'<a href="#round-{r.round}">{r.round}</a>']
        + [num(count(r.failures.get(c))) for c in present]
        + [num(count(sum(r.failures.values()))), num(count(r.n_correct))]
        for r in data.rounds
    ]
    return (
        f'<section id="categories" class="card"><h2>{data.metric_label} per category</h2><figure>{categories_chart(data)}</figure>'
        f"{table(['round'] + [escape(lab) for _, lab in cats], cat_rows + [n_row], 'numbers', 'categories-table')}</section>"
        f'<section id="failures" class="card"><h2>Why answers fail</h2>'
        f'<p class="lead">Wrong answers (F1 &lt; 0.5) of each round by failure class, from the gold evidence '
        f"(SQL view <code>question_failures</code>).</p><figure>{failures_chart(data)}</figure>"
        f"{table(fail_headers, fail_rows, 'numbers', 'failures-table')}"
        f"</section>"
    )


def reader_split_section(data: ReportData) -> str:
    """The reader failure split of the best round (an eval's only round) when a model answered:
    where the reader lost what retrieval had found."""
    shown = data.round(data.best_round) if data.best_round is not None else None
    shown = shown or (data.rounds[0] if data.rounds else None)
    split = shown.outcome.reader_split if shown is not None else None
    if shown is None or split is None:
        return ""
    rows = [
        [escape(bucket), num(count(right)), num(count(wrong))] for bucket, right, wrong in split.cells if right or wrong
    ]
    classes = ", ".join(f"{escape(name.replace('_', ' '))} {n}" for name, n in split.full_wrong) or "none"
    return (
        f'<section id="reader-split" class="card"><h2>Where the reader loses the evidence</h2>'
        f'<p class="lead">Round {shown.round}, context {escape(split.context)}: answers by how much of the gold '
        f"evidence was in context; right = the judge&#x27;s verdict, else F1 &ge; {RIGHT_F1}.</p>"
        f"{table(['gold evidence in context', 'right', 'wrong'], rows, 'numbers', 'reader-split-table')}"
        f'<p class="note">Wrong with the full evidence in context: {classes}.</p></section>'
    )


def _failure_bar(r: RoundView, classes: list[str]) -> str:
    wrong = sum(r.failures.values())
    total = wrong + r.n_correct
    if not total:
        return ""
    segs = [
        f'<span style="width:{r.n_correct / total * 100:.2f}%;background:#d1fae5" title="correct: {r.n_correct}"></span>'
    ]
    segs += [
        f'<span style="width:{r.failures[c] / total * 100:.2f}%;background:{svg.FAILURE_COLORS.get(c, "#9ca3af")}" '
        f'title="{escape(c)}: {r.failures[c]}"></span>'
        for c in classes
        if r.failures.get(c)
    ]
    chips = "".join(
        f'<span class="chip"><i style="background:{svg.FAILURE_COLORS.get(c, "#9ca3af")}"></i>'
        f"{escape(c.replace('_', ' '))} {r.failures[c]}</span>"
        for c in classes
        if r.failures.get(c)
    )
    return (
        f'<div class="fbar">{"".join(segs)}</div><p class="small">{r.n_correct} correct · {wrong} wrong</p>'
        f'<div class="chips">{chips}</div>'
    )


def _why(r: RoundView) -> list[str]:
    """The guard's reason and the diagnoser's rationale (once, when the guard just applied the proposal)."""
    parts = []
    if r.diagnoser and r.rationale and r.rationale == r.reason:
        parts.append(
            f'<p><strong>Why:</strong> {escape(r.reason)} <span class="small">(diagnoser '
            f"{escape(r.diagnoser)}; the guard {escape(r.decision or 'kept')} its proposal)</span></p>"
        )
        return parts
    if r.decision:
        parts.append(f"<p><strong>Guard:</strong> {escape(r.reason or r.decision)}</p>")
    if r.diagnoser:
        parts.append(
            f"<p><strong>Diagnoser ({escape(r.diagnoser)}):</strong> {escape(r.rationale or 'no rationale given')}</p>"
        )
    return parts


def round_article(data: ReportData, r: RoundView, base: str) -> str:
    is_best = r.round == data.best_round
    attrs = (
        f'id="round-{r.round}" class="round{" best" if is_best else ""}" data-round="{r.round}" '
        f'data-score="{"" if r.score is None else f"{r.score:.6f}"}" data-decision="{escape(r.decision or "")}" '
        f'data-changes="{len(r.changes)}" data-emerged="{escape(",".join(r.emerged_used))}"'
    )
    left, right = "".join(_round_figures(data, r)), "".join(_round_notes(data, r, base))
    return (
        f'<article {attrs}>{_round_head(data, r, is_best)}<div class="round-body"><div>{left}</div>'
        f"<div>{right}</div></div></article>"
    )


def _round_head(data: ReportData, r: RoundView, is_best: bool) -> str:
    """The article's title: the round's score and change, the guard's decision, best and emerged tags."""
    star = '<span class="best-tag">best round</span>' if is_best else ""
    decision = badge(r.decision) if data.kind == "run" else ""
    lever = (
        f'<span class="emerged-tag" title="switched on levers that emerged in this run">✦ emerged: '
        f"{escape(', '.join(r.emerged_used))}</span>"
        if r.emerged_used
        else ""
    )
    return (
        f'<h3>Round {r.round} <span class="score">{escape(data.score_label)} {f4(r.score)}</span> '
        f'<span class="delta">{signed(r.delta)}</span> {decision} {star} {lever}</h3>'
    )


def _round_figures(data: ReportData, r: RoundView) -> list[str]:
    """The article's left column: its numbers, its failure bar, and a warning when it did not finish."""
    cells = [
        ("main", f3(r.scores.main_f1)),
        ("adversarial", f3(r.scores.adversarial_f1)),
        ("all", f3(r.scores.all_f1)),
        ("evidence recall", f3(r.scores.evidence_recall)),
        ("questions", count(r.scores.n_questions)),
        ("time", "–" if r.scores.wall_seconds is None else f"{r.scores.wall_seconds:.1f} s"),
        ("calls", count(r.usage.usage.calls)),
    ]
    if r.scores.n_failed:
        cells.append(("failed", count(r.scores.n_failed)))
    metrics = (
        '<div class="minis">'
        + "".join(f'<div class="mini"><span>{escape(k)}</span><b>{escape(v)}</b></div>' for k, v in cells)
        + "</div>"
    )
    left = [metrics, _failure_bar(r, data.failure_classes)]
    if r.scores.status != "done":
        left.append('<p class="warn">This round did not finish (resume the run to complete it).</p>')
    return left


def _round_notes(data: ReportData, r: RoundView, base: str) -> list[str]:
    """The article's right column: first how this round fared against the incumbent, then what the
    guard and the diagnoser did next, the config changes, re-extraction and the round's files."""
    right = []
    if r.paired is not None:
        outcome = (
            "significant gain: the new best"
            if r.accepted
            else "a significant loss"
            if r.significant_loss
            else "no significant gain"
        )
        right.append(
            f"<p><strong>Paired vs round {r.paired.incumbent_round}:</strong> {outcome}</p>"
            + paired_groups_table(data, r)
        )
        if r.verdict and r.verdict not in r.reason:
            right.append(f'<p class="small">Verdict: {escape(r.verdict)}</p>')
    right += _why(r)
    if r.fallback:
        right.append(f'<p class="warn">Rubric fallback: {escape(r.fallback)}</p>')
    right += _flag_lists(r)
    right += _proposal_notes(r)
    if r.reextracted_sessions or r.memories_added:
        right.append(
            f"<p>Re-extracted {len(r.reextracted_sessions)} session(s) with extraction gaps; "
            f"{r.memories_added} memories added (versioned with round {r.round + 1}).</p>"
        )
    if r.files:
        links = " · ".join(f'<a href="{escape(base + f)}">{escape(Path(f).name)}</a>' for f in r.files)
        right.append(f'<p class="files">Files: {links}</p>')
    return right


def _proposal_notes(r: RoundView) -> list[str]:
    """What the diagnoser asked for when it was not applied as is, what of its reply was rejected,
    and the config changes the next round evaluates."""
    notes = []
    applied = {(c.field, c.scope, value_text(c.new)) for c in r.changes}
    asked = {(c.field, c.scope, value_text(c.new)) for c in r.proposed}
    if r.proposed and asked != applied:
        notes.append(
            '<p class="small">The diagnoser asked for (not applied as is):</p>' + changes_table(r.proposed, False)
        )
    if r.parse_error:
        notes.append(f'<p class="warn">Diagnosis reply rejected in part: {escape(r.parse_error)}</p>')
    if r.rejected:
        notes.append('<p class="small">Rejected: ' + "; ".join(escape(x) for x in r.rejected) + "</p>")
    if r.missing_topics:
        notes.append(
            '<p class="small">Missing topics named: ' + ", ".join(escape(x) for x in r.missing_topics) + "</p>"
        )
    if r.changes:
        notes.append(f"<p><strong>Config changes for round {r.round + 1}:</strong></p>" + changes_table(r.changes))
    elif r.decision:
        notes.append('<p class="small">No config change after this round.</p>')
    return notes


def held_out_interval(held: Comparison | None, key: str) -> str:
    """` [+0.020, +0.210] p(better) 0.012 (paired, n=120)`: the held-out verdict of the group a
    headline figure belongs to, as `evolve run` prints it (one-sided p of a gain); "" for a figure
    that is not a group's compared metric (the headline's keys follow the run's metric)."""
    group = {"main_f1": "main", "adversarial_f1": "adversarial", "main_evidence_recall": "main"}.get(key)
    if held is None or group is None:
        return ""
    stat = held.groups.get(group)
    if stat is None or not stat.n:
        return ""
    return f" [{stat.ci_low:+.3f}, {stat.ci_high:+.3f}] p(better) {stat.p_gain:.3f} (paired, n={stat.n})"


def paired_cell(stat: PairedStat | None) -> str:
    """`+0.0123 [-0.004, +0.030] p(better) 0.012`: mean paired difference, 95% interval, and the
    one-sided p-value of the direction it points, its side named (as `evolve show` gives it)."""
    if stat is None:
        return "–"
    return f"{stat.diff:+.4f} [{stat.ci_low:+.3f}, {stat.ci_high:+.3f}] {named_p(stat)}"


def _two_line(text: str) -> str:
    """A paired cell with the difference on top and its interval and p-value below, so the table fits."""
    diff, _, rest = text.partition(" ")
    return num(escape(diff) + (f' <br><span class="ci">{escape(rest)}</span>' if rest else ""))


def paired_groups_table(data: ReportData, r: RoundView) -> str:
    """One round's paired comparison per group: both means on the same questions and their difference."""
    rows = []
    for name in GROUPS:
        stat = r.group(name)
        if stat is not None:
            rows.append(
                [
                    escape(name),
                    num(count(stat.n)),
                    num(f3(stat.incumbent)),
                    num(f3(stat.candidate)),
                    num(escape(paired_cell(stat))),
                ]
            )
    held, total = data.held(r)
    note = f'<p class="small">{held} of {total} dev conversations hold.</p>' if total else ""
    incumbent = r.paired.incumbent_round if r.paired else r.compared_with
    return (
        table(
            ("group", "n", f"round {incumbent}", f"round {r.round}", "difference [95%] p"),
            rows,
            "numbers paired",
            f"paired-{r.round}",
        )
        + note
    )


def _verdict(r: RoundView) -> str:
    if r.paired is None or r.accepted is None:
        return "start" if r.round == 0 and r.decision else "–"
    return "gain" if r.accepted else ("loss" if r.significant_loss else "no gain")


def _flag_lists(r: RoundView) -> list[str]:
    """The flags in full, for the round's article: the diagnoser's, and the rubric's after a fallback."""
    lists = [(f"⚑ Diagnoser {r.diagnoser or ''} proposed against the round's evidence", r.diagnoser_flags)]
    if r.fallback:
        lists.append(("⚑ The rubric's fallback proposal against the round's evidence", r.flags))
    out = []
    for title, flags in lists:
        if not flags:
            continue
        items = '<ul class="flags">' + "".join(f"<li>{escape(x)}</li>" for x in flags) + "</ul>"
        head = f"{escape(title)} ({len(flags)})"
        out.append(
            f'<p class="warn">{head}:</p>{items}'
            if len(flags) <= 3
            else f'<details class="flags"><summary class="warn">{head}</summary>{items}</details>'
        )
    return out


def _flags_cell(r: RoundView) -> str:
    """A compact ⚑ cell: the first flag in full, how many more, a link to the round for the rest."""
    parts = []
    for who, flags in (("", r.diagnoser_flags), ("rubric: ", r.flags if r.fallback else [])):
        if flags:
            more = f' <a href="#round-{r.round}">+{len(flags) - 1} more</a>' if len(flags) > 1 else ""
            parts.append(f"⚑ {escape(who + flags[0])}{more}")
    return "<br>".join(parts)


def _summary_list(data: ReportData) -> str:
    """Accepted rounds, proposals against the evidence per proposer, and rubric fallbacks, in three lines."""
    judged = data.judged
    accepted = [r for r in judged if r.accepted]
    losses = sum(bool(r.significant_loss) for r in judged)
    rounds_text = ", ".join(f'<a href="#round-{r.round}">{r.round}</a>' for r in accepted)
    lines = [
        f"<strong>{len(accepted)} of {len(judged)}</strong> judged round(s) accepted as a significant gain"
        + (f" (round {rounds_text})" if accepted else "")
        + f"; {losses} significant loss(es)."
    ]
    counts = data.flag_counts()
    if counts:
        lines.append(
            "Proposals against the round's own evidence (⚑): "
            + "; ".join(
                f"<strong>{escape(c.proposer)}</strong> {c.flagged} of {c.proposals} ({c.flags} flag(s))"
                for c in counts
            )
            + "."
        )
    fallbacks = [r for r in data.rounds if r.fallback]
    diagnosed = sum(bool(r.diagnoser) for r in data.rounds)
    lines.append(
        f"<strong>{len(fallbacks)}</strong> of {diagnosed} diagnos{'i' if diagnosed == 1 else 'e'}s fell back "
        "to the rubric's best action"
        + (
            " (round " + ", ".join(f'<a href="#round-{r.round}">{r.round}</a>' for r in fallbacks) + ")"
            if fallbacks
            else ""
        )
        + "."
    )
    return '<ul class="summary">' + "".join(f"<li>{line}</li>" for line in lines) + "</ul>"


def decisions_section(data: ReportData) -> str:
    """Every round's paired verdict against its incumbent with both groups, the proposals the evidence
    contradicts and the rubric fallbacks; then the per-conversation differences of the accepted rounds."""
    if data.kind != "run" or not any(r.decision for r in data.rounds):
        return (
            '<section id="decisions" class="card"><h2>Decisions, paired</h2><p class="note">Not applicable: '
            "no round of this directory was judged against another.</p></section>"
        )
    rows = [_decision_row(data, r) for r in data.rounds if r.decision]
    # the paired figure is the one the run was judged on: an evidence run compares recall, not F1
    unit = "recall" if data.metric == "evidence_recall" else "F1"
    group_headers = (f"main {unit} Δ [95%] p", f"adversarial {unit} Δ [95%] p")
    return (
        f'<section id="decisions" class="card"><h2>Decisions, paired</h2><p class="lead">Objective '
        f"<strong>{escape(data.objective)}</strong>: {escape(data.objective_meaning)}. Each round is compared "
        "with the incumbent (the best round so far) on the same dev questions: the mean difference per group, "
        f"its 95% interval (conversations resampled) and one-sided p-value; alpha {data.guard.alpha:g}, smallest "
        f"gain {data.guard.min_effect:g}.</p>{_summary_list(data)}"
        + table(
            (
                "round",
                "vs round",
                "verdict",
                *group_headers,
                "conversations hold",
                "guard: next round",
                "⚑ proposal vs evidence",
                "rubric fallback",
            ),
            rows,
            "numbers",
            "decisions-table",
        )
        + _accepted_by_conversation(data)
        + "</section>"
    )


def _decision_row(data: ReportData, r: RoundView) -> list[str]:
    """One judged round of the decisions table."""
    held, total = data.held(r)
    verdict = _verdict(r)
    cls = {"gain": "up", "loss": "down"}.get(verdict, "")
    incumbent = r.paired.incumbent_round if r.paired else r.compared_with
    return [
        f'<a href="#round-{r.round}">{r.round}</a>',
        num("–" if incumbent is None else str(incumbent)),
        f'<td class="{cls}">{escape(verdict)}</td>',
        _two_line(paired_cell(r.group("main"))),
        _two_line(paired_cell(r.group("adversarial"))),
        num(f"{held}/{total}" if total else "–"),
        badge(r.decision),
        _flags_cell(r),
        escape(r.fallback) or "–",
    ]


def _accepted_by_conversation(data: ReportData) -> str:
    """The accepted rounds' mean difference per dev conversation (a loss beyond the consistency
    tolerance marked); empty when no accepted round has them."""
    tolerance = data.guard.consistency_tolerance
    accepted = [r for r in data.judged if r.accepted and r.paired and r.paired.by_conversation]
    if not accepted:
        return ""
    names = sorted({c for r in accepted if r.paired for c in r.paired.by_conversation})
    cells = [
        [f'<a href="#round-{r.round}">{r.round}</a>', num(str(r.paired.incumbent_round))]
        + [
            num(
                signed(r.paired.by_conversation.get(c), 3),
                "down" if (r.paired.by_conversation.get(c) or 0) < -tolerance else "",
            )
            if c in r.paired.by_conversation
            else num("–")
            for c in names
        ]
        for r in accepted
        if r.paired
    ]
    metric = (
        "F1 over all questions" if objective_column(data.objective) == "all_f1" else objective_label(data.objective)
    )
    return (
        f'<p class="small">Accepted rounds per dev conversation: mean difference in {metric} against the '
        f"incumbent (a conversation holds when it loses less than {tolerance:g}).</p>"
        + table(["round", "vs", *map(escape, names)], cells, "numbers compact", "decisions-by-conversation")
    )


def rounds_section(data: ReportData, base: str) -> str:
    body = "".join(round_article(data, r, base) for r in data.rounds) or "<p>No round was evaluated.</p>"
    return (
        f'<section id="rounds" class="card"><h2>Round by round</h2><p class="lead">What each round scored, why the '
        f"guard decided as it did, the diagnoser's rationale, and the config changes the next round evaluated.</p>"
        f"{body}</section>"
    )


USAGE_HEADERS = (
    "stage",
    "calls",
    "cache hits",
    "failed",
    "prompt tokens",
    "completion tokens",
    "cost",
    "calls per role",
    "eval time",
)


def usage_section(data: ReportData) -> str:
    def row(label: str, u: Usage, by_role: dict[str, int], wall: float | None) -> list[str]:
        roles = ", ".join(f"{k} {v}" for k, v in sorted(by_role.items()) if v) or "–"
        return [
            escape(label),
            num(count(u.calls)),
            num(count(u.cache_hits)),
            num(count(u.failures)),
            num(count(u.prompt_tokens)),
            num(count(u.completion_tokens)),
            num(f"${u.cost_usd:.4f}"),
            escape(roles),
            num("–" if wall is None else f"{wall:.1f} s"),
        ]

    walls = {r.round: r.scores.wall_seconds for r in data.rounds}
    rows = [
        row(u.label, u.usage, u.calls_by_role, walls.get(u.round) if u.phase == data.phase and u.round >= 0 else None)
        for u in data.usage
    ]
    total = sum((u.usage for u in data.usage), Usage())
    rows.append(row("total", total, {}, sum(w or 0 for w in walls.values())))
    note = (
        ""
        if total.calls or total.cache_hits
        else '<p class="note">Every role ran offline: no LLM calls, tokens or cost.</p>'
    )
    return (
        f'<section id="usage" class="card"><h2>Calls, tokens and cost</h2>{note}'
        f"{table(USAGE_HEADERS, rows, 'numbers with-total', 'usage-table')}"
        f"</section>"
    )


COST_HEADERS = (
    "round",
    "answered",
    "reused: context",
    "reused: config",
    "screened (minibatch questions)",
    "screenings (out)",
    "calls",
    "cache hits",
    "tokens",
    "full evaluation: questions / ~calls",
    "cost vs full evaluation",
)


def cost_section(data: ReportData) -> str:
    """Each round's evaluations (dev and minibatch screenings) against full evaluation."""
    if not data.costs or data.cost_total is None:
        return ""

    def ratio(c: EvaluationCost) -> str:
        value = c.call_ratio if c.call_ratio is not None else c.question_ratio
        return "–" if value is None else f"{value:.2f}×"

    def row(label: str, c: EvaluationCost) -> list[str]:
        full = f"{count(c.full_questions)} / {'–' if not c.full_calls else count(round(c.full_calls))}"
        return [
            escape(label),
            num(count(c.scored)),
            num(count(c.reused_context)),
            num(count(c.reused_config)),
            num(count(c.screened)),
            num(f"{c.screenings} ({c.screened_out})"),
            num(count(c.calls)),
            num(count(c.cache_hits)),
            num(count(c.tokens)),
            num(full),
            num(ratio(c)),
        ]

    rows = [row(f"round {c.round}", c) for c in data.costs] + [row("total", data.cost_total)]
    screened = "".join(
        f"<li>round {s.round}, screening {s.attempt} ({escape(str(s.source))}, "
        f"{count(s.n_questions)} questions, {count(s.calls)} calls): "
        f"<b>{escape(str(s.outcome).replace('_', ' '))}</b>{escape(rung_text(s.rung))} — {escape(str(s.reason))}</li>"
        for s in data.screenings
    )
    lead = (
        '<p class="lead">What the rounds paid against full evaluation (every dev question answered once per '
        "round). Answers are reused when a question's context and answer settings were answered before "
        "(context) or its effective config was scored before (config); candidates are screened on a "
        "stratified minibatch first and only those that pass get the full dev evaluation. The ratio is "
        "calls against the full evaluation's (estimated at the run's calls per answered question), or "
        "answered questions when the run makes no calls.</p>"
    )
    return (
        f'<section id="cost" class="card"><h2>Cost vs full evaluation</h2>{lead}'
        f"{table(COST_HEADERS, rows, 'numbers with-total', 'cost-table')}"
        f"{'<ul>' + screened + '</ul>' if screened else ''}</section>"
    )


def start_best_cells(start: float | None, best: float | None) -> list[str]:
    """Start, best and their difference (coloured up/down) as three numeric cells."""
    delta = None if start is None or best is None else best - start
    cls = "" if delta is None or abs(delta) < 5e-5 else ("up" if delta > 0 else "down")
    return [num(f4(start)), num(f4(best)), num(signed(delta), cls)]


def dev_test_section(data: ReportData, base: str) -> str:
    if not data.finals:
        return (
            '<section id="dev-vs-test" class="card"><h2>Dev vs test</h2><p class="note">Not applicable: '
            "this directory holds one evaluation, not an evolution run.</p></section>"
        )
    by = {f.which: f for f in data.finals}
    start, best = by.get("start"), by.get("best")
    if start is None or best is None:
        return ""

    def cells(a: RoundSummary | None, b: RoundSummary | None, key: str) -> list[str]:
        return start_best_cells(a.column(key) if a else None, b.column(key) if b else None)

    metrics = (
        ("all_f1", "all F1"),
        ("main_f1", "main F1 (non-adversarial)"),
        ("adversarial_f1", "adversarial F1"),
        ("evidence_recall", "evidence recall"),
    )
    rows = "".join(
        f"<tr><td>{label}</td>{''.join(cells(start.dev, best.dev, k) + cells(start.test, best.test, k))}</tr>"
        for k, label in metrics
    )
    n_dev, n_test = start.dev.n_questions, (start.test.n_questions if start.test else None)
    head = (
        f'<thead><tr><th></th><th colspan="3" class="group">dev ({count(n_dev)} questions, evolved on)</th>'
        f'<th colspan="3" class="group">test ({count(n_test)} questions, held out)</th></tr>'
        f"<tr><th>metric</th>" + f'<th class="num">start (round {start.round})</th>'
        f'<th class="num">best (round {best.round})</th><th class="num">Δ</th>' * 2 + "</tr></thead>"
    )
    pending = (
        ""
        if all(f.test for f in data.finals)
        else '<p class="warn">The run has not finished: test scores are missing (resume it).</p>'
    )
    link = (
        f' (<a href="{escape(base)}best_config.toml">best_config.toml</a>)'
        if (data.run_dir / "best_config.toml").is_file()
        else ""
    )
    changes = (
        (
            f"<p>The best config{link} differs from the start in {len(data.best_vs_start)} value(s):</p>"
            + changes_table(data.best_vs_start)
        )
        if data.best_vs_start
        else f'<p class="small">The best config{link} is the starting config.</p>'
    )
    return (
        f'<section id="dev-vs-test" class="card"><h2>Dev vs test</h2><p class="lead">The best config is chosen on '
        f"dev and scored once on held-out test conversations, so the dev gain can be checked on unseen data."
        f'</p>{pending}<div class="table-wrap"><table class="numbers dev-test" id="dev-test-table">{head}'
        f"<tbody>{rows}</tbody></table></div>{changes}{_category_table(data, start, best)}{_flips(data)}</section>"
    )


def _category_table(data: ReportData, start: FinalScore, best: FinalScore) -> str:
    if not data.category_scores:
        return ""

    rows = [
        [escape(c.label)] + start_best_cells(*c.dev) + start_best_cells(*c.test) + [num(count(c.n_test))]
        for c in data.category_scores
    ]
    return "<h3>F1 per category, start vs best</h3>" + table(
        [
            "category",
            f"dev start (r{start.round})",
            f"dev best (r{best.round})",
            "dev Δ",
            "test start",
            "test best",
            "test Δ",
            "test n",
        ],
        rows,
        "numbers",
        "category-test-table",
    )


def _flips(data: ReportData) -> str:
    if not data.test_flips:
        return ""
    fixed = [f for f in data.test_flips if f.flip == "fixed"]
    broken = [f for f in data.test_flips if f.flip == "broken"]
    shown = fixed[:3] + broken[:3]
    rows = [
        [
            escape(f.flip),
            escape(f.question_type),
            escape(f.question),
            escape(f.gold),
            escape(f.prediction_a),
            escape(f.prediction_b),
            escape(f.failure_a if f.flip == "fixed" else f.failure_b),
        ]
        for f in shown
    ]
    return (
        f"<h3>Questions that flipped on test</h3><p>{len(fixed)} held-out question(s) became right under the best "
        f"config and {len(broken)} became wrong (right = F1 ≥ {RIGHT_F1}); the largest changes of each:</p>"
        + table(
            ["flip", "type", "question", "gold", "start", "best", "why (failure class)"], rows, table_id="flips-table"
        )
    )


def ablation_section(data: ReportData) -> str:
    if not data.ablation:
        return (
            '<section id="ablation" class="card"><h2>Ablation</h2><p class="note">Not run. '
            "<code>evolve ablate RUN</code> re-scores the best config with each mechanism it uses switched off "
            "in turn; this section then shows the table.</p></section>"
        )
    rows = [
        [
            escape(r.label),
            num(f4(r.all_f1)),
            num(signed(r.delta_all)),
            num(f4(r.main_f1)),
            num(signed(r.delta_main)),
            num(f4(r.adversarial_f1)),
            num(signed(r.delta_adversarial)),
            num(f3(r.evidence_recall)),
            num(count(r.n_questions)),
        ]
        for r in data.ablation
    ]
    return (
        f'<section id="ablation" class="card"><h2>Ablation</h2><p class="lead">The best config (round '
        f"{data.ablation_round}) with each mechanism it uses switched off in turn (and each per-type override "
        f"dropped), from <code>evolve ablate</code>; Δ is against the full config on the same questions.</p>"
        + table(
            ["variant", "all F1", "Δ all", "main F1", "Δ main", "adv. F1", "Δ adv.", "evid. recall", "n"],
            rows,
            "numbers",
            "ablation-table",
        )
        + "</section>"
    )


def judge_section(data: ReportData) -> str:
    """Judge accuracy beside F1 per evaluation the LLM judge scored, with the note that it is our
    judge ('' when no judge scored this run)."""
    if not data.judge:
        return ""
    rows = [
        [
            str(round_no),
            escape(phase),
            num(f3(t.main_accuracy)),
            num(f3(t.main_f1)),
            num(count(t.main_judged)),
            num(f3(t.accuracy)),
            num(count(t.judged)),
            num(count(t.unjudged)),
        ]
        for round_no, phase, t in data.judge
    ]
    return (
        f'<section id="judge" class="card"><h2>LLM judge</h2><p class="lead">Each answer judged CORRECT or WRONG '
        f"against the gold answer by {escape(data.judge_version)} (Mem0's LoCoMo judge protocol, our prompt), "
        f"beside token F1 on the same answerable questions. <strong>{escape(honesty_note(data.judge_model))}"
        "</strong>.</p>"
        + table(
            ["round", "phase", "judge acc. (answerable)", "F1 (same)", "n", "judge acc. (all)", "judged", "no verdict"],
            rows,
            "numbers",
            "judge-table",
        )
        + "</section>"
    )


def _bundle_or_reason(proposed: ProposedDimension) -> str:
    if proposed.status == "materialised":
        return escape(", ".join(f"{k} = {value_text(v)}" for k, v in (proposed.maps_to or {}).items()))
    return escape(proposed.reason or "(a run from before levers could emerge)")


def proposed_section(data: ReportData) -> str:
    if not data.proposed_dimensions:
        body = '<p class="note">The diagnoser proposed no new dimensions.</p>'
    else:
        body = (
            '<p class="lead">Levers the diagnoser asked for that the action space does not have. A valid one '
            "(a bundle of existing settings) is materialised as a file of the run and can be switched on from "
            "the next round on, judged by the guard like any change; an invalid one is refused, with the "
            "reason.</p>"
            + table(
                ["round", "name", "status", "bundle / reason", "description", "rationale"],
                [
                    [
                        f'<a href="#round-{d.round}">{d.round}</a>',
                        f"<code>{escape(d.name)}</code>",
                        escape(d.status or "recorded"),
                        _bundle_or_reason(d),
                        escape(d.description or ""),
                        escape(d.rationale or ""),
                    ]
                    for d in data.proposed_dimensions
                ],
                table_id="proposed-table",
            )
        )
    return f'<section id="proposed-dimensions" class="card"><h2>Proposed new dimensions</h2>{body}</section>'


def _css() -> str:
    return """
*{box-sizing:border-box}
body{margin:0;background:#f4f6f9;color:#1f2937;font:15px/1.55 system-ui,-apple-system,'Segoe UI','DejaVu Sans',sans-serif}
main{max-width:1080px;margin:0 auto;padding:0 20px 48px}
header.top{background:#0f172a;color:#f8fafc;padding:26px 0 18px;margin-bottom:22px}
header.top .inner{max-width:1080px;margin:0 auto;padding:0 20px}
header.top h1{margin:0;font-size:24px;font-weight:650;letter-spacing:-.01em}
header.top .sub{color:#cbd5e1;margin-top:4px}
nav{margin-top:14px;display:flex;flex-wrap:wrap;gap:6px 16px;font-size:13.5px}
nav a{color:#93c5fd;text-decoration:none}nav a:hover{text-decoration:underline}
h2{font-size:18px;margin:0 0 10px}h3{font-size:16px;margin:0 0 8px;display:flex;align-items:center;gap:10px;flex-wrap:wrap}
.card{background:#fff;border:1px solid #e5e7eb;border-radius:10px;padding:18px 22px;margin:0 0 18px;box-shadow:0 1px 2px rgba(15,23,42,.04)}
.intro p{margin:.4em 0;color:#374151}.lead{color:#4b5563;margin:.2em 0 .8em}
.note{color:#6b7280;font-style:italic}.warn{color:#b45309}.small{font-size:13.5px;color:#4b5563;margin:.3em 0}
figure{margin:6px 0 12px}svg.chart{width:100%;height:auto;display:block}
svg.chart a:hover circle{stroke:#0f172a}
.stats{display:grid;grid-template-columns:repeat(auto-fit,minmax(190px,1fr));gap:12px;margin-bottom:18px}
.stat{background:#fff;border:1px solid #e5e7eb;border-radius:10px;padding:12px 16px}
.stat-label{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:#6b7280}
.stat-value{font-size:22px;font-weight:650;font-variant-numeric:tabular-nums;margin:2px 0}
.stat-note{font-size:12.5px;color:#6b7280}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:4px 18px;margin:0;font-size:14px}
dl.meta dt{color:#6b7280}dl.meta dd{margin:0;word-break:break-word}
code{font:12.5px/1.4 ui-monospace,'DejaVu Sans Mono',monospace;background:#f1f5f9;border-radius:4px;padding:1px 4px}
table{border-collapse:collapse;width:100%;margin:6px 0 10px;font-size:13.5px}
th{text-align:left;font-weight:600;color:#4b5563;border-bottom:2px solid #e5e7eb;padding:5px 8px;vertical-align:bottom}
td{border-bottom:1px solid #f1f5f9;padding:4px 8px;vertical-align:top}
tbody tr:nth-child(even){background:#fafbfc}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
th.num{text-align:right}th.group{text-align:center;border-bottom:1px solid #e5e7eb}
td.up{color:#15803d;font-weight:600}td.down{color:#b91c1c;font-weight:600}
td.heat{text-align:right;font-variant-numeric:tabular-nums}.table-wrap{overflow-x:auto}
table.with-total tbody tr:last-child{font-weight:650;border-top:2px solid #e5e7eb}
table.compact{width:auto}table.compact td,table.compact th{padding:3px 12px}
table.changes{width:100%}
td.best-row{font-weight:700}td.best-row a::after{content:" ★";color:#f59e0b}
a{color:#1d4ed8}
.badge{display:inline-block;color:#fff;border-radius:999px;padding:1px 10px;font-size:12px;font-weight:600;line-height:1.6}

.best-tag{background:#fef3c7;color:#92400e;border-radius:999px;padding:1px 10px;font-size:12px;font-weight:600}
.emerged-tag{background:#ede9fe;color:#5b21b6;border-radius:999px;padding:1px 10px;font-size:12px;font-weight:600}
article.round{border-top:1px solid #e5e7eb;padding:14px 0 6px}
article.round.best{background:linear-gradient(90deg,#fffbeb,#fff 60%);margin:0 -22px;padding:14px 22px 6px}
article.round .score{font-variant-numeric:tabular-nums;color:#1d4ed8}
article.round .delta{font-variant-numeric:tabular-nums;color:#6b7280;font-weight:400;font-size:14px}
article.round p{margin:.35em 0}
.fbar{display:flex;height:10px;border-radius:5px;overflow:hidden;background:#f1f5f9;margin:8px 0 2px}
.fbar span{display:block;height:100%}
.files{font-size:13px;color:#6b7280}
.minis{display:flex;flex-wrap:wrap;gap:6px 14px;margin:2px 0 4px}
.mini span{display:block;font-size:11.5px;color:#6b7280}.mini b{font-variant-numeric:tabular-nums;font-weight:600}
.round-body{display:grid;grid-template-columns:minmax(0,5fr) minmax(0,6fr);gap:4px 28px}
@media (max-width:800px){.round-body{grid-template-columns:1fr}}
td .ci{font-size:12px;color:#6b7280}
ul.flags{margin:.2em 0 .5em;padding-left:20px;font-size:13px;color:#4b5563}
details.flags summary{cursor:pointer;margin:.35em 0}
ul.summary{margin:.2em 0 .8em;padding-left:20px}
.chips{display:flex;flex-wrap:wrap;gap:4px 12px;font-size:12.5px;color:#4b5563}
.chip i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
footer{color:#9ca3af;font-size:12.5px;text-align:center;margin-top:24px}
@media print{header.top{background:none;color:#000}nav{display:none}.card{box-shadow:none;break-inside:avoid-page}}
"""


def render_html(data: ReportData, out_dir: Path | None = None) -> str:
    """The whole page. Links to round snapshot files are made relative to `out_dir` (the report's folder)."""
    base = os.path.relpath(data.run_dir, out_dir) if out_dir is not None else str(data.run_dir)
    base = "" if base == "." else base.rstrip("/") + "/"
    nav = "".join(
        f'<a href="#{i}">{t}</a>'
        for i, t in (
            ("how-to-read", "how to read"),
            ("run", "run"),
            ("trajectory", "trajectory"),
            ("dev-vs-test", "dev vs test"),
            *((("frontier", "frontier"),) if data.frontier else ()),
            ("decisions", "decisions"),
            ("categories", "categories"),
            ("failures", "failures"),
            ("rounds", "rounds"),
            ("usage", "usage"),
            ("cost", "cost"),
            ("ablation", "ablation"),
            ("proposed-dimensions", "proposed dimensions"),
            *((("judge", "LLM judge"),) if data.judge else ()),
        )
    )
    bench = next((v for k, v in data.header if k == "benchmark"), "?")
    title = f"evolvemem report · {data.run_id}"
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><title>{escape(title)}</title>'
        f"<style>{_css()}</style></head><body>"
        f'<header class="top"><div class="inner"><h1>evolvemem report — {escape(data.run_id)}</h1>'
        f'<div class="sub">{escape(data.kind)} · benchmark {escape(bench)} · {len(data.rounds)} round(s) · '
        f"generated {escape(data.generated_at)}</div><nav>{nav}</nav></div></header><main>"
        f"{summary_cards(data)}{how_to_read(data)}{run_header(data)}{trajectory_section(data)}"
        f"{dev_test_section(data, base)}{frontier_section(data)}{decisions_section(data)}{categories_and_failures(data)}{reader_split_section(data)}{rounds_section(data, base)}"
        f"{usage_section(data)}{cost_section(data)}{ablation_section(data)}{proposed_section(data)}{judge_section(data)}"
        f"<footer>Generated by <code>evolve report</code> from <code>{escape(str(data.run_dir))}/run.duckdb</code>. "
        f"Every number on this page is read from that file.</footer></main></body></html>\n"
    )
