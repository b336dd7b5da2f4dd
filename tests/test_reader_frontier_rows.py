"""benchmarks/reader_frontier.py's row specs: a lever measured beside its base is the base's config
with exactly that change, and a bad setting stops the script in one line."""

from __future__ import annotations

import pytest

from benchmarks.reader_frontier import against_rows, parse_rows
from evolvemem.contracts.vocab import ContextMode


def test_a_setting_after_a_row_changes_only_that_setting_of_its_config() -> None:
    rows = parse_rows(
        "oracle,hybrid:context_layout=sessions:answer_max_words=6,oracle:quote_then_answer=true", None, "hybrid", 600
    )
    by_label = {row.label: row for row in rows}
    assert list(by_label) == [
        "hybrid",
        "oracle",
        "hybrid:context_layout=sessions:answer_max_words=6",
        "oracle:quote_then_answer=true",
    ]
    base = by_label["hybrid"].config.model_dump()
    lever = by_label["hybrid:context_layout=sessions:answer_max_words=6"].config.model_dump()
    assert {k for k in base if base[k] != lever[k]} == {"context_layout", "answer_max_words"}
    assert lever["context_layout"] == "sessions" and lever["answer_max_words"] == 6
    quoted = by_label["oracle:quote_then_answer=true"]
    assert quoted.mode == ContextMode.ORACLE and quoted.config.quote_then_answer is True
    assert quoted.config.budget == by_label["hybrid"].config.budget and quoted.config.budget.tokens == 600


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("hybrid:answer_max_words=999", "out-of-range value for answer_max_words"),
        ("hybrid:no_such_lever=1", "no_such_lever"),
        ("hybrid:context_layout", "expected SETTING=VALUE"),
    ],
)
def test_a_bad_row_setting_stops_in_one_line(spec: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message) as stopped:
        parse_rows(spec, None, "hybrid", 600)
    assert "\n" not in str(stopped.value)


def test_against_names_rows_and_refuses_one_that_is_not_a_row() -> None:
    rows = parse_rows("oracle,oracle+distractors,hybrid", None, "hybrid", 600)
    assert against_rows(" oracle , oracle+distractors", rows) == ["oracle", "oracle+distractors"]
    assert against_rows("", rows) == []
    with pytest.raises(SystemExit, match="--against evolved: not among the rows"):
        against_rows("oracle,evolved", rows)
