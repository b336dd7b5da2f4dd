"""Memory stores at other granularities (raw turns here), built lazily per config, and runs
that freeze dimensions."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app
from evolvemem.data.synth import generate_synth
from evolvemem.errors import ConfigError
from evolvemem.contracts.diagnosis import Proposal
from evolvemem.answering.stores import base_store, stores_needed
from evolvemem.memory.stores import raw_units, store_extractor
from evolvemem.roles.factory import ModelSettings, build_roles
from evolvemem.space.config import load_config
from evolvemem.space.action_space import files_space
from evolvemem.workspace import Workspace


@pytest.fixture(scope="module")
def synth():
    return generate_synth(seed=3, n_conversations=2)


def test_raw_units_keep_every_turn_verbatim_and_dated(synth):
    conv = next(iter(synth.conversations.values()))
    turns = conv.turns()
    units = raw_units(conv)
    assert len(units) == len(turns)
    for unit, turn in zip(units, turns):
        assert unit.source_turn_ids == (turn.turn_id,)
        assert f"{turn.speaker}: {' '.join(turn.full_text.split())}" in unit.content
        assert unit.timestamp == turn.timestamp
        assert turn.speaker.lower() in unit.persons
    assert len({u.memory_id for u in units}) == len(units)
    assert [u.source_turn_ids[0] for u in raw_units(conv, {turns[1].turn_id})] == [turns[1].turn_id]


def test_raw_units_resolve_relative_dates_in_a_note():
    from datetime import datetime

    from evolvemem.data.models import Turn
    from evolvemem.memory.stores import raw_unit

    turn = Turn(
        turn_id="D1:3",
        speaker="Priya Raman",
        text="I finally repainted the shed yesterday!",
        session_id="session_1",
        timestamp=datetime(2023, 5, 9, 14, 0),
    )
    unit = raw_unit("c1", turn, ("Priya Raman", "Tomasz"))
    assert unit.content.startswith("[9 May 2023] Priya Raman: I finally repainted the shed yesterday!")
    assert "8 May 2023" in unit.content


def test_default_configs_need_only_the_fact_store():
    config = load_config("default")[0]
    assert stores_needed(config) == {"fact"}
    assert base_store(config) == "fact"


def test_unknown_store_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown memory store 'nope'"):
        store_extractor("nope", None, None)


def test_a_store_is_built_once_when_first_needed_and_retrieves_its_own_units(synth):
    ws = Workspace(synth, build_roles(ModelSettings()))
    ws.build()
    conv_id = next(iter(synth.conversations))
    with pytest.raises(RuntimeError, match="was not built"):
        ws.retriever(conv_id, "raw")
    ws.ensure_stores({"fact", "raw"})
    retriever = ws.retriever(conv_id, "raw")
    ws.ensure_stores({"raw"})
    assert ws.retriever(conv_id, "raw") is retriever  # not rebuilt
    raw = ws.store_memories(conv_id, "raw")
    assert len(raw) == len(synth.conversations[conv_id].turns())
    question = next(q for q in synth.questions if q.conversation_id == conv_id)
    result = retriever.retrieve(question, load_config("default")[0])
    raw_ids = {u.memory_id for u in raw}
    assert result.items and all(item.memory.memory_id in raw_ids for item in result.items)
    assert ws.retriever(conv_id) is ws.retrievers[conv_id]


def test_evaluating_a_config_builds_the_stores_it_reads_first(synth):
    """No caller has to remember to build a store: `evaluate` (and its contexts-only twin) build the
    ones a config reads, for the conversations asked about, and a question then reads raw turns,
    not a failure."""
    from evolvemem.answering.contexts import evaluate_contexts
    from evolvemem.answering.evaluate import evaluate
    from evolvemem.space.config import parse_config

    raw_config = parse_config({"memory_granularity": "raw"})[0]
    for score in (evaluate, evaluate_contexts):
        ws = Workspace(synth, build_roles(ModelSettings()))
        ws.build()
        asked = synth.questions[:4]
        records = score(ws, raw_config, asked).records
        assert records and not any(r.failed for r in records), records[0].error
        conversations = {q.conversation_id for q in asked}
        raw_ids = {u.memory_id for c in conversations for u in ws.store_memories(c, "raw")}
        assert all(r.context_ids and set(r.context_ids) <= raw_ids for r in records)
        assert not any(ws.has_store(c, "raw") for c in set(synth.conversations) - conversations)


def test_dimension_groups_expand_and_unknown_names_are_refused():
    dims = files_space()
    scenes = files_space().expand(["scenes"])
    assert scenes and all(dims[n].group == "scenes" for n in scenes)
    assert files_space().expand(["max_context", "scenes"]) == [n for n in dims if n == "max_context" or n in scenes]
    with pytest.raises(ConfigError, match="unknown dimension, group or stage 'nope'"):
        files_space().expand(["nope"])


def test_dropping_frozen_fields_removes_them_everywhere_and_says_why():
    proposal = Proposal(
        changes={"max_context": 12, "answer_style": "concise"},
        overrides={"temporal": {"max_context": 20}, "multi_hop": {"answer_style": "detailed"}},
    )
    proposal.drop_fields({"max_context"}, "frozen")
    assert proposal.changes == {"answer_style": "concise"}
    assert proposal.overrides == {"multi_hop": {"answer_style": "detailed"}}
    assert len(proposal.rejected) == 2 and all("frozen" in r for r in proposal.rejected)


def test_a_run_never_changes_frozen_dimensions(tmp_path):
    frozen = files_space().expand(["views", "answering"])
    out = tmp_path / "frozen"
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--benchmark",
            "synth",
            "--rounds",
            "3",
            "--objective",
            "balanced",
            "--diagnoser",
            "random",
            "--freeze",
            "views,answering",
            "--out",
            str(out),
            "--json",
            "--quiet",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    changed = [c["field"] for r in payload["rounds"] for c in r["changes"]]
    assert changed, "the random diagnoser should still change the free dimensions"
    assert not set(changed) & set(frozen)
    import duckdb

    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    rejected = [
        r for (p,) in con.execute("SELECT proposal FROM diagnoses").fetchall() for r in json.loads(p)["rejected"]
    ]
    con.close()
    assert any("frozen for this run" in r for r in rejected), "dropped changes are recorded with the reason"


def test_offline_runs_leave_model_only_dimensions_alone(tmp_path):
    dims = files_space()
    model_only = {n for n, d in dims.items() if d.needs_model and d.group == "cue_graph"}
    assert model_only, "the cue graph's LLM mode is declared needs_model"
    others = sorted(dims.groups() - {"cue_graph"})
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--benchmark",
            "synth",
            "--rounds",
            "3",
            "--objective",
            "balanced",
            "--diagnoser",
            "random",
            "--freeze",
            ",".join(others),
            "--out",
            str(tmp_path / "run"),
            "--json",
            "--quiet",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    changed = {c["field"] for r in payload["rounds"] for c in r["changes"]}
    assert changed and changed <= {n for n, d in dims.items() if d.group == "cue_graph"} - model_only


def test_a_run_store_from_an_older_version_gains_the_new_columns(tmp_path):
    import duckdb

    from evolvemem.store.run_store import DB_NAME, RunStore
    from evolvemem.store.schema import TABLES

    old_columns = TABLES["question_records"][:10]
    con = duckdb.connect(str(tmp_path / DB_NAME))
    con.execute("CREATE TABLE question_records (" + ", ".join(f"{n} {t}" for n, t, _ in old_columns) + ")")
    con.execute("INSERT INTO question_records (round, phase, question_id) VALUES (0, 'dev', 'q-old')")
    con.close()
    with RunStore(tmp_path) as store:
        from evolvemem.contracts.records import QuestionRecord

        new = QuestionRecord(1, "dev", "q-new", "c", "1", "single_fact", "?", "", "", retries=2)
        store.record_questions([new])
        rows = store.query("SELECT question_id, retries FROM question_records ORDER BY question_id")
    assert rows == [{"question_id": "q-new", "retries": 2}, {"question_id": "q-old", "retries": None}]


def test_building_a_store_says_so_before_its_first_conversation(synth):
    """The first conversation of a store can take minutes (episode on LoCoMo): its bar appears at 0,
    named for what it does, then counts conversations."""
    ws = Workspace(synth, build_roles(ModelSettings()))
    ws.build()
    seen: list[tuple[str, int, int]] = []
    ws.ensure_stores({"raw"}, progress=lambda stage, done, total: seen.append((stage, done, total)))
    n = len(synth.conversations)
    assert seen[0] == ("building the raw memory store (once per run, then cached)", 0, n)
    assert seen[-1][1:] == (n, n)
    seen.clear()
    ws.ensure_stores({"raw"}, progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert not seen  # built once
