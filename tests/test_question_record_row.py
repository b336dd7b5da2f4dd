"""A question record survives the run store whole: every field written is the field read back.

`QuestionRecord.as_row` reads fields shallowly (no deep copy); this holds it to every field of the
record, so a field added later that a shallow read would mangle fails here."""

from __future__ import annotations

from dataclasses import MISSING, fields, replace

from evolvemem.contracts.records import CUT_IDS_STORED, QuestionRecord, record_columns
from evolvemem.store.run_store import RunStore

VALUE_OF_TYPE = {
    "INTEGER": lambda name: len(name),
    "DOUBLE": lambda name: len(name) / 100,
    "BOOLEAN": lambda name: len(name) % 2 == 0,
    "VARCHAR": lambda name: f"value of {name}",
    "VARCHAR[]": lambda name: (f"{name}-1", f"{name}-2", "shared"),
}


def every_field_set() -> QuestionRecord:
    return QuestionRecord(**{name: VALUE_OF_TYPE[sql_type](name) for name, sql_type, _ in record_columns()})


def test_a_record_with_every_field_set_reads_back_equal(tmp_path):
    record = every_field_set()
    row = record.as_row()
    assert set(row) == {f.name for f in fields(QuestionRecord)}
    assert row["context_ids"] == ["context_ids-1", "context_ids-2", "shared"]  # lists where the table holds lists
    with RunStore(tmp_path / "run") as store:
        store.record_questions([record])
        (back,) = store.round_records(record.round, record.phase)
    assert back == record


def test_a_record_with_optional_fields_left_empty_reads_back_equal(tmp_path):
    required = {f.name for f in fields(QuestionRecord) if f.default is MISSING}
    record = QuestionRecord(
        **{name: VALUE_OF_TYPE[sql_type](name) for name, sql_type, _ in record_columns() if name in required}
    )
    assert record.context_ids is None
    with RunStore(tmp_path / "run") as store:
        store.record_questions([record])
        (back,) = store.round_records(record.round, record.phase)
    assert back == record


def test_a_deep_cut_keeps_its_nearest_misses_in_rank_order(tmp_path):
    deep = tuple(f"conv:m{rank}" for rank in range(CUT_IDS_STORED * 6))
    record = replace(every_field_set(), cut_ids=deep)
    with RunStore(tmp_path / "run") as store:
        store.record_questions([record])
        (back,) = store.round_records(record.round, record.phase)
    assert back.cut_ids == deep[:CUT_IDS_STORED]
    assert replace(back, cut_ids=record.cut_ids) == record  # nothing else is cut
