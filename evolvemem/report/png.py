"""A PNG of the trajectory (dev objective with decision markers) and the per-category F1, for
slides and READMEs. matplotlib is an optional extra (`pip install evolvemem[report]`); it is
imported here only, with the Agg backend, so the HTML report never depends on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evolvemem.loop.guard import next_step_text
from evolvemem.report import svg
from evolvemem.report.data import GROUP_NAMES, ReportData, RoundView

INSTALL_HINT = "PNG skipped: it needs matplotlib (pip install evolvemem[report])"


class PngUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> Any:  # matplotlib.pyplot (matplotlib is optional: not imported at module level)
    try:
        import matplotlib
    except ImportError:
        raise PngUnavailable(INSTALL_HINT) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def write_png(data: ReportData, path: Path) -> Path:
    """Two panels: the dev objective per round (markers coloured by the guard's decision, the guard's best
    round ringed, best-so-far dashed) with main and adversarial dev F1 as thin lines and the held-out test
    scores of the start and best configs as hollow diamonds, and the per-category figure the run was
    judged on (F1, or evidence recall for an evidence run). Raises PngUnavailable without matplotlib."""
    plt = _pyplot()
    rounds = [r for r in data.rounds if r.score is not None]
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(10, 7.5), dpi=120, sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    try:
        _draw_lines(top, data, rounds)
        _draw_decisions(top, data, rounds)
        top.margins(x=0.05, y=0.18)
        top.set_ylabel(data.metric_label)
        with_groups = "" if data.metric == "evidence_recall" else ", with main and adversarial F1"
        top.set_title(f"{data.run_id}: {data.score_label} per round{with_groups}", loc="left", fontsize=11)
        top.grid(axis="y", color="#e5e7eb")
        top.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=9)
        _draw_categories(bottom, data)
        for ax in (top, bottom):
            ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, metadata={"Title": f"{data.run_id} trajectory", "Description": _described(data, top, bottom)})
    finally:
        plt.close(fig)
    return path


def _draw_lines(top: Any, data: ReportData, rounds: list[RoundView]) -> None:
    """Best so far (dashed steps), each group's dev F1, the held-out test diamonds, then the headline score."""
    xs = [r.round for r in rounds]
    if any(r.best_so_far is not None for r in rounds):
        top.step(
            xs,
            [r.best_so_far for r in rounds],
            where="post",
            linestyle="--",
            color=svg.BEST_SO_FAR_COLOR,
            label="best so far",
        )
    for group, name in GROUP_NAMES.items():
        points = _scored([(r.round, r.scores.column(f"{group}_f1")) for r in rounds])
        if points:
            top.plot(*zip(*points), color=svg.GROUP_COLORS[group], linewidth=1.3, label=f"dev {name} F1")
    tests = {f.round: f.test for f in data.finals if f.test}.items()  # start and best may be one round
    for group, color in svg.GROUP_COLORS.items():
        points = _scored([(x, t.column(f"{group}_f1")) for x, t in tests])
        if points:
            top.scatter(
                *zip(*points),
                s=60,
                marker="D",
                facecolors="white",
                edgecolors=color,
                linewidths=1.8,
                zorder=3,
                label=f"test {group} F1",
            )
    top.plot(xs, [r.score for r in rounds], color=svg.OBJECTIVE_COLOR, linewidth=2.2, label=data.score_label)


def _draw_decisions(top: Any, data: ReportData, rounds: list[RoundView]) -> None:
    """A dot per scored round coloured by the guard's decision (each decision named once in the
    legend), and a ring with its score over the guard's best round."""
    seen: set[str] = set()
    for r in rounds:
        kind = r.decision or ("pending" if data.kind == "run" else "evaluated")
        color = svg.decision_color(kind)
        top.scatter(
            [r.round],
            [r.score],
            s=70,
            color=color,
            edgecolors="white",
            zorder=3,
            label=None if kind in seen else (next_step_text(kind) if r.decision else kind),
        )
        seen.add(kind)
        if r.round == data.best_round:
            top.scatter(
                [r.round],
                [r.score],
                s=260,
                facecolors="none",
                edgecolors=svg.BEST_RING_COLOR,
                linewidths=2.5,
                zorder=4,
                label="best round (the guard's)",
            )
            top.annotate(
                f"best {r.score:.4f}",
                (r.round, r.score),
                textcoords="offset points",
                xytext=(0, 14),
                ha="center",
                color="#92400e",
                fontsize=9,
                fontweight="bold",
            )


def _draw_categories(bottom: Any, data: ReportData) -> None:
    """The lower panel: the judged figure per category and round (a note when no category was scored)."""
    for i, (key, label) in enumerate(data.categories):
        points = _scored([(r.round, (r.by_category.get(key) or {}).get(data.metric)) for r in data.rounds])
        if points:
            bottom.plot(*zip(*points), marker="o", markersize=3.5, color=svg.series_color(i), label=label)
    bottom.set_ylim(0, 1)
    bottom.set_ylabel(f"{data.metric_label} per category")
    bottom.set_xlabel("round")
    bottom.grid(axis="y", color="#e5e7eb")
    if bottom.get_legend_handles_labels()[0]:  # no category scored: no empty legend (and no warning)
        bottom.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=9)
    else:
        bottom.text(
            0.5,
            0.5,
            "no per-category scores",
            ha="center",
            va="center",
            transform=bottom.transAxes,
            color="#6b7280",
        )
    bottom.set_xticks([r.round for r in data.rounds])


def _scored(points: list[tuple[int, float | None]]) -> list[tuple[int, float]]:
    return [(x, y) for x, y in points if y is not None]


def _described(data: ReportData, top: Any, bottom: Any) -> str:
    """The figure in words, for screen readers and for anyone checking what a PNG plots."""
    best = data.round(data.best_round) if data.best_round is not None else None
    return f"{top.get_title(loc='left')}. y axis: {top.get_ylabel()}; lower panel: {bottom.get_ylabel()}. " + (
        f"Best round (the guard's): {best.round}, {data.score_label} {best.score:.4f}."
        if best is not None and best.score is not None
        else "No best round."
    )
