"""The README documents the run store exactly as the code defines it, the commands it shows exist, and its
custom-domain example works as written."""
from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app
from evolvemem.store.schema import schema_markdown

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_readme_schema_matches_the_code():
    assert schema_markdown() in README


def test_readme_test_command_is_the_ci_command():
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest" in README and "\npython -m pytest\n" in ci


def _readme_custom_example() -> str:
    """The custom-domain JSON block of the README, as a user would copy it."""
    block = re.search(r"```json\n(\{\n  \"name\": .*?)```", README, re.S)
    assert block, "the README's custom-domain example is gone"
    return block.group(1)


@pytest.mark.parametrize("config", ["default", "weak"])
def test_readme_custom_example_answers_with_offline_roles(tmp_path, config):
    """The first example a user copies must answer its own question, offline, as written."""
    data = tmp_path / "support.json"
    data.write_text(_readme_custom_example(), encoding="utf-8")
    out = tmp_path / f"eval-{config}"
    result = CliRunner().invoke(app, ["eval", "--benchmark", "custom", "--data", str(data), "--config", config,
                                      "--out", str(out), "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    question, gold, prediction, f1 = con.execute(
        "SELECT question, gold, prediction, f1 FROM question_records").fetchone()
    con.close()
    assert gold.lower() in prediction.lower() and f1 == 1.0, (question, prediction)
