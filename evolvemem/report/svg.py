"""Charts as inline SVG strings: a line chart and a (stacked) bar chart, nothing else.

Written by hand so a report opens offline in any browser with no script, no font download and
no plotting library. Hover text uses SVG `<title>` elements; a marker may link to an anchor of
the page. The colour tables here are the only ones: the HTML page and the PNG export use them too."""

from __future__ import annotations

from evolvemem.contracts.vocab import Decision, FailureClass

import math
from dataclasses import dataclass, field
from html import escape
from typing import Callable, Sequence

# One colour per guard decision, shared by the chart markers, the badges and the PNG.
DECISION_COLORS: dict[str, str] = {
    "start": "#6b7280",
    Decision.APPLIED: "#15803d",
    Decision.REVERTED: "#dc2626",
    Decision.EXPLORED: "#d97706",
    Decision.STOPPED: "#334155",
    Decision.CONVERGED: "#6d28d9",
    Decision.PRUNED: "#0e7490",
    Decision.LEVER_PAYS: "#475569",
    "pending": "#a1a1aa",
}
UNKNOWN_DECISION_COLOR = "#78716c"

# One colour per failure class (contracts/vocab.FailureClass but `correct`).
FAILURE_COLORS: dict[str, str] = {
    FailureClass.EXTRACTION_GAP: "#7c3aed",
    FailureClass.RETRIEVAL_MISS: "#2563eb",
    FailureClass.BUDGET_CUT: "#0891b2",
    FailureClass.ANSWER_ERROR: "#dc2626",
    FailureClass.WRONG_ABSTENTION: "#f59e0b",
    FailureClass.FORMAT_MISMATCH: "#84cc16",
    FailureClass.HALLUCINATION: "#db2777",
    FailureClass.UNKNOWN: "#9ca3af",
    FailureClass.CALL_FAILED: "#111827",
}

# Categorical palette for per-category lines (cycled when there are more categories).
SERIES_COLORS: tuple[str, ...] = (
    "#2563eb",
    "#ea580c",
    "#16a34a",
    "#9333ea",
    "#0891b2",
    "#c026d3",
    "#ca8a04",
    "#475569",
    "#e11d48",
    "#0d9488",
)

OBJECTIVE_COLOR = "#1d4ed8"
# The two groups a balanced objective judges apart: answerable (main) and unanswerable (adversarial).
GROUP_COLORS: dict[str, str] = {"main": "#16a34a", "adversarial": "#9333ea"}
BEST_SO_FAR_COLOR = "#94a3b8"
BEST_RING_COLOR = "#f59e0b"

FONT = "font-family=\"system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', sans-serif\""
CHAR_WIDTH = 6.6  # rough width of one 12px character, for laying out labels without a font engine


def decision_color(kind: str | None) -> str:
    return DECISION_COLORS.get(kind or "pending", UNKNOWN_DECISION_COLOR)


def series_color(index: int) -> str:
    return SERIES_COLORS[index % len(SERIES_COLORS)]


@dataclass
class Series:
    """A named polyline; points with y=None leave a gap."""

    name: str
    color: str
    points: list[tuple[float, float | None]]
    dashed: bool = False
    width: float = 2.0
    step: bool = False  # draw as a staircase (e.g. "best so far")
    dots: bool = True


@dataclass
class Marker:
    """A point drawn over the lines; `href` makes it a link, `tooltip` its hover text."""

    x: float
    y: float
    color: str
    tooltip: str = ""
    href: str = ""
    radius: float = 5.5
    ring: str = ""  # colour of a highlight ring (the best round)
    label: str = ""  # short text drawn above the marker
    shape: str = "dot"  # dot (filled circle) or diamond (hollow: a held-out test score)


@dataclass
class LegendItem:
    label: str
    color: str
    kind: str = "line"  # line, dashed, dot, ring, diamond, box


@dataclass
class Frame:
    """Maps data coordinates to pixels inside the plot area."""

    left: float
    top: float
    width: float
    height: float
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float

    def px(self, x: float) -> float:
        span = self.x_hi - self.x_lo
        return self.left + (self.width / 2 if span == 0 else (x - self.x_lo) / span * self.width)

    def py(self, y: float) -> float:
        span = self.y_hi - self.y_lo or 1.0
        return self.top + self.height - (y - self.y_lo) / span * self.height


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 2.5 or 5 times a power of ten apart)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(lo / step + 1e-9) * step
    ticks, value = [], first
    while value <= hi + step * 1e-6:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < hi - 1e-12:
        ticks.append(round(value, 10))
    return ticks


def auto_range(
    values: Sequence[float], floor: float | None = 0.0, ceil: float | None = 1.0, min_span: float = 0.02
) -> tuple[float, float]:
    """A y range around the data with a little padding, clipped to [floor, ceil] when given."""
    if not values:
        return (floor or 0.0, ceil if ceil is not None else 1.0)
    lo, hi = min(values), max(values)
    pad = max((hi - lo) * 0.15, min_span / 2)
    lo, hi = lo - pad, hi + pad
    if floor is not None:
        lo = max(lo, floor)
    if ceil is not None:
        hi = min(hi, ceil)
    return lo, hi


def _fmt_tick(value: float, step: float) -> str:
    """As few decimals as the tick step needs (0.025 → 3, 0.05 → 2, 5 → 0)."""
    if step >= 1:
        return f"{value:.0f}"
    decimals = -math.floor(math.log10(step))
    if abs(round(step, decimals) - step) > 1e-12:
        decimals += 1
    return f"{value:.{decimals}f}"


def _text(
    x: float, y: float, content: str, anchor: str = "start", size: int = 12, color: str = "#374151", extra: str = ""
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" fill="{color}"{extra}>'
        f"{escape(content)}</text>"
    )


def _legend(items: Sequence[LegendItem], x: float, y: float) -> str:
    parts = []
    for i, item in enumerate(items):
        cy = y + i * 20
        if item.kind in ("line", "dashed"):
            dash = ' stroke-dasharray="5 3"' if item.kind == "dashed" else ""
            parts.append(
                f'<line x1="{x:.1f}" y1="{cy:.1f}" x2="{x + 18:.1f}" y2="{cy:.1f}" stroke="{item.color}" '
                f'stroke-width="2.5"{dash}/>'
            )
        elif item.kind == "ring":
            parts.append(
                f'<circle cx="{x + 9:.1f}" cy="{cy:.1f}" r="6" fill="none" stroke="{item.color}" stroke-width="3"/>'
            )
        elif item.kind == "dot":
            parts.append(f'<circle cx="{x + 9:.1f}" cy="{cy:.1f}" r="5" fill="{item.color}"/>')
        elif item.kind == "diamond":
            parts.append(_diamond(x + 9, cy, 6, item.color))
        else:
            parts.append(f'<rect x="{x + 3:.1f}" y="{cy - 6:.1f}" width="12" height="12" rx="2" fill="{item.color}"/>')
        parts.append(_text(x + 25, cy + 4, item.label))
    return f'<g class="legend">{"".join(parts)}</g>'


def _legend_width(items: Sequence[LegendItem]) -> float:
    return 0.0 if not items else 40 + CHAR_WIDTH * max(len(i.label) for i in items)


def _axes(
    frame: Frame,
    y_ticks: Sequence[float],
    x_ticks: Sequence[tuple[float, str]],
    x_label: str,
    y_label: str,
    y_format: Callable[[float], str],
) -> str:
    parts = []
    for tick in y_ticks:
        py = frame.py(tick)
        parts.append(
            f'<line x1="{frame.left:.1f}" y1="{py:.1f}" x2="{frame.left + frame.width:.1f}" y2="{py:.1f}" '
            f'stroke="#e5e7eb" stroke-width="1"/>'
        )
        parts.append(_text(frame.left - 8, py + 4, y_format(tick), anchor="end", size=11, color="#6b7280"))
    bottom = frame.top + frame.height
    parts.append(
        f'<line x1="{frame.left:.1f}" y1="{bottom:.1f}" x2="{frame.left + frame.width:.1f}" y2="{bottom:.1f}" '
        f'stroke="#9ca3af" stroke-width="1"/>'
    )
    for x, label in x_ticks:
        parts.append(_text(frame.px(x), bottom + 17, label, anchor="middle", size=11, color="#6b7280"))
    if x_label:
        parts.append(_text(frame.left + frame.width / 2, bottom + 36, x_label, anchor="middle", color="#4b5563"))
    if y_label:
        cx, cy = 16, frame.top + frame.height / 2
        parts.append(
            _text(cx, cy, y_label, anchor="middle", color="#4b5563", extra=f' transform="rotate(-90 {cx} {cy:.1f})"')
        )
    return f'<g class="axes">{"".join(parts)}</g>'


def _svg_open(chart_id: str, width: float, height: float, title: str) -> str:
    return (
        f'<svg id="{escape(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}" '
        f'aria-labelledby="{escape(chart_id)}-title" {FONT}>'
        f'<title id="{escape(chart_id)}-title">{escape(title)}</title>'
    )


def _polyline(frame: Frame, series: Series) -> str:
    """Runs of consecutive defined points become one path each."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in series.points:
        if y is None:
            runs.append([])
        else:
            runs[-1].append((frame.px(x), frame.py(y)))
    dash = ' stroke-dasharray="6 4"' if series.dashed else ""
    parts = []
    for run in runs:
        if len(run) < 2:
            continue
        coords = [run[0]]
        for px, py in run[1:]:
            if series.step:
                coords.append((px, coords[-1][1]))
            coords.append((px, py))
        d = "M" + " L".join(f"{px:.1f},{py:.1f}" for px, py in coords)
        parts.append(
            f'<path d="{d}" fill="none" stroke="{series.color}" stroke-width="{series.width}" '
            f'stroke-linejoin="round"{dash}><title>{escape(series.name)}</title></path>'
        )
    if series.dots:
        for x, y in series.points:
            if y is not None:
                parts.append(
                    f'<circle cx="{frame.px(x):.1f}" cy="{frame.py(y):.1f}" r="3" fill="{series.color}">'
                    f"<title>{escape(series.name)}: {y:.3f}</title></circle>"
                )
    return f'<g class="series" data-series="{escape(series.name)}">{"".join(parts)}</g>'


def _diamond(cx: float, cy: float, r: float, color: str) -> str:
    return (
        f'<path d="M{cx:.1f},{cy - r:.1f} L{cx + r:.1f},{cy:.1f} L{cx:.1f},{cy + r:.1f} L{cx - r:.1f},{cy:.1f} Z" '
        f'fill="#fff" stroke="{color}" stroke-width="2.2"/>'
    )


def _marker(frame: Frame, m: Marker) -> str:
    cx, cy = frame.px(m.x), frame.py(m.y)
    parts = []
    if m.ring:
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{m.radius + 5:.1f}" fill="none" stroke="{m.ring}" '
            f'stroke-width="3"/>'
        )
    if m.shape == "diamond":
        parts.append(_diamond(cx, cy, m.radius + 1, m.color))
    else:
        parts.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{m.radius:.1f}" fill="{m.color}" stroke="#fff" '
            f'stroke-width="1.5"/>'
        )
    if m.label:
        parts.append(
            _text(
                cx, cy - m.radius - 10, m.label, anchor="middle", size=11, color="#92400e", extra=' font-weight="600"'
            )
        )
    body = "".join(parts) + (f"<title>{escape(m.tooltip)}</title>" if m.tooltip else "")
    group = f'<g class="marker">{body}</g>'
    return f'<a href="{escape(m.href)}">{group}</a>' if m.href else group


def line_chart(
    chart_id: str,
    title: str,
    series: Sequence[Series],
    x_ticks: Sequence[tuple[float, str]],
    markers: Sequence[Marker] = (),
    legend: Sequence[LegendItem] = (),
    y_range: tuple[float, float] | None = None,
    x_label: str = "round",
    y_label: str = "",
    width: float = 820,
    height: float = 320,
    y_format: Callable[[float], str] | None = None,
) -> str:
    """Lines over integer-like x values (rounds), with optional linked markers and a legend on the right."""
    xs = [x for s in series for x, _ in s.points] + [m.x for m in markers] + [x for x, _ in x_ticks]
    ys = [y for s in series for _, y in s.points if y is not None] + [m.y for m in markers]
    lo, hi = y_range or auto_range(ys)
    ticks = nice_ticks(lo, hi)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    legend_w = _legend_width(legend)
    x_lo, x_hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    pad = 0.35 if x_hi > x_lo else 0.0
    frame = Frame(
        left=62,
        top=28,
        width=width - 62 - 24 - legend_w,
        height=height - 28 - 52,
        x_lo=x_lo - pad,
        x_hi=x_hi + pad,
        y_lo=lo,
        y_hi=hi,
    )
    parts = [
        _svg_open(chart_id, width, height, title),
        _axes(frame, ticks, x_ticks, x_label, y_label, y_format or (lambda v: _fmt_tick(v, step))),
    ]
    parts.extend(_polyline(frame, s) for s in series)
    parts.extend(_marker(frame, m) for m in markers)
    if legend:
        parts.append(_legend(legend, frame.left + frame.width + 24, frame.top + 6))
    parts.append("</svg>")
    return "".join(parts)


@dataclass
class BarStack:
    """One layer of a stacked bar chart: a name, a colour and one value per bar."""

    name: str
    color: str
    values: list[float]
    tooltips: list[str] = field(default_factory=list)


def bar_chart(
    chart_id: str,
    title: str,
    x_labels: Sequence[str],
    stacks: Sequence[BarStack],
    legend: Sequence[LegendItem] = (),
    y_max: float | None = None,
    x_label: str = "",
    y_label: str = "",
    width: float = 820,
    height: float = 320,
    y_format: Callable[[float], str] | None = None,
    totals: bool = True,
) -> str:
    """Bars (stacked when there are several stacks), one per x label, with the total above each bar."""
    n = len(x_labels)
    sums = [sum(s.values[i] for s in stacks) for i in range(n)]
    top = y_max if y_max is not None else max(sums + [1.0])
    ticks = nice_ticks(0.0, top)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    legend_w = _legend_width(legend)
    frame = Frame(
        left=62,
        top=28,
        width=width - 62 - 24 - legend_w,
        height=height - 28 - 52,
        x_lo=-0.5,
        x_hi=max(n - 0.5, 0.5),
        y_lo=0.0,
        y_hi=ticks[-1],
    )
    fmt = y_format or (lambda v: _fmt_tick(v, step))
    parts = [
        _svg_open(chart_id, width, height, title),
        _axes(frame, ticks, [(i, lab) for i, lab in enumerate(x_labels)], x_label, y_label, fmt),
    ]
    bar_w = min(56.0, frame.width / max(n, 1) * 0.6)
    for i in range(n):
        base = 0.0
        cx = frame.px(i)
        for stack in stacks:
            value = stack.values[i]
            if value <= 0:
                continue
            y0, y1 = frame.py(base), frame.py(base + value)
            tip = stack.tooltips[i] if i < len(stack.tooltips) and stack.tooltips[i] else f"{stack.name}: {value:g}"
            parts.append(
                f'<rect x="{cx - bar_w / 2:.1f}" y="{y1:.1f}" width="{bar_w:.1f}" height="{max(y0 - y1, 0.5):.1f}" '
                f'fill="{stack.color}" data-x="{escape(x_labels[i])}" data-layer="{escape(stack.name)}" data-value="{value:g}">'
                f"<title>{escape(x_labels[i])} · {escape(tip)}</title></rect>"
            )
            base += value
        if totals:
            parts.append(
                _text(
                    cx,
                    frame.py(base) - 6,
                    fmt(sums[i]) if y_format else f"{sums[i]:g}",
                    anchor="middle",
                    size=11,
                    color="#374151",
                )
            )
    if legend:
        parts.append(_legend(legend, frame.left + frame.width + 24, frame.top + 6))
    parts.append("</svg>")
    return "".join(parts)
