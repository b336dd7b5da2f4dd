"""Traces: every served search and answer is in the store, and `evolve traces export` writes them with
the conversations in the custom benchmark format (which `evolve` reads back)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from evolvemem import Memory
from evolvemem.data.custom import load_custom
from tests.serve_server import REPO


def evolve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from evolvemem.cli.main import app; app()", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_traces_are_recorded_and_exported_in_the_custom_format(tmp_path):
    store = tmp_path / "memory.duckdb"
    with Memory.open(store) as memory:
        memory.add(
            "omar",
            [{"speaker": "Omar", "text": "I sold my bike and now take the train to work."}],
            session="s1",
            at="2024-06-01T08:00",
        )
        memory.add(
            "omar",
            [{"speaker": "Omar", "text": "The train to Leiden takes forty minutes."}],
            session="s2",
            at="2024-06-08T08:00",
        )
        searched = memory.search("omar", "How does Omar get to work?")
        answered = memory.answer("omar", "How long is the train ride?")
        memory.traces.flush()
        rows = memory.store.traces(user="omar")
        assert [r.kind for r in rows] == ["search", "answer"]
        assert rows[0].memory_ids == tuple(h.memory_id for h in searched.hits)
        assert rows[0].config_hash == searched.config_hash and rows[0].latency_ms > 0
        assert rows[1].answer == answered.answer and rows[1].turn_ids == tuple(answered.turn_ids)

    out = tmp_path / "traces.json"
    done = evolve("traces", "export", "--store", str(store), "--out", str(out))
    assert done.returncode == 0, done.stderr
    dataset = load_custom(out)
    assert list(dataset.conversations) == ["omar"]
    assert [s.session_id for s in dataset.conversations["omar"].sessions] == ["s1", "s2"]
    assert [q.text for q in dataset.questions] == ["How does Omar get to work?", "How long is the train ride?"]
    raw = json.loads(out.read_text())["questions"]
    assert raw[1]["served_answer"] == answered.answer and raw[0]["served_turn_ids"]
    # the exported file is a benchmark `evolve eval` can score once it is labelled
    for question in raw:
        question["answer"] = "by train"
    labelled = tmp_path / "labelled.json"
    labelled.write_text(json.dumps(json.loads(out.read_text()) | {"questions": raw}))
    scored = evolve("eval", "--benchmark", "custom", "--data", str(labelled), "--out", str(tmp_path / "eval"), "-q")
    assert scored.returncode == 0, scored.stderr


def test_export_while_a_server_holds_the_store_is_one_line(tmp_path):
    store = tmp_path / "memory.duckdb"
    with Memory.open(store) as memory:
        memory.add("u", [{"speaker": "Ana", "text": "I keep bees."}])
        done = evolve("traces", "export", "--store", str(store), "--out", str(tmp_path / "t.json"))
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1 and "open for writing in another process" in done.stderr
