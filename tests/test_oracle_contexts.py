"""Oracle contexts (`evolve eval --context`): exactly the gold turns, dated, in conversation order;
or those topped up to the budget with the config's own lines; never a config the loop can pick.

The conversation is the invented one of tests/fixtures/first_context_conversation.json."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolvemem.answering.evaluate import evaluate
from evolvemem.answering.oracle import gold_units, oracle_memory_id
from evolvemem.cli.main import app
from evolvemem.contracts.vocab import ContextMode
from evolvemem.data.custom import load_custom
from evolvemem.data.models import Dataset
from evolvemem.diagnosers.llm import diagnosis_variants
from evolvemem.loop.diagnosis_input import build_diagnosis_input
from evolvemem.store.run_store import RunStore
from evolvemem.errors import ConfigError
from evolvemem.roles.context_format import format_context
from evolvemem.roles.factory import ModelSettings, build_roles
from evolvemem.serving.config_source import load_serving_config
from evolvemem.space.action_space import files_space
from evolvemem.space.budget import TokenBudget
from evolvemem.space.config import load_config
from evolvemem.workspace import Workspace
from tests.fake_llm_server import FakeLLMServer

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "first_context_conversation.json"
BUDGET = 150  # room for the gold turns and a few more lines, not for every ranked one


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    ds = load_custom(FIXTURE)
    # evidence listed out of conversation order: the oracle context must still follow the conversation
    questions = [replace(q, evidence=tuple(reversed(q.evidence))) for q in ds.questions]
    return replace(ds, questions=questions)


@pytest.fixture(scope="module")
def workspace(dataset: Dataset) -> Workspace:
    ws = Workspace(dataset, build_roles(ModelSettings()))
    ws.build()
    return ws


def turn_lines(dataset: Dataset, turn_ids: list[str]) -> list[tuple[str, str]]:
    """(speaker, text) of turns, as the fixture has them."""
    turns = {t.turn_id: t for c in dataset.conversations.values() for t in c.turns()}
    return [(turns[t].speaker, turns[t].text) for t in turn_ids]


def test_oracle_contexts_hold_exactly_the_gold_turns_in_conversation_order_with_dates(dataset, workspace):
    config = load_serving_config("default").config
    outcome = evaluate(workspace, config, dataset.questions, mode=ContextMode.ORACLE)
    by_id = {r.question_id: r for r in outcome.records}
    order = [t.turn_id for c in dataset.conversations.values() for t in c.turns()]
    for question in dataset.questions:
        record = by_id[question.question_id]
        gold = sorted(question.evidence, key=order.index)
        assert record.context_ids == tuple(oracle_memory_id(question.conversation_id, t) for t in gold)
        assert record.context_mode == "oracle" and record.route == "oracle"
        assert record.answer_right is None  # the offline reader is no model: no reader split
        if question.evidence:
            assert record.evidence_recall == 1.0
    # the reader sees each gold turn as any context line: numbered, dated, attributed
    why = next(q for q in dataset.questions if q.question_id == "q-why-trailer")
    assert why.evidence == ("mh-19", "mh-17")
    text = format_context(gold_units(workspace, why), config.context_layout)
    lines = text.splitlines()
    assert len(lines) == 2
    for line, (speaker, said) in zip(lines, turn_lines(dataset, ["mh-17", "mh-19"])):
        assert re.match(rf"^\d+\. \[\d{{1,2}} [A-Z][a-z]+ 2024\] {speaker}: ", line), line
        assert said[:40] in line


def test_oracle_with_distractors_adds_the_configs_lines_within_the_budget(dataset, workspace):
    config = load_serving_config("default").config.with_budget(TokenBudget(BUDGET))
    plain = {r.question_id: r for r in evaluate(workspace, config, dataset.questions).records}
    topped = evaluate(workspace, config, dataset.questions, mode=ContextMode.ORACLE_DISTRACTORS).records
    added = 0
    for record in topped:
        question = next(q for q in dataset.questions if q.question_id == record.question_id)
        gold = [u.memory_id for u in gold_units(workspace, question)]
        ids = list(record.context_ids or ())
        assert ids[: len(gold)] == gold and record.evidence_recall in (None, 1.0)
        rest = ids[len(gold) :]
        assert len(set(ids)) == len(ids)  # no line twice
        # the rest are the config's own ranked lines: in its context or cut by its budget
        own = set(plain[record.question_id].context_ids or ()) | set(plain[record.question_id].cut_ids or ())
        assert set(rest) <= own
        assert (record.context_tokens or 0) <= BUDGET or not rest  # the gold turns alone may pass it
        added += len(rest)
    assert added > 0, "no distractor was added: the test proves nothing"


def test_the_loop_cannot_pick_an_oracle_context(tmp_path):
    assert not any("oracle" in name or name == "context" for name in files_space())
    for field in ("context", "context_mode"):
        path = tmp_path / f"{field}.toml"
        path.write_text(f'{field} = "oracle"\n')
        with pytest.raises(ConfigError, match="unknown config field"):
            load_config(str(path))


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_oracle_eval_against_a_model_records_the_split_and_show_json_carries_it(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("EVOLVEMEM_CACHE_DIR", str(tmp_path / "cache"))
    # the reader names the wrong starter and otherwise gives a long answer holding the turn it was shown
    prompts: list[str] = []

    def responder(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        prompts.append(prompt)
        return "Bertha" if "rye starter" in prompt else "It is not mentioned."

    out = tmp_path / "oracle"
    with FakeLLMServer(responder=responder) as server:
        args = ["eval", "--benchmark", "custom", "--data", str(FIXTURE), "--model", "openai/fake-model"]
        done = _invoke(*args, "--api-base", server.url, "--context", "oracle", "--out", str(out), "--json", "--quiet")
        assert done.exit_code == 0, done.output
        payload = json.loads(done.stdout.strip().splitlines()[-1])
        assert payload["context"] == "oracle" and payload["skipped"] == 1  # the adversarial question has no evidence
        assert payload["reader_split"]["full_wrong"] == {"abstained": 8, "entity": 1}
        # a resume must repeat --context
        again = _invoke(*args, "--api-base", server.url, "--out", str(out), "--quiet")
        assert again.exit_code != 0 and "--context" in again.output
    assert any("Clementine" in p for p in prompts)  # the starter's gold turn reached the reader
    shown = _invoke("show", str(out), "--json")
    assert shown.exit_code == 0, shown.output
    split = json.loads(shown.stdout.strip().splitlines()[-1])["rounds"][0]["reader_split"]
    assert split["context"] == "oracle"
    assert split["evidence"]["full"]["wrong"] == 9 and split["evidence"]["full"]["right"] == 0
    assert split["full_wrong"] == {"abstained": 8, "entity": 1}
    # the llm diagnoser reads the same split
    with RunStore(out, read_only=True) as store:
        config = load_serving_config("default").config
        inp = build_diagnosis_input(store, 0, "eval", config, "all", 0.0, None)
    assert inp.reader_evidence == {"full": {"right": 0, "wrong": 9}}
    assert inp.reader_failures == {"abstained": 8, "entity": 1}
    prompt = next(diagnosis_variants(inp, files_space()))[1]
    assert "Reader split" in prompt and '"entity"' in prompt and "no answer model" not in prompt
