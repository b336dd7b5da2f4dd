"""No trap in the first hour (issue 45): a run directory is never taken over by another command, the
held-out verdict (paired interval and p, its side named) outlives `evolve run` in `show`, `show
--json` and the report's headline, and `-q` hides progress, never a result line. Real offline runs
on the synth benchmark."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app


def invoke(*args: str):
    return CliRunner(env={"COLUMNS": "300"}).invoke(app, list(args), catch_exceptions=False)


def last_json(text: str) -> dict:
    return json.loads(text[text.rindex("\n{") + 1 :] if "\n{" in text else text)


def digests(folder: Path) -> dict[str, str]:
    """Every file under `folder` by relative path, with the hash of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[Path, str]:
    """A finished run, its progress lines shown (the -q test compares against them)."""
    out = tmp_path_factory.mktemp("no-trap") / "run"
    result = invoke(
        "run", "--benchmark", "synth", "--rounds", "1", "--patience", "0", "--objective", "balanced", "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    return out, result.output


@pytest.fixture(scope="module")
def finished_eval(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("no-trap") / "eval"
    result = invoke("eval", "--benchmark", "synth", "--split", "test", "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


# ------------------------------------------------------------------ no directory is taken over


@pytest.mark.parametrize(
    "command",
    [
        ("eval", "--benchmark", "synth"),
        ("eval", "--benchmark", "synth", "--config", "weak"),
        ("transfer", "RUN", "--benchmark", "synth"),
    ],
)
def test_eval_or_transfer_into_a_finished_run_is_refused_and_leaves_it_byte_identical(finished_run, command):
    run, _ = finished_run
    before = digests(run)
    args = [str(run) if a == "RUN" else a for a in command]
    refused = invoke(*args, "--out", str(run))
    assert refused.exit_code == 2, refused.output
    lines = [line for line in refused.output.splitlines() if line.strip()]
    assert lines == [f"error: {run} holds the work of an `evolve run`, which is never taken over; pick another --out"]
    assert digests(run) == before
    # the run is still what it was: resumable, listed as a run
    shown = last_json(invoke("show", str(run), "--json").stdout)
    assert shown["manifest"]["kind"] == "run" and shown["manifest"]["benchmark"] == "synth"


def test_run_or_transfer_into_a_finished_eval_is_refused_and_leaves_it_byte_identical(finished_eval, finished_run):
    run, _ = finished_run
    before = digests(finished_eval)
    for args in (
        ("run", "--benchmark", "synth", "--rounds", "1", "--out", str(finished_eval)),
        ("transfer", str(run), "--benchmark", "synth", "--out", str(finished_eval)),
    ):
        refused = invoke(*args)
        assert refused.exit_code == 2, refused.output
        assert "holds the work of an `evolve eval`" in refused.output
        assert digests(finished_eval) == before


def test_an_eval_into_its_own_directory_still_resumes_it(finished_eval):
    again = invoke("eval", "--benchmark", "synth", "--split", "test", "--out", str(finished_eval))
    assert again.exit_code == 0, again.output
    assert f"resuming {finished_eval}" in again.output


# ------------------------------------------------------------------ the held-out verdict stays


HELD_OUT = re.compile(
    r"held out \(test, best − start on the same questions, F1; the run's objective is all F1\): "
    r"answerable [+-]\d\.\d{4} \[[+-]\d\.\d{4}, [+-]\d\.\d{4}\] p\(better\) \d\.\d{3} \(n=\d+\)"
)


def test_show_and_its_json_carry_the_held_out_interval_as_run_printed_it(finished_run):
    run, printed = finished_run
    ran = HELD_OUT.search(printed)
    assert ran, printed
    shown = invoke("show", str(run))
    assert shown.exit_code == 0, shown.output
    assert ran.group(0) in shown.output  # the same interval and p, recomputed from the store
    data = last_json(invoke("show", str(run), "--json").stdout)
    main = data["test"]["paired"]["groups"]["main"]
    assert {"diff", "ci_low", "ci_high", "p_gain", "p_loss", "n"} <= set(main)
    assert f"[{main['ci_low']:+.4f}, {main['ci_high']:+.4f}] p(better) {main['p_gain']:.3f} (n={main['n']})" in (
        ran.group(0)
    )
    # the JSON's start and best are the table's test scores, unchanged
    assert (
        data["test"]["start"]["n"]
        == data["test"]["best"]["n"]
        == main["n"] + data["test"]["paired"]["groups"]["adversarial"]["n"]
    )


def test_the_reports_headline_carries_the_held_out_interval(finished_run, tmp_path):
    import shutil

    run, _ = finished_run
    copy = tmp_path / "copy"  # the report writes into its run: the module's run stays as it was
    shutil.copytree(run, copy)
    page = invoke("report", str(copy), "--no-png", "--json")
    assert page.exit_code == 0, page.output
    html = Path(last_json(page.stdout)["html"]).read_text(encoding="utf-8")
    data = last_json(invoke("show", str(run), "--json").stdout)
    main = data["test"]["paired"]["groups"]["main"]
    assert (
        f"held out: {main['diff']:+.4f} [{main['ci_low']:+.3f}, {main['ci_high']:+.3f}] "
        f"p(better) {main['p_gain']:.3f} (paired, n={main['n']})"
    ) in html


def test_every_printed_one_sided_p_names_its_side(finished_run):
    run, printed = finished_run
    shown = invoke("show", str(run)).output
    for text in (printed, shown):
        assert re.search(r"vs r0: main F1 [+-]\d\.\d{3} \(p\((better|worse)\) \d\.\d{2}\)", text), text
        assert not re.search(r"\(p \d|\bp=\d", text), text  # no bare p


# ------------------------------------------------------------------ -q hides progress only


def test_quiet_keeps_the_result_lines(tmp_path, finished_run):
    _, loud = finished_run
    out = tmp_path / "quiet"
    quiet = invoke(
        "run",
        "--benchmark",
        "synth",
        "--rounds",
        "1",
        "--patience",
        "0",
        "--objective",
        "balanced",
        "--out",
        str(out),
        "-q",
    )
    assert quiet.exit_code == 0, quiet.output
    assert "round 1:" in loud and "round 1:" not in quiet.output  # progress: hidden
    assert HELD_OUT.search(quiet.output), quiet.output
    assert re.search(r"best round \d+; best config: .*best_config\.toml", quiet.output)
    assert "total time:" in quiet.output
    evaluated = invoke("eval", "--benchmark", "synth", "--split", "test", "--out", str(tmp_path / "e"), "-q")
    assert evaluated.exit_code == 0 and "records: " in evaluated.output, evaluated.output


def test_transfer_on_a_small_sample_says_so(finished_run, tmp_path):
    run, _ = finished_run
    result = invoke("transfer", str(run), "--benchmark", "synth", "--split", "test", "--out", str(tmp_path / "t"))
    assert result.exit_code == 0, result.output
    assert re.search(r"a small sample: \d+ answerable questions; at alpha 0\.05", " ".join(result.output.split()))
