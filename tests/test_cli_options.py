"""Options declared once: a group of options spliced into a command's signature keeps its place in
`--help` and reaches the command as one object; `evolve run` and `evolve label` still refuse bad
settings with one line and exit code 2, before any run directory is made."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest
import typer
from typer.testing import CliRunner

from evolvemem.cli.main import app
from evolvemem.cli.option_groups import option_group, with_option_groups

runner = CliRunner()


@dataclass(frozen=True)
class Pets:
    """Two options taken together (an invented example)."""

    cat: Optional[str] = typer.Option(None, "--cat", help="The cat's name.")
    legs: int = typer.Option(4, "--legs", min=0, help="Legs counted.")


def pets_app(seen: list[object]) -> typer.Typer:
    demo = typer.Typer()

    @demo.command()
    @with_option_groups
    def home(first: str = typer.Option("a", "--first"), pets: Pets = option_group(Pets), last: bool = False):
        seen.append((first, pets, last))

    return demo


def test_a_group_reaches_the_command_as_one_object_in_its_place():
    seen: list[object] = []
    demo = pets_app(seen)
    result = runner.invoke(demo, ["--cat", "Miro", "--legs", "3", "--last"])
    assert result.exit_code == 0, result.output
    assert seen == [("a", Pets(cat="Miro", legs=3), True)]
    help_text = runner.invoke(demo, ["--help"], env={"COLUMNS": "200"}).output
    flags = [flag for flag in ("--first", "--cat", "--legs", "--last") if flag in help_text]
    assert flags == ["--first", "--cat", "--legs", "--last"]
    assert sorted(flags, key=help_text.index) == flags
    bad = runner.invoke(demo, ["--legs", "-1"])  # the group's own checks (min=0) still apply
    assert bad.exit_code == 2


def test_grouped_model_options_stand_where_they_stood_in_eval_help():
    help_text = " ".join(runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "200"}).output.split())
    order = ["--split", "--model", "--extract-model", "--answer-model", "--judge-model", "--classify-model"]
    order += ["--api-base", "--context-window", "--out"]
    assert sorted(order, key=help_text.index) == order


@pytest.mark.parametrize(
    "args, said",
    [
        (["--objective", "speed"], "--objective must be"),
        (["--rounds", "-1"], "--rounds must be 0 or more"),
        (["--diagnoser", "llm", "--diagnosis-mode", "loud"], "--diagnosis-mode must be"),
        (["--screen-fraction", "1.5"], "--screen-fraction must be between 0 and 1, not 1.5"),
        (["--screen-budget", "0"], "--screen-budget must be 1 or more"),
        (["--executor", "cloud"], "--executor must be"),
        (["--ray-address", "auto"], "--ray-address needs --executor ray"),
    ],
)
def test_a_new_run_with_bad_settings_stops_with_one_line(tmp_path: Path, args: list[str], said: str):
    out = tmp_path / "never"
    result = runner.invoke(app, ["run", "--benchmark", "synth", "--out", str(out), "--quiet", *args])
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split())
    assert not out.exists()


def test_label_reads_its_grouped_options(tmp_path: Path):
    out = tmp_path / "dev.json"
    result = runner.invoke(app, ["label", "--model", "offline", "--match-f1", "1.5", "--out", str(out)])
    assert result.exit_code == 2
    assert "--match-f1 must be above 0 and at most 1, not 1.5" in " ".join(result.output.split())
    result = runner.invoke(app, ["label", "--model", "offline", "--types", "gossip", "--out", str(out)])
    assert result.exit_code == 2 and "--types: unknown type 'gossip'" in result.output
    assert not out.exists()
