"""The README documents the run store exactly as the code defines it, and the commands it shows exist."""
from __future__ import annotations

from pathlib import Path

from evolvemem.store.schema import schema_markdown

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_readme_schema_matches_the_code():
    assert schema_markdown() in README


def test_readme_test_command_is_the_ci_command():
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest" in README and "\npython -m pytest\n" in ci
