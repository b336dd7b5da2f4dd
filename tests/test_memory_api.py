"""`evolvemem.Memory`: what is served is what was tuned, and a store survives crashes and rivals.

The key test adds a LoCoMo conversation turn by turn and compares, for every question, the context
`Memory.context` returns with the first context evaluation's answer path hands the reader for the
same conversation loaded from the file — byte for byte, under two configs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evolvemem import Memory
from evolvemem.errors import EvolveMemError

REPO = Path(__file__).resolve().parents[1]
LOCOMO_DEV = REPO.parent / "shared" / "data" / "locomo10_dev8.json"
CONVERSATION = "conv-30"  # the smallest: 369 turns, 105 questions; its second speaker speaks first


def locomo_or_skip() -> Path:
    if LOCOMO_DEV.is_file():
        return LOCOMO_DEV
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs the LoCoMo dev file at {LOCOMO_DEV}")
    pytest.skip(f"the LoCoMo dev file is not at {LOCOMO_DEV} (it is not redistributed)")


def evaluation_contexts(config_spec: str, conversation_id: str) -> tuple[dict, list]:
    """question id -> (memory ids, context text) of the first context of evaluation's answer path."""
    from evolvemem.answering.path import answer_path
    from evolvemem.answering.stores import stores_needed
    from evolvemem.benchmarks import load_benchmark
    from evolvemem.roles.context_format import format_context
    from evolvemem.roles.factory import ModelSettings, build_roles
    from evolvemem.serving.config_source import load_serving_config
    from evolvemem.workspace import Workspace

    dataset = load_benchmark("locomo", str(locomo_or_skip())).subset({conversation_id})
    config = load_serving_config(config_spec).config
    ws = Workspace(dataset, build_roles(ModelSettings()))
    ws.build()
    ws.ensure_stores(stores_needed(config))
    ws.prepare(dataset.questions, config)  # as evaluate() does before answering
    out = {}
    for question in dataset.questions:
        effective = config.for_type(question.question_type)
        first = answer_path(ws, question, effective).attempts[0]
        out[question.question_id] = (
            [m.memory_id for m in first.context],
            format_context(first.context, effective.context_layout),
        )
    return out, dataset


def add_turn_by_turn(memory: Memory, conversation) -> None:
    for session in conversation.sessions:
        for turn in session.turns:
            memory.add(
                conversation.conversation_id,
                [{"speaker": turn.speaker, "text": turn.text, "id": turn.turn_id, "image_caption": turn.image_caption}],
                session=session.session_id,
                at=session.timestamp,
            )


VARIANT = """\
# exercises more of the path: other stores routed to, entity swap, sessions layout, refresher, an override,
# the ranking levers (late interaction, session prior, neighbour, person focus, temporal grounding) and a
# token budget the context fills
memory_granularity = "routed"
enable_entity_swap = true
context_layout = "sessions"
enable_refresher = true
max_context = 12
late_top_k = 10
late_weight = 2.0
session_prior_weight = 0.3
neighbour_weight = 0.2
person_focus_weight = 0.1
temporal_grounding_weight = 0.2
context_token_budget = 1500

[per_category_overrides.temporal]
context_order = "chronological"
"""


@pytest.mark.slow
def test_turn_by_turn_adds_give_evaluations_contexts_byte_for_byte(tmp_path):
    variant = tmp_path / "variant.toml"
    variant.write_text(VARIANT)
    expected_default, dataset = evaluation_contexts("default", CONVERSATION)
    expected_variant, _ = evaluation_contexts(str(variant), CONVERSATION)
    conversation = dataset.conversations[CONVERSATION]

    with Memory.open(tmp_path / "memory.duckdb", "default") as memory:
        add_turn_by_turn(memory, conversation)
        assert len(memory.conversation(CONVERSATION).turns()) == len(conversation.turns())
        for spec, expected in (("default", expected_default), (str(variant), expected_variant)):
            memory.use_config(spec)
            mismatched = []
            for question in dataset.questions:
                got = memory.context(CONVERSATION, question.text, question_type=question.question_type)
                ids, text = expected[question.question_id]
                if got.memory_ids != ids or got.context != text:
                    mismatched.append(question.question_id)
            assert not mismatched, f"{spec}: {len(mismatched)} of {len(dataset.questions)} contexts differ"
        # the variant routes some questions to other stores, so both branches were compared
        assert len({text for _, text in expected_variant.values()}) > 1


def test_reopening_a_store_embeds_nothing_and_answers_the_same(tmp_path):
    path = tmp_path / "memory.duckdb"
    turns = [
        {"speaker": "Priya", "text": "I moved to Lisbon in May."},
        {"speaker": "Tomasz", "text": "How is the new flat in Lisbon?"},
        {"speaker": "Priya", "text": "Bright, and the tram stops outside."},
    ]
    with Memory.open(path) as memory:
        memory.add("priya", turns, session="s1", at="2024-03-05T14:30")
        before = memory.context("priya", "Where does Priya live?")
    with Memory.open(path) as memory:
        after = memory.context("priya", "Where does Priya live?")
        assert memory.embedder.inner.texts_embedded == 0  # memories came with their vectors
        assert after == before
        assert memory.answer("priya", "Where does Priya live?").answer == "Lisbon"


def test_a_second_writer_process_is_refused_in_one_line(tmp_path):
    path = tmp_path / "memory.duckdb"
    with Memory.open(path) as memory:
        memory.add("u", [{"speaker": "Ana", "text": "I keep bees on the roof."}])
        script = textwrap.dedent(f"""
            from evolvemem.serving.store import MemoryStore
            from evolvemem.errors import EvolveMemError
            try:
                MemoryStore({str(path)!r})
            except EvolveMemError as exc:
                print(exc)
        """)
        out = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert out.returncode == 0, out.stderr
        lines = out.stdout.strip().splitlines()
        assert len(lines) == 1 and "open for writing in another process" in lines[0]
        assert memory.search("u", "Where are the bees?").hits  # the first writer is unharmed


ADDER = """
import sys
from evolvemem import Memory
memory = Memory.open(sys.argv[1])
for i in range(10_000):
    memory.add("stream", [{"speaker": "Ana", "text": f"Note number {i} about the garden.", "id": f"t{i}"},
                          {"speaker": "Ben", "text": f"Reply {i}.", "id": f"r{i}"}], session=f"s{i // 5}")
    print("ack", i, flush=True)
"""


def test_sigkill_during_adds_keeps_every_acknowledged_add_once(tmp_path):
    path = tmp_path / "memory.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-c", ADDER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    acked = -1
    assert proc.stdout is not None
    for line in proc.stdout:
        acked = int(line.split()[1])
        if acked >= 12:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with Memory.open(path) as memory:
        turns = memory.conversation("stream").turns()
        ids = [t.turn_id for t in turns]
        assert len(ids) == len(set(ids)), "a turn was stored twice"
        for i in range(acked + 1):
            assert f"t{i}" in ids and f"r{i}" in ids
        assert len(ids) in (2 * (acked + 1), 2 * (acked + 2))  # the unacknowledged add is whole or absent
        # a client retrying an add it never heard back about stores nothing twice
        again = memory.add("stream", [{"speaker": "Ana", "text": "Note number 0 about the garden.", "id": "t0"}])
        assert again.turn_ids == [] and again.skipped == ["t0"]
        hits = memory.search("stream", "note about the garden", limit=3).hits
        assert hits and all(h.turn_ids for h in hits)


def test_bad_input_is_one_clear_error(tmp_path):
    with Memory.open(tmp_path / "memory.duckdb") as memory:
        with pytest.raises(EvolveMemError, match="question_type"):
            memory.add("u", [{"speaker": "Ana", "text": "Hello there, I am Ana."}])
            memory.search("u", "who?", question_type="not-a-type")
        with pytest.raises(EvolveMemError, match="query is empty"):
            memory.context("u", "   ")
        assert memory.search("nobody", "anything").hits == []
        with pytest.raises(EvolveMemError, match="turn 1: speaker"):
            memory.add("u", [{"speaker": "Ana", "text": "fine"}, {"text": "no speaker"}])
        with pytest.raises(EvolveMemError, match="not an ISO date"):
            memory.add("u", [{"speaker": "Ana", "text": "fine"}], at="last tuesday")
    with pytest.raises(EvolveMemError, match="a directory"):
        Memory.open(tmp_path)


def test_forget_and_export(tmp_path):
    from evolvemem.data.custom import load_custom
    import json

    with Memory.open(tmp_path / "memory.duckdb") as memory:
        memory.add("ana", [{"speaker": "Ana", "text": "My sister Lena lives in Porto."}], session="s1", at="2024-01-02")
        memory.add("ana", [{"speaker": "Ana", "text": "I adopted a cat named Miso."}], session="s2", at="2024-02-03")
        memory.add("ben", [{"speaker": "Ben", "text": "I run a bakery in Ghent."}])
        memory.answer("ana", "What is the name of Ana's cat?")
        exported = memory.export("ana", with_traces=True)
        path = tmp_path / "ana.json"
        path.write_text(json.dumps(exported))
        dataset = load_custom(path)  # the custom format reads it back
        assert [s.session_id for s in dataset.conversations["ana"].sessions] == ["s1", "s2"]
        assert dataset.questions[0].text == "What is the name of Ana's cat?"
        assert exported["questions"][0]["served_answer"]

        assert memory.forget("ana", session="s2").forgotten_turns == 1
        assert "Miso" not in memory.context("ana", "What is the name of Ana's cat?").context
        assert memory.forget("ana").forgotten_turns == 1
        assert memory.search("ana", "sister").hits == []
        assert memory.search("ben", "bakery").hits  # other users untouched
        assert memory.store.traces(user="ana") == []


def test_answer_goes_through_the_configured_answer_model(tmp_path, monkeypatch):
    """With an answer model the answer role asks it (the real litellm path against a local server),
    with the context the config formats; search and context stay model-free."""
    from evolvemem.roles.factory import ModelSettings
    from tests.fake_llm_server import FakeLLMServer, last_user_message

    monkeypatch.setenv("OPENAI_API_KEY", "none")  # the local server takes any key
    prompts: list[str] = []

    def respond(body: dict) -> str:
        prompts.append(last_user_message(body))
        return "{}" if body.get("response_format") else "Answer: Utrecht"

    with FakeLLMServer(responder=respond) as server:
        models = ModelSettings(answer_model="openai/fake-model", api_base=server.url)
        with Memory.open(tmp_path / "memory.duckdb", "default", models=models, cache_enabled=False) as memory:
            memory.add(
                "ines", [{"speaker": "Ines", "text": "My cello teacher Ruth lives in Utrecht."}], at="2024-04-10"
            )
            context = memory.context("ines", "Where does the cello teacher live?")
            before = len(prompts)
            answer = memory.answer("ines", "Where does the cello teacher live?")
    assert answer.answer == "Utrecht" and not answer.failed
    assert len(prompts) > before and context.context in prompts[-1]  # the reader got exactly the served context


def test_a_run_directory_serves_its_best_rounds_config(tmp_path):
    """`--config RUN`: the config of the run's best round (the one it exported), swapped in by hash."""
    from typer.testing import CliRunner

    from evolvemem.cli.main import app
    from evolvemem.space.config import load_config

    run_dir = tmp_path / "run"
    result = CliRunner().invoke(
        app, ["run", "--benchmark", "synth", "--rounds", "1", "--out", str(run_dir), "-q"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output[-2000:]
    exported, _ = load_config(run_dir / "best_config.toml")
    with Memory.open(tmp_path / "memory.duckdb", run_dir) as memory:
        assert memory.config_hash == exported.fingerprint()
        assert str(run_dir) in memory.config_source and "round" in memory.config_source
        # the same values hash the same (the budget the run measured at is not a value)
        assert (
            memory.use_config("weak") != exported.fingerprint() or exported.values() == load_config("weak")[0].values()
        )
