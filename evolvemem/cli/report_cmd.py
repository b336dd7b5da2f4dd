"""`evolve report RUN`: write `<run>/report.html` (self-contained) and `<run>/trajectory.png` (and
`<run>/frontier.png` for a `--budgets` run)."""

from __future__ import annotations

from pathlib import Path

from evolvemem.cli.ui import UI, JsonResult
from evolvemem.errors import EvolveMemError

REPORT_NAME = "report.html"
PNG_NAME = "trajectory.png"


def report_paths(run_dir: Path, out: str | None) -> tuple[Path, Path]:
    """HTML path (default `<run>/report.html`; a folder given as --out gets `report.html` inside) and
    the PNG beside it (`trajectory.png` next to a `report.html`, else `<name>.png`)."""
    html = Path(out) if out else run_dir / REPORT_NAME
    if html.is_dir() or (out and out.endswith(("/", "\\"))):
        html = html / REPORT_NAME
    png = html.with_name(PNG_NAME) if html.name == REPORT_NAME else html.with_suffix(".png")
    return html, png


def write_report(ui: UI, run: str, out: str | None = None, png: bool = True) -> JsonResult:
    """Gather the run store, write the HTML (and the PNG when matplotlib is there); return the paths."""
    from evolvemem.report.data import gather
    from evolvemem.report.html import render_html
    from evolvemem.session import open_run

    with open_run(run) as store:
        data = gather(store)
    html_path, png_path = report_paths(Path(data.run_dir), out)
    try:
        html_path.parent.mkdir(parents=True, exist_ok=True)
        html_path.write_text(render_html(data, out_dir=html_path.parent.resolve()), encoding="utf-8")
    except OSError as exc:
        raise EvolveMemError(f"{html_path}: cannot write the report ({exc.strerror or exc})") from None
    written_png: Path | None = None
    frontier_png: Path | None = None
    if png:
        from evolvemem.report.frontier import FRONTIER_PNG, write_frontier_png
        from evolvemem.report.png import PngUnavailable, write_png

        try:
            written_png = write_png(data, png_path)
            frontier_png = write_frontier_png(data, png_path.with_name(FRONTIER_PNG))
        except PngUnavailable as exc:
            from rich.markup import escape

            ui.warn(escape(str(exc)))
        except OSError as exc:
            raise EvolveMemError(f"{png_path}: cannot write the PNG ({exc.strerror or exc})") from None
    ui.info(f"report: {html_path}")
    if written_png is not None:
        ui.info(f"trajectory: {written_png}")
    if frontier_png is not None:
        ui.info(f"frontier: {frontier_png}")
    return {
        "run_dir": str(data.run_dir),
        "html": str(html_path),
        "png": None if written_png is None else str(written_png),
        "rounds": len(data.rounds),
        "best_round": data.best_round,
        **(
            {"frontier": [p.as_dict() for p in data.frontier], "frontier_png": frontier_png and str(frontier_png)}
            if data.frontier
            else {}
        ),
    }
