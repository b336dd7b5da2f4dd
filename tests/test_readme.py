"""The README is the short front page: it fits on a screen, its test command is CI's, every command it
shows parses with the real CLI, and its quick start runs as written (on the synth benchmark instead of
the LoCoMo download) through to the report and a transfer onto the docs' custom-data example."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app
from tests.docs_commands import bash_blocks, evolve_commands, parse_error

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
README_MAX_BYTES = 10_240


def test_readme_fits_on_a_screen():
    size = len(README.encode("utf-8"))
    assert size <= README_MAX_BYTES, (
        f"README.md is {size} bytes (at most {README_MAX_BYTES}): move detail into docs/ and link to it"
    )


def test_readme_test_command_is_the_ci_command():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "```bash\npython -m pytest\n```" in README and "\npython -m pytest\n" in ci


def test_readme_figures_name_their_command():
    """Every row of the README's results table names the command that printed it."""
    rows = [
        line
        for line in README.split("## Results", 1)[1].split("\n## ", 1)[0].splitlines()
        if line.startswith("| ") and not line.startswith("| what")
    ]
    assert 3 <= len(rows) <= 5, rows
    for row in rows:
        assert re.search(r"`(python benchmarks/\w+\.py|evolve \w+)[^`]*`", row), f"no command in: {row}"


def test_readme_picture_exists_and_names_its_command():
    picture = re.search(r"!\[[^\]]*\]\(([^)]+\.png)\)", README)
    assert picture and (REPO / picture.group(1)).is_file(), "the README's picture is missing"
    caption = " ".join(README[picture.end() :].lstrip().split("\n\n", 1)[0].split())
    assert "`evolve run " in caption and "`evolve report " in caption, caption


def test_readme_commands_parse():
    commands = evolve_commands(bash_blocks(README))
    assert len(commands) >= 6, commands
    problems = [f"{' '.join(args)}: {error}" for args in commands if (error := parse_error(args))]
    assert not problems, problems


def _quick_start() -> list[list[str]]:
    block = README.split("## Quick start", 1)[1]
    return evolve_commands(bash_blocks(block)[:1])


def test_readme_quick_start_runs_as_written(tmp_path):
    """The five quick-start commands, in order, with only the benchmark and the run directory swapped:
    synth for the LoCoMo download and a temporary run directory; the transfer reads the example
    domain file the project ships (docs/examples/my_domain.json)."""
    domain = REPO / "docs" / "examples" / "my_domain.json"
    assert domain.is_file() and "docs/examples/my_domain.json" in README
    run_dir = tmp_path / "quickstart"
    commands = _quick_start()
    assert [c[0] for c in commands] == ["run", "show", "diff", "report", "transfer"], commands
    runner = CliRunner()
    for args in commands:
        text = " ".join(shlex.quote(a) for a in args).replace("--benchmark locomo", "--benchmark synth")
        text = text.replace("runs/quickstart", str(run_dir)).replace("docs/examples/my_domain.json", str(domain))
        argv = shlex.split(text) + ([] if args[0] in ("show", "diff", "report") else ["--quiet"])
        if args[0] == "transfer":
            argv += ["--out", str(tmp_path / "transfer")]
        result = runner.invoke(app, argv, catch_exceptions=False)
        assert result.exit_code == 0, (argv, result.output[-2000:])
    assert (run_dir / "best_config.toml").is_file() and (run_dir / "report.html").is_file()
    assert (run_dir / "trajectory.png").stat().st_size > 0


@pytest.mark.parametrize("line", ["evolve run --benchmark locomo --roundz 7", "evolve diff runs/x 0 seven"])
def test_a_wrong_command_would_be_caught(line):
    """The parse check can fail: a misspelt option or a bad value is reported."""
    args = evolve_commands([line])[0]
    assert parse_error(args)


COMMAND_LINE_MAX = 100  # a wider command is cut off (or scrolls) in the docs' code blocks and on GitHub


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_quick_start_commands_fit_a_code_block(page):
    """Long commands are broken with a backslash and comments sit on their own lines, so nothing is clipped."""
    text = (REPO / page).read_text(encoding="utf-8")
    long = [line for block in bash_blocks(text) for line in block.splitlines() if len(line) > COMMAND_LINE_MAX]
    assert not long, long
