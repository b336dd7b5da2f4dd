"""Batches written column by column (evolvemem/store/columnar.py) read back exactly as
`executemany` would have written them: text, numbers, JSON, bytes, lists, timestamps and NULLs."""

from __future__ import annotations

import json
from datetime import datetime

import duckdb

from evolvemem.store.columnar import create_table, insert_columns

COLUMNS = (
    ("name", "VARCHAR"),
    ("n", "BIGINT"),
    ("x", "DOUBLE"),
    ("doc", "JSON"),
    ("raw", "BLOB"),
    ("tags", "VARCHAR[]"),
    ("at", "TIMESTAMP"),
)


def test_a_batch_reads_back_as_the_row_by_row_insert_writes_it(tmp_path):
    rows = [
        ("Orla", 1, 0.5, json.dumps({"k": [1, 2]}), b"\x00\x01", ("a", "b"), datetime(2024, 5, 3, 10, 30)),
        (None, None, None, None, None, None, None),
        ("Tomasz", -7, 1e-9, json.dumps("plain"), b"", (), datetime(1999, 12, 31)),
        # list items a JSON text must carry unchanged: quotes, backslashes, breaks, non-ASCII, "null"
        ("Zoë", 0, -0.0, None, None, ('say "hi"', "a\\b", "line\nbreak", "Zoë ☂", "null", ""), None),
    ]
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    for table in ("batched", "one_by_one"):
        con.execute(create_table(table, COLUMNS))
    assert insert_columns(con, "batched", COLUMNS, rows) == 4
    con.executemany(
        "INSERT INTO one_by_one VALUES (?, ?, ?, ?, ?, ?, ?)",
        [[*r[:5], None if r[5] is None else list(r[5]), r[6]] for r in rows],
    )
    batched = con.execute("SELECT * FROM batched ORDER BY rowid").fetchall()
    assert batched == con.execute("SELECT * FROM one_by_one ORDER BY rowid").fetchall()
    assert batched[0][3] == json.dumps({"k": [1, 2]}) and batched[1] == (None,) * 7
    assert insert_columns(con, "batched", COLUMNS, []) == 0
