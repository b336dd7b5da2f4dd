"""What a newcomer meets in the first hour (issue 30): the same best round everywhere, one vocabulary
for what the guard kept, an evidence run reported as evidence recall, a warning when the dev split is
too small, custom data that refuses what it cannot use, the run's total time, and the small CLI
promises (--version, plain help, a config file that reads back). Real runs on the synth benchmark and
on the fixtures' invented conversations."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import json
import re
import shutil
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app
from evolvemem.loop.guard import kept_text, next_step_text
from evolvemem.loop.paired import questions_needed, smallest_detectable_gain

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "examples" / "my_domain.json"


def invoke(*args: str):
    """The command as a user runs it in a wide terminal (the tables' cells do not wrap)."""
    return CliRunner(env={"COLUMNS": "300"}).invoke(app, list(args), catch_exceptions=False)


def last_json(text: str) -> dict:
    return json.loads(text[text.rindex("\n{") + 1 :] if "\n{" in text else text)


@pytest.fixture(scope="module")
def balanced_run(tmp_path_factory) -> tuple[Path, str]:
    """Synth at the default alpha: later rounds score a higher mean than round 0, none wins its paired
    comparison (30 dev questions), so the guard's best is the start."""
    out = tmp_path_factory.mktemp("first-hour") / "balanced"
    result = invoke(
        "run", "--benchmark", "synth", "--rounds", "2", "--patience", "0", "--objective", "balanced", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    return out, result.output


@pytest.fixture(scope="module")
def evidence_run(tmp_path_factory) -> tuple[Path, str]:
    """Offline, the default objective: evidence recall of the contexts, no answers."""
    out = tmp_path_factory.mktemp("first-hour") / "evidence"
    result = invoke("run", "--benchmark", "synth", "--rounds", "2", "--patience", "0", "--out", str(out))
    assert result.exit_code == 0, result.output
    return out, result.output


# ------------------------------------------------------------------ one best, one vocabulary


def test_the_best_is_the_guards_round_everywhere_not_the_highest_mean(balanced_run):
    from evolvemem.report.data import gather
    from evolvemem.session import open_run

    run, _ = balanced_run
    with open_run(str(run)) as store:
        best = store.best_round()
        scores = {r["round"]: r["all_f1"] for r in store.query("SELECT round, all_f1 FROM rounds WHERE phase = 'dev'")}
        data = gather(store)
    assert max(scores, key=lambda r: scores[r]) != best, "the scenario needs a higher mean that the guard did not keep"
    assert data.best_round == best

    runs = invoke("runs", str(run.parent), "--json")
    row = next(r for r in last_json(runs.stdout)["runs"] if r["run_dir"] == str(run))
    assert row["best_round"] == best and row["best_dev"] == pytest.approx(scores[best])
    shown = last_json(invoke("show", str(run), "--json").stdout)
    assert shown["best_round"] == best and shown["dev"]["best"]["round"] == best

    page = invoke("report", str(run), "--json")
    html = Path(last_json(page.stdout)["html"]).read_text(encoding="utf-8")
    assert re.search(rf'<td class="best-row"><a href="#round-{best}">', html)
    from PIL import Image

    described = Image.open(last_json(page.stdout)["png"]).text["Description"]
    assert f"Best round (the guard's): {best}, dev all F1 {scores[best]:.4f}" in described


def test_the_best_so_far_line_ends_at_the_best_rounds_score(tmp_path):
    """At alpha 0.2 a round wins: from it on, the dashed line is its score, up to the last round."""
    from evolvemem.report.data import gather
    from evolvemem.session import open_run

    out = tmp_path / "run"
    assert (
        invoke(
            "run",
            "--benchmark",
            "synth",
            "--rounds",
            "2",
            "--patience",
            "0",
            "--objective",
            "balanced",
            "--alpha",
            "0.2",
            "--out",
            str(out),
            "--quiet",
        ).exit_code
        == 0
    )
    with open_run(str(out)) as store:
        data = gather(store)
    best = data.round(data.best_round)
    assert best is not None and data.best_round > 0
    assert all(r.best_so_far == pytest.approx(best.score) for r in data.rounds if r.round >= best.round)


def test_a_round_that_was_not_kept_never_reads_applied(balanced_run):
    _, output = balanced_run
    text = invoke("show", str(balanced_run[0])).output
    for shown in (output, text):
        assert "not kept (best stays r0)" in shown
        assert "applied" not in shown and "kept best" not in shown
    assert next_step_text("applied") == "next builds on it" and kept_text(False, 3) == "not kept (best stays r3)"


def test_show_prints_each_verdict_once(balanced_run, tmp_path):
    """A revert's reason starts with the verdict: `show` prints the verdict on its own line only."""
    from evolvemem.store import RunStore

    copy = tmp_path / "copy"
    shutil.copytree(balanced_run[0], copy)
    with RunStore(copy) as store:
        row = store.decision(1)
        store.con.execute("DELETE FROM decisions WHERE round = 1")  # the store holds one decision per round
        store.record_decision(
            replace(
                row,
                decision="reverted",
                reason=f"{row.verdict}; the proposal goes onto the best config instead",
            )
        )
        verdicts = [r["verdict"] for r in store.query("SELECT verdict FROM decisions WHERE round > 0")]
    text = " ".join(invoke("show", str(copy)).output.split())
    for verdict in set(verdicts):
        assert text.count(" ".join(verdict.split())) == verdicts.count(verdict), verdict  # once per round
    assert "round 1 → next reverts to best: the proposal goes onto the best config instead" in text


def test_docs_say_why_a_lower_mean_round_can_be_best():
    text = " ".join((REPO / "docs" / "concepts" / "paired-decisions.md").read_text(encoding="utf-8").split())
    assert "## Why the best round can have a lower mean" in text and "not the round with the highest mean" in text


# ------------------------------------------------------------------ an evidence run reads as recall


def test_an_evidence_run_reports_evidence_recall_not_f1(evidence_run):
    run, output = evidence_run
    lines = [line for line in output.splitlines() if re.match(r"round \d+: ", line)]
    assert lines and all("dev evidence recall" in line and "main F1" not in line for line in lines)
    assert "answerable recall" in output and "main F1 +" not in output
    page = invoke("report", str(run), "--json")
    paths = last_json(page.stdout)
    html = Path(paths["html"]).read_text(encoding="utf-8")
    assert "evidence recall (answerable)" in html and "– → –" not in html
    assert "<h2>evidence recall per category</h2>" in html and "main recall Δ [95%] p" in html
    from PIL import Image

    described = Image.open(paths["png"]).text["Description"]
    assert "y axis: evidence recall;" in described and "lower panel: evidence recall per category" in described


def test_the_png_raises_no_matplotlib_warning_without_category_scores(evidence_run, tmp_path):
    from evolvemem.report.data import gather
    from evolvemem.report.png import write_png
    from evolvemem.session import open_run

    with open_run(str(evidence_run[0])) as store:
        data = gather(store)
    for r in data.rounds:  # as a store that kept no per-category scores
        r.outcome = dataclasses.replace(r.outcome, summary=dataclasses.replace(r.scores, by_category=None))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_png(data, tmp_path / "t.png")


# ------------------------------------------------------------------ small data


def test_smallest_detectable_gain_is_five_whole_questions_at_alpha_005():
    assert smallest_detectable_gain(15, 0.05) == pytest.approx(5 / 15)
    assert smallest_detectable_gain(4, 0.05) == float("inf")
    assert smallest_detectable_gain(1000, 0.05, min_effect=0.005) == pytest.approx(0.005)
    assert questions_needed(0.05) == 100


def test_a_small_dev_split_is_warned_with_the_smallest_detectable_gain(balanced_run):
    text = " ".join(balanced_run[1].split())
    assert "the dev split is too small for the guard to detect a gain" in text
    assert "no mean gain below 0.19" in text and "at least 100 dev questions" in text


def test_docs_give_a_minimum_dev_size():
    text = (REPO / "docs" / "guides" / "custom-data.md").read_text(encoding="utf-8")
    assert "## How much data" in text and "100" in text


# ------------------------------------------------------------------ custom data


def _domain(tmp_path: Path, edit) -> Path:
    data = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "domain.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _refused(result, out: Path | None = None) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    if out is not None:
        assert not out.exists(), f"{out} was left behind"
    return lines[0]


def test_a_misspelt_key_is_refused_with_did_you_mean(tmp_path):
    def misspell(data):
        for q in data["questions"]:
            q["evidnce"] = q.pop("evidence", [])

    out = tmp_path / "run"
    line = _refused(
        invoke(
            "run", "--benchmark", "custom", "--data", str(_domain(tmp_path, misspell)), "--out", str(out), "--quiet"
        ),
        out,
    )
    assert "unknown key 'evidnce'" in line and "did you mean 'evidence'?" in line


@pytest.mark.parametrize("command", ["run", "eval"])
def test_empty_inputs_give_one_line_exit_2_and_leave_nothing(tmp_path, command):
    path = tmp_path / "empty.json"
    path.write_text('{"conversations": [], "questions": []}', encoding="utf-8")
    out = tmp_path / "out"
    line = _refused(invoke(command, "--benchmark", "custom", "--data", str(path), "--out", str(out), "--quiet"), out)
    assert "no conversations" in line and "--split" not in line and "one conversation" not in line


def test_conversations_without_questions_are_refused(tmp_path):
    out = tmp_path / "out"
    no_questions = _domain(tmp_path, lambda data: data.update(questions=[]))
    assert "no questions" in _refused(
        invoke("run", "--benchmark", "custom", "--data", str(no_questions), "--out", str(out), "--quiet"), out
    )

    def drop_one(data):
        first = data["conversations"][0]["id"]
        data["questions"] = [q for q in data["questions"] if q["conversation_id"] != first]

    line = _refused(
        invoke(
            "run", "--benchmark", "custom", "--data", str(_domain(tmp_path, drop_one)), "--out", str(out), "--quiet"
        ),
        out,
    )
    assert "has no questions" in line


def test_the_guide_says_what_answer_holds_for_unanswerable_questions():
    text = " ".join((REPO / "docs" / "guides" / "custom-data.md").read_text(encoding="utf-8").split())
    assert "unanswerable" in text and "Not mentioned in the conversation" in text


# ------------------------------------------------------------------ time and the small promises


def test_a_run_prints_its_total_time(balanced_run):
    assert re.search(r"total time: \d+(m\d\ds|s)", balanced_run[1])


def test_version_and_plain_help():
    from evolvemem import __version__

    assert invoke("--version").output.strip() == f"evolvemem {__version__}"
    text = invoke("run", "--help").output
    assert "<bool>" not in text and "[default: 7" in " ".join(text.split())


def test_a_config_with_settings_off_writes_no_null_string_and_reads_back(tmp_path):
    from evolvemem.space.config import OVERRIDES, config_to_toml, load_config, parse_config

    data = load_config("default")[0].model_dump()
    data["time_decay_half_life_days"] = None
    data[OVERRIDES] = {"temporal": {"time_decay_half_life_days": None}}
    config = parse_config(data, source="test")[0]
    text = config_to_toml(config)
    assert '"null"' not in text
    path = tmp_path / "best_config.toml"
    path.write_text(text, encoding="utf-8")
    again = load_config(str(path))[0]
    assert again == config and again.values()["time_decay_half_life_days"] is None
    assert again.overrides()["temporal"]["time_decay_half_life_days"] is None


def test_diff_names_categories_as_show_does(tmp_path):
    out = tmp_path / "run"
    fixture = REPO / "tests" / "fixtures" / "locomo_tiny.json"
    assert (
        invoke(
            "run", "--data", str(fixture), "--rounds", "1", "--objective", "balanced", "--out", str(out), "--quiet"
        ).exit_code
        == 0
    )
    shown = last_json(invoke("diff", str(out), "0", "1", "--json").stdout)
    names = {v["name"] for v in shown["score_diff"].values()}
    assert names and not any(name.isdigit() for name in names)
    text = invoke("diff", str(out), "0", "1").output
    assert all(name in text for name in names)


def test_the_docs_site_never_breaks_option_names_mid_word():
    """The CLI reference's first column (option names) does not wrap inside a word; the site loads the rule."""
    css = (REPO / "docs" / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    assert re.search(r"td:first-child code[^{]*\{[^}]*white-space: nowrap", css, re.S)
    assert "stylesheets/extra.css" in (REPO / "mkdocs.yml").read_text(encoding="utf-8")
