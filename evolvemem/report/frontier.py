"""The report's frontier: a `--budgets` run's evidence recall against context tokens, per budget.

One point per budget for the start and one for that budget's best config, at the mean size of their
contexts (held-out test figures once the run scored them, else dev), so a reader sees what each
extra hundred tokens buys and what the evolution added at each size. The HTML draws it in SVG
(`frontier_section`); `write_frontier_png` draws the same with matplotlib beside the trajectory PNG.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from evolvemem.loop.frontier import FrontierPoint
from evolvemem.report import svg
from evolvemem.report.data import ReportData

FRONTIER_PNG = "frontier.png"


def _recall(p: FrontierPoint, start: bool) -> float | None:
    """A point's held-out recall (dev before the run scored the test questions)."""
    if start:
        return p.test_start_recall if p.test_start_recall is not None else p.dev_start_recall
    return p.test_recall if p.test_recall is not None else p.dev_recall


def _tokens(p: FrontierPoint, start: bool) -> float:
    size = p.start_context_tokens if start else (p.test_context_tokens or p.dev_context_tokens)
    return float(size if size is not None else p.tokens)


def _series(points: list[FrontierPoint]) -> list[svg.Series]:
    return [
        svg.Series(label, color, [(_tokens(p, start), _recall(p, start)) for p in points], dashed=start, width=2.0)
        for label, color, start in (
            ("start", "#9ca3af", True),
            ("evolved (best per budget)", svg.OBJECTIVE_COLOR, False),
        )
    ]


def frontier_section(data: ReportData) -> str:
    """The frontier card ("" for a run without `--budgets`)."""
    points = data.frontier
    if not points:
        return ""
    split = "held-out test" if all(p.test_recall is not None for p in points) else "dev (test not scored yet)"
    chart = svg.line_chart(
        "frontier-chart",
        f"evidence recall (answerable, {split}) against mean context tokens",
        _series(points),
        [(float(p.tokens), str(p.tokens)) for p in points],
        legend=[
            svg.LegendItem("start", "#9ca3af", "dashed"),
            svg.LegendItem("evolved (best per budget)", svg.OBJECTIVE_COLOR),
        ],
        x_label="context tokens (ticks: the run's budgets)",
        y_label="recall",
    )
    rows = "".join(
        "<tr>"
        f"<td>{p.tokens}{' (primary)' if p.primary else ''}</td><td>{p.best_round}</td>"
        f"<td><code>{escape(p.fingerprint or '-')}</code></td>"
        + "".join(
            f'<td class="num">{"-" if v is None else f"{v:.3f}"}</td>'
            for v in (p.dev_start_recall, p.dev_recall, p.test_start_recall, p.test_recall)
        )
        + f'<td class="num">{_held(p)}</td><td class="num">{_tokens(p, False):.0f}</td>'
        + "</tr>"
        for p in points
    )
    table = (
        '<table id="frontier-table"><thead><tr><th>budget</th><th>best round</th><th>config</th>'
        '<th class="num">dev start</th><th class="num">dev best</th><th class="num">test start</th>'
        '<th class="num">test best</th><th class="num">test best − start [95% CI]</th>'
        f'<th class="num">context tokens</th></tr></thead><tbody>{rows}</tbody></table>'
    )
    lead = (
        '<p class="lead">One run scored every budget: each round ranked a question once and cut the ranking '
        "at each budget. The primary budget drives the loop; every other budget keeps the last round the "
        "guard's paired test found significantly better there. Each point's config is "
        "<code>best_config.&lt;budget&gt;.toml</code> (<code>evolve eval --config RUN --budget N</code>).</p>"
    )
    return f'<section id="frontier" class="card"><h2>Frontier</h2>{lead}<figure>{chart}</figure>{table}</section>'


def _held(p: FrontierPoint) -> str:
    if p.held_out is None:
        return "-"
    s = p.held_out.groups["main"]
    return f"{s.diff:+.3f} [{s.ci_low:+.3f}, {s.ci_high:+.3f}]"


def write_frontier_png(data: ReportData, path: Path) -> Path | None:
    """The frontier as a PNG (None for a run without `--budgets`); raises PngUnavailable without
    matplotlib, as the trajectory PNG does."""
    from evolvemem.report.png import _pyplot

    if not data.frontier:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    try:
        for series in _series(data.frontier):
            xs, ys = zip(*[(x, y) for x, y in series.points if y is not None])
            ax.plot(xs, ys, marker="o", color=series.color, linestyle="--" if series.dashed else "-", label=series.name)
        for p in data.frontier:
            ax.annotate(
                str(p.tokens),
                (_tokens(p, False), _recall(p, False) or 0.0),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=8,
            )
        ax.set_xlabel("mean context tokens (labels: the run's budgets)")
        ax.set_ylabel("evidence recall (answerable)")
        ax.set_title(f"{data.run_id}: recall against context tokens", loc="left", fontsize=11)
        ax.grid(color="#e5e7eb")
        ax.legend(frameon=False, fontsize=9)
        ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
