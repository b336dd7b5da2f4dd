"""`evolve report`: one self-contained HTML page (inline SVG charts) and a PNG of the trajectory,
built from a run store. `gather` reads, `render_html` formats, `write_png` exports."""

from evolvemem.contracts.records import RIGHT_F1
from evolvemem.report.data import ReportData, flipped_questions, gather
from evolvemem.report.html import render_html

__all__ = ["RIGHT_F1", "ReportData", "flipped_questions", "gather", "render_html"]
