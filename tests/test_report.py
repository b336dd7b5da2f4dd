"""`evolve report`: the HTML page and PNG built from a real run store (synth run and eval made by
the CLI), checked against the numbers in DuckDB, plus a headless Chromium render of the page."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zlib
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app
from evolvemem.report import svg
from evolvemem.loop.guard import next_step_text
from evolvemem.store.rows import DecisionRow, DiagnosisRow
from dataclasses import replace

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def last_json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


class Page(HTMLParser):
    """Collects every element's attributes by id, the SVG bars, and the text of table rows by table id."""

    def __init__(self, text: str):
        super().__init__()
        self.ids: dict[str, dict] = {}
        self.bars: list[dict] = []
        self.links: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            assert a["id"] not in self.ids, f"duplicate id {a['id']}"
            self.ids[a["id"]] = {"tag": tag, **a}
        if tag == "rect" and "data-layer" in a:
            self.bars.append(a)
        if tag == "a" and "href" in a:
            self.links.append(a["href"])
        if tag == "table":
            self._table = a.get("id", "")
            self.tables.setdefault(self._table, [])
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def synth_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "synth-run"
    # 30 dev questions cannot reach p < 0.05; at alpha 0.2 (labelled in the run's header) round 1 is accepted,
    # so the page has an accepted paired decision and a best round other than the start to show
    result = invoke(
        "run",
        "--benchmark",
        "synth",
        "--rounds",
        "3",
        "--objective",
        "balanced",
        "--out",
        str(out),
        "--quiet",
        "--json",
        "--alpha",
        "0.2",
    )
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def report(synth_run) -> dict:
    result = invoke("report", str(synth_run), "--json")
    assert result.exit_code == 0, result.output
    payload = last_json(result.stdout)
    html = Path(payload["html"])
    assert html == synth_run / "report.html" and html.is_file()
    return {"payload": payload, "html": html, "page": Page(html.read_text(encoding="utf-8"))}


def query(run: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(run / "run.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_every_round_and_chart_is_present_with_the_stores_numbers(synth_run, report):
    page: Page = report["page"]
    for section in (
        "how-to-read",
        "run",
        "summary",
        "trajectory",
        "trajectory-chart",
        "categories",
        "categories-chart",
        "failures",
        "failures-chart",
        "rounds",
        "usage",
        "dev-vs-test",
        "proposed-dimensions",
    ):
        assert section in page.ids, section
    assert page.ids["trajectory-chart"]["tag"] == "svg"
    rounds = query(
        synth_run,
        """SELECT r.round, r.all_f1, d.decision, d.changes FROM rounds r
                                 JOIN decisions d USING (round) WHERE r.phase = 'dev' ORDER BY r.round""",
    )
    # round 0 + 3 evolution rounds + 1 pruning round (the view the best switched on, tried off: it pays)
    assert len(rounds) == 5 and rounds[-1][2] == "lever_pays"
    for number, all_f1, decision, changes in rounds:
        article = page.ids[f"round-{number}"]
        assert article["tag"] == "article"
        assert float(article["data-score"]) == pytest.approx(all_f1, abs=1e-6)
        assert article["data-decision"] == decision
        assert int(article["data-changes"]) == len(json.loads(changes))
        assert f"#round-{number}" in page.links  # the trajectory marker and the tables link to the round
    # the rounds table under the trajectory shows each dev score with 4 decimals
    table = {row[0].rstrip(" ★"): row for row in page.tables["rounds-table"][1:]}
    for number, all_f1, decision, _ in rounds:
        assert table[str(number)][1] == f"{all_f1:.4f}"
        assert table[str(number)][-1] == next_step_text(decision)  # the shared vocabulary (loop/guard.py)
    # the best round (chosen by the guard) is the highlighted one
    best = query(synth_run, "SELECT best_round FROM decisions ORDER BY round DESC LIMIT 1")[0][0]
    assert "best" in page.ids[f"round-{best}"]["class"].split()
    assert report["payload"]["best_round"] == best


def test_failure_bars_and_category_table_match_sql(synth_run, report):
    page: Page = report["page"]
    expected = dict(
        ((r, f), n)
        for r, f, n in query(
            synth_run,
            """
        SELECT round, failure, count(*) FROM question_failures
        WHERE phase = 'dev' AND failure <> 'correct' GROUP BY ALL""",
        )
    )
    drawn = {
        (int(b["data-x"]), b["data-layer"]): int(float(b["data-value"]))
        for b in page.bars
        if b.get("data-x", "").isdigit()
    }
    assert drawn == expected and expected
    by_cat = {
        r: json.loads(c) for r, c in query(synth_run, "SELECT round, by_category FROM rounds WHERE phase = 'dev'")
    }
    rows = page.tables["categories-table"]
    header = rows[0][1:]
    for row in rows[1:-1]:
        cats = by_cat[int(row[0])]
        for label, cell in zip(header, row[1:]):
            key = next(k for k, v in cats.items() if v["name"] == label or k == label)
            assert cell == f"{cats[key]['f1']:.3f}"


def test_config_diffs_rationale_and_dev_vs_test(synth_run, report):
    text = report["html"].read_text(encoding="utf-8")
    for number, changes, reason in query(synth_run, "SELECT round, changes, reason FROM decisions ORDER BY round"):
        for change in json.loads(changes):
            assert f"<code>{change['field']}</code>" in text
        assert reason.replace("<", "&lt;") in text
    for (rationale,) in query(synth_run, "SELECT json_extract_string(proposal, '$.rationale') FROM diagnoses"):
        assert rationale in text
    rows = report["page"].tables["dev-test-table"]
    tests = dict(query(synth_run, "SELECT phase, all_f1 FROM rounds WHERE phase IN ('test_start', 'test_best')"))
    all_row = next(r for r in rows if r and r[0] == "all F1")
    assert all_row[4] == f"{tests['test_start']:.4f}" and all_row[5] == f"{tests['test_best']:.4f}"
    manifest = dict(query(synth_run, "SELECT key, value::VARCHAR FROM manifest"))
    assert json.loads(manifest["data_hash"]) in text and escape(json.loads(manifest["command"])) in text


def test_png_is_written_beside_the_html(report):
    png = report["payload"]["png"]
    if png is None:
        pytest.skip("matplotlib is not installed")
    data = Path(png).read_bytes()
    assert Path(png).name == "trajectory.png" and data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_usage_and_proposed_dimensions_come_from_the_store(synth_run, tmp_path):
    """Offline runs make no LLM calls; add usage and a proposed dimension to a copy of the store
    (as an LLM run would) and check the page sums and lists them."""
    from evolvemem.contracts.usage import Usage
    from evolvemem.store import RunStore
    from evolvemem.store.rows import ProposedDimension, UsageRow

    copy = tmp_path / "copy"
    shutil.copytree(synth_run, copy)
    with RunStore(copy) as store:
        store.record_usage(
            [
                UsageRow(1, "dev", "answer", Usage(30, 4, 12000, 900, 0.0125, failures=1)),
                UsageRow(1, "dev", "diagnose", Usage(1, 0, 3000, 400, 0.004)),
                UsageRow(-1, "dev", "extract", Usage(12, 0, 50000, 7000, 0.05)),
            ]
        )
        store.record_proposed_dimensions(
            [
                ProposedDimension(
                    round=2,
                    name="speaker_filter_top_k",
                    description="keep only memories said by the asked-about person",
                    rationale="questions about Priya Raman retrieve Tomasz's memories",
                )
            ]
        )
    result = invoke("report", str(copy), "--no-png", "--out", str(tmp_path / "out" / "page.html"), "--json")
    assert result.exit_code == 0, result.output
    payload = last_json(result.stdout)
    assert payload["png"] is None and payload["html"].endswith("out/page.html")
    page = Page(Path(payload["html"]).read_text(encoding="utf-8"))
    usage = {row[0]: row for row in page.tables["usage-table"][1:]}
    assert usage["round 1"][1:3] == ["31", "4"] and usage["round 1"][4] == "15,000"
    assert usage["setup (extraction, indexing)"][1] == "12"
    assert usage["total"][1] == "43" and usage["total"][6] == "$0.0665"
    assert "answer 30, diagnose 1" in usage["round 1"]
    proposed = page.tables["proposed-table"]
    assert proposed[1][:2] == ["2", "speaker_filter_top_k"]
    # snapshot links are relative to the page's folder, so they work wherever the page was written
    assert "../copy/rounds/round_00/config.toml" in page.links


def test_report_for_an_eval_directory(tmp_path):
    out = tmp_path / "eval"
    assert invoke("eval", "--benchmark", "synth", "--out", str(out), "--quiet").exit_code == 0
    result = invoke("report", str(out), "--no-png", "--json")
    assert result.exit_code == 0, result.output
    page = Page((out / "report.html").read_text(encoding="utf-8"))
    all_f1 = query(out, "SELECT all_f1 FROM rounds WHERE phase = 'eval'")[0][0]
    assert float(page.ids["round-0"]["data-score"]) == pytest.approx(all_f1, abs=1e-6)
    assert "trajectory" in page.ids and "trajectory-chart" not in page.ids  # one point is not a trajectory
    assert page.ids["categories-chart"]["tag"] == "svg" and "failures-chart" in page.ids
    assert "round-1" not in page.ids and last_json(result.stdout)["best_round"] is None
    assert "decisions" in page.ids and "decisions-table" not in page.tables  # nothing was judged


def test_missing_run_is_a_one_line_error(tmp_path):
    result = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "not a run directory" in lines[0]


def test_without_matplotlib_the_html_is_still_written(synth_run, tmp_path):
    out = tmp_path / "r.html"
    code = textwrap.dedent(f"""
        import sys
        sys.modules["matplotlib"] = None  # as if the optional extra were not installed
        from evolvemem.cli.main import app
        app(["report", {str(synth_run)!r}, "--out", {str(out)!r}], standalone_mode=False)
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(Path(__file__).resolve().parents[1]),
    )
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and not out.with_suffix(".png").exists()
    warnings = [line for line in proc.stderr.splitlines() if "pip install evolvemem[report]" in line]
    assert len(warnings) == 1


def test_svg_helpers():
    assert svg.nice_ticks(0.28, 0.32) == [0.28, 0.29, 0.3, 0.31, 0.32]
    assert svg.nice_ticks(0, 19)[-1] >= 19
    chart = svg.line_chart(
        "c",
        "t",
        [svg.Series("s", "#000", [(0, 0.1), (1, None), (2, 0.3), (3, 0.4)])],
        [(0, "0"), (3, "3")],
        markers=[svg.Marker(2, 0.3, "#f00", href="#round-2", tooltip="a<b")],
    )
    assert chart.count("<path") == 1  # the gap at x=1 splits the line; the single point before it draws no path
    assert 'href="#round-2"' in chart and "a&lt;b" in chart


def _png_pixels(path: Path) -> bytes:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        if data[pos + 4 : pos + 8] == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return zlib.decompress(idat)


def test_headless_chromium_renders_the_report(report, synth_run, tmp_path):
    chromium = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if chromium is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium is not installed: the CI script must `apt-get install -y chromium`")
        pytest.skip("chromium is not installed")
    flags = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    url = report["html"].resolve().as_uri()
    dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=90)
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = Page(dom.stdout)
    assert rendered.ids["trajectory-chart"]["tag"] == "svg"
    n_rounds = query(synth_run, "SELECT count(*) FROM rounds WHERE phase = 'dev'")[0][0]
    assert all(f"round-{i}" in rendered.ids for i in range(n_rounds))
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        flags + [f"--screenshot={shot}", "--window-size=1280,2000", url], capture_output=True, text=True, timeout=90
    )
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    pixels = _png_pixels(shot)
    assert shot.stat().st_size > 30_000 and len(set(pixels[::53])) > 40  # a drawn page, not a blank one


def _copy_report(run: Path, tmp_path: Path, edit) -> tuple[Page, str]:
    """Copy a run, change its store with RunStore's own verbs (as another kind of run would have
    written it), and return the copy's report page."""
    from evolvemem.store import RunStore

    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    with RunStore(copy) as store:
        edit(store)
    result = invoke("report", str(copy), "--no-png", "--json")
    assert result.exit_code == 0, result.output
    text = Path(last_json(result.stdout)["html"]).read_text(encoding="utf-8")
    return Page(text), text


def _p_text(stat: dict) -> str:
    """The one-sided p of the direction the difference points, its side named."""
    if stat["p_gain"] <= stat["p_loss"]:
        return f"p(better) {stat['p_gain']:.3f}"
    return f"p(worse) {stat['p_loss']:.3f}"


def test_the_objective_is_named_and_explained(synth_run, report, tmp_path):
    from evolvemem.loop.spec import OBJECTIVE_MEANING

    text = report["html"].read_text(encoding="utf-8")
    spec = json.loads(query(synth_run, "SELECT value FROM manifest WHERE key = 'spec'")[0][0])
    assert spec["objective"] == "balanced"
    assert f"balanced: {escape(OBJECTIVE_MEANING['balanced'])}" in text  # the run header's "dev objective"
    assert f"<strong>balanced</strong>: {escape(OBJECTIVE_MEANING['balanced'])}" in text  # the decisions section
    # a run made with --objective main is named so, and its headline is main F1 (not all F1)
    page, text = _copy_report(
        synth_run, tmp_path, lambda store: store.set_manifest({"spec": spec | {"objective": "main"}})
    )
    assert f"<strong>main</strong>: {escape(OBJECTIVE_MEANING['main'])}" in text and "balanced" not in text
    mains = dict(query(synth_run, "SELECT round, main_f1 FROM rounds WHERE phase = 'dev'"))
    assert page.tables["rounds-table"][0][1] == "dev main"
    for row in page.tables["rounds-table"][1:]:
        assert row[1] == f"{mains[int(row[0].rstrip(' ★'))]:.4f}"


def test_both_groups_per_round_in_the_table_and_the_chart(synth_run, report):
    page: Page = report["page"]
    text = report["html"].read_text(encoding="utf-8")
    rows = {row[0].rstrip(" ★"): row for row in page.tables["rounds-table"][1:]}
    header = page.tables["rounds-table"][0]
    assert header[3:5] == ["main", "adversarial"] and header[7:9] == ["test main", "test adversarial"]
    dev = query(synth_run, "SELECT round, main_f1, adversarial_f1 FROM rounds WHERE phase = 'dev' ORDER BY round")
    assert len(dev) == 5  # with the pruning round
    chart = text[text.index('<svg id="trajectory-chart"') :]
    chart = chart[: chart.index("</svg>")]
    for number, main, adversarial in dev:
        assert rows[str(number)][3:5] == [f"{main:.3f}", f"{adversarial:.3f}"]
        # each round's dot on both group lines, with its value as hover text
        assert f"dev main (answerable) F1: {main:.3f}</title>" in chart
        assert f"dev adversarial (unanswerable) F1: {adversarial:.3f}</title>" in chart
    # the test columns and the chart's diamonds hold the held-out scores of the start and best configs only
    tests = {
        row[0]: row
        for row in query(
            synth_run,
            """SELECT round, main_f1, adversarial_f1 FROM rounds
                                                         WHERE phase IN ('test_start', 'test_best')""",
        )
    }
    assert 0 in tests and len(tests) == 2  # the synth run's best round is not the start
    for number, row in rows.items():
        scored = tests.get(int(number))
        assert row[7:9] == ([f"{scored[1]:.3f}", f"{scored[2]:.3f}"] if scored else ["", ""])
        if scored:
            assert escape(f"test main F1 of round {number}'s config: {scored[1]:.4f}") in chart
            assert escape(f"test adversarial F1 of round {number}'s config: {scored[2]:.4f}") in chart


def test_decisions_show_the_paired_statistics_of_every_round(synth_run, report):
    page: Page = report["page"]
    text = report["html"].read_text(encoding="utf-8")
    assert page.ids["decisions"]["tag"] == "section"
    decisions = query(
        synth_run,
        """SELECT round, compared_with, paired, accepted, significant_loss, decision
                                    FROM decisions ORDER BY round""",
    )
    table = {row[0]: row for row in page.tables["decisions-table"][1:]}
    assert set(table) == {str(d[0]) for d in decisions}
    accepted = []
    for number, compared_with, paired, is_accepted, loss, decision in decisions:
        row = table[str(number)]
        assert row[6] == next_step_text(decision)
        if paired is None:  # the start round
            assert row[1:6] == ["–", "start", "–", "–", "–"]
            continue
        paired = json.loads(paired)
        assert row[1] == str(compared_with) == str(paired["incumbent_round"])
        assert row[2] == ("gain" if is_accepted else "loss" if loss else "no gain")
        for cell, name in ((row[3], "main"), (row[4], "adversarial")):
            stat = paired["groups"][name]
            assert cell == f"{stat['diff']:+.4f} [{stat['ci_low']:+.3f}, {stat['ci_high']:+.3f}] {_p_text(stat)}"
        convs = paired["by_conversation"]
        assert row[5] == f"{sum(d >= -0.005 for d in convs.values())}/{len(convs)}"
        if is_accepted:
            accepted.append((number, paired))
    assert accepted, "the synth run (alpha 0.2) should accept a round; the statistics of an accepted one are shown"
    number, paired = accepted[0]
    group = next(g for g in ("main", "adversarial") if paired["groups"][g]["diff"] > 0)
    article = text[text.index(f'id="round-{number}"') :]
    assert _p_text(paired["groups"][group]) in article[: article.index("</article>")]
    assert f"<strong>{len(accepted)} of {len(decisions) - 1}</strong> judged round(s) accepted" in text
    per_conv = page.tables["decisions-by-conversation"]
    names = per_conv[0][2:]
    assert sorted(names) == sorted(paired["by_conversation"]) and [r[0] for r in per_conv[1:]] == [
        str(n) for n, _ in accepted
    ]
    assert per_conv[1][2:] == [f"{paired['by_conversation'][c]:+.3f}" for c in names]


def test_flags_and_rubric_fallbacks_are_shown_and_counted(synth_run, tmp_path):
    """A model's diagnosis after the last round, contradicted by the evidence and replaced by the rubric:
    the round's decision is re-recorded (as a resume with more rounds would) with the flags and fallback."""
    own = [
        "max_context (global): shrinks max_context (8 → 6) while budget_cut is the dominant failure",
        "keyword_top_k (global): repeats keyword_top_k → 0, a move already tried without a gain",
    ]
    rubric = ["semantic_top_k (global): shrinks semantic_top_k (10 → 8) while retrieval_miss is the dominant failure"]
    fallback = "the llm diagnosis left nothing to apply (every change rejected); rubric fallback"

    def edit(store):
        row = store.decision(3)
        store.extend_rounds(4)  # forgets round 3's 'stopped' decision
        store.record_diagnosis(
            DiagnosisRow(
                round=3,
                diagnoser="llm",
                proposal={"changes": {}, "flags": own, "rationale": "shrink the context"},
                input={},
                prompt="",
                raw_response="",
            )
        )
        store.record_decision(replace(row, decision="applied", flags=rubric, fallback=fallback))

    page, text = _copy_report(synth_run, tmp_path, edit)
    row = {r[0]: r for r in page.tables["decisions-table"][1:]}["3"]
    assert row[7] == f"⚑ {own[0]} +1 more⚑ rubric: {rubric[0]}" and row[8] == fallback
    assert all(
        r[7] == "" and r[8] == "–" for n, r in {r[0]: r for r in page.tables["decisions-table"][1:]}.items() if n != "3"
    )
    article = text[text.index('id="round-3"') :]
    article = article[: article.index("</article>")]
    assert (
        all(f"<li>{escape(flag)}</li>" in article for flag in own + rubric)
        and f"Rubric fallback: {fallback}" in article
    )
    assert (
        "<strong>rubric</strong> 0 of 3 (0 flag(s)); <strong>llm</strong> 1 of 1 (2 flag(s)); "
        "<strong>rubric (fallback)</strong> 1 of 1 (1 flag(s))"
    ) in text
    assert "<strong>1</strong> of 4 diagnoses fell back" in text


def test_a_store_without_paired_decisions_shows_dashes(synth_run, tmp_path):
    """Decisions recorded before paired statistics (their new columns NULL) still render, with "–"."""

    def edit(store):
        row = store.decision(3)
        store.extend_rounds(4)
        store.record_decision(
            DecisionRow(
                **{
                    k: getattr(row, k)
                    for k in ("round", "decision", "reason", "score", "delta", "best_round", "best_score", "changes")
                }
            )
        )

    page, _ = _copy_report(synth_run, tmp_path, edit)
    row = {r[0]: r for r in page.tables["decisions-table"][1:]}["3"]
    assert row[1:6] == ["–", "–", "–", "–", "–"] and row[6] == next_step_text("stopped") and row[7:] == ["", "–"]


def test_headline_shows_both_groups_and_test_detail_from_the_store(synth_run, report):
    """The headline gives main, adversarial and all F1 (test start → best); the dev-vs-test section
    has per-category F1 on test and the held-out questions that flipped, as the store says."""
    text = report["html"].read_text(encoding="utf-8")
    tests = {
        phase: (main, adv, all_f1)
        for phase, main, adv, all_f1 in query(
            synth_run,
            "SELECT phase, main_f1, adversarial_f1, all_f1 FROM rounds WHERE phase IN ('test_start', 'test_best')",
        )
    }
    for i, label in enumerate(("test main F1 (answerable)", "test adversarial F1", "test all F1")):
        start, best = tests["test_start"][i], tests["test_best"][i]
        assert f'{label}</div><div class="stat-value">{start:.4f} → {best:.4f}</div>' in text
    cats = {row[0]: row for row in report["page"].tables["category-test-table"][1:]}
    by_phase = dict(
        query(synth_run, "SELECT phase, by_category FROM rounds WHERE phase IN ('test_start', 'test_best')")
    )
    start_cats, best_cats = json.loads(by_phase["test_start"]), json.loads(by_phase["test_best"])
    assert len(cats) >= len(start_cats) > 0
    for key, cat in start_cats.items():
        row = next(r for label, r in cats.items() if label.endswith(str(cat.get("name") or key)) or label == key)
        assert row[4] == f"{cat['f1']:.4f}" and row[5] == f"{best_cats[key]['f1']:.4f}" and row[7] == str(cat["n"])
    ((fixed, broken),) = query(
        synth_run,
        """
        SELECT count(*) FILTER (WHERE b.failure = 'correct'), count(*) FILTER (WHERE a.failure = 'correct')
        FROM question_failures a JOIN question_failures b USING (question_id)
        WHERE a.phase = 'test_start' AND b.phase = 'test_best' AND (a.failure = 'correct') <> (b.failure = 'correct')""",
    )
    if fixed or broken:
        assert f"{fixed} held-out question(s) became right under the best config and {broken} became wrong" in text
        flips = report["page"].tables["flips-table"][1:]
        assert len(flips) == min(fixed, 3) + min(broken, 3)
        assert all(row[0] in ("fixed", "broken") for row in flips)
    else:
        assert "flips-table" not in report["page"].tables
    # no ablation was run: the section says how to get one
    assert "evolve ablate RUN" in text and "ablation-table" not in report["page"].tables


def test_report_shows_the_ablation_after_evolve_ablate(synth_run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(synth_run, copy)
    result = invoke("ablate", str(copy), "--json", "--quiet")
    assert result.exit_code == 0, result.output
    rows = last_json(result.stdout)["rows"]
    result = invoke("report", str(copy), "--no-png", "--json")
    assert result.exit_code == 0, result.output
    page = Page(Path(last_json(result.stdout)["html"]).read_text(encoding="utf-8"))
    table = page.tables["ablation-table"][1:]
    assert [r[0] for r in table] == [r["mechanism"] for r in rows]
    for shown, row in zip(table, rows):
        assert shown[1] == f"{row['all_f1']:.4f}"
        if row["mechanism"] != "full config":
            assert shown[2] == f"{row['delta_all_f1']:+.4f}"
