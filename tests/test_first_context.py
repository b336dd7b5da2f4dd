"""One first answer context: evaluation's context record, the answer path's first attempt, the served
`Memory` (fed the conversation turn by turn) and the labeller's best context are the same memories
in the same order, formatted the same, for every question under several configs — presets, one
with per-type overrides that route to other stores, one with a token budget that cuts contexts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from evolvemem import Memory
from evolvemem.answering.contexts import context_record
from evolvemem.answering.evaluate import EffectiveConfigs
from evolvemem.answering.first_context import RULES, first_context
from evolvemem.answering.path import answer_path
from evolvemem.answering.stores import stores_needed
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.data.custom import load_custom
from evolvemem.data.models import Dataset
from evolvemem.labelling.contexts import Retrieval
from evolvemem.roles.context_format import format_context
from evolvemem.roles.factory import ModelSettings, build_roles
from evolvemem.serving.config_source import load_serving_config
from evolvemem.space.config import RetrievalConfig
from evolvemem.workspace import Workspace
from tests.test_memory_api import add_turn_by_turn

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "first_context_conversation.json"

# the rules route per question; overrides move two types to other stores and reorder one
OVERRIDES = """\
memory_granularity = "routed"

[per_category_overrides.temporal]
memory_granularity = "raw"
context_order = "chronological"

[per_category_overrides.inference]
memory_granularity = "episode"
max_context = 6
"""
# a budget small enough that contexts stop before max_context
BUDGET = """\
memory_granularity = "routed"
context_token_budget = 200
context_layout = "sessions"
"""
PRESETS = ("default", "hybrid", "weak")


@dataclass(frozen=True)
class Seen:
    """One reader's first context of one question: memory ids in context order, and the text."""

    ids: tuple[str, ...]
    text: str


def seen(memories: tuple[MemoryUnit, ...] | list[MemoryUnit], layout: str) -> Seen:
    return Seen(tuple(m.memory_id for m in memories), format_context(list(memories), layout))


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    return load_custom(FIXTURE)


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("configs")
    out = {name: name for name in PRESETS}
    for name, text in (("overrides", OVERRIDES), ("budget", BUDGET)):
        path = folder / f"{name}.toml"
        path.write_text(text)
        out[name] = str(path)
    return out


def evaluation(dataset: Dataset, config: RetrievalConfig) -> tuple[dict[str, Seen], dict[str, Seen], dict[str, str]]:
    """Per question: the context record's context, the answer path's first context, and the record's store."""
    ws = Workspace(dataset, build_roles(ModelSettings()))
    ws.build()
    ws.ensure_stores(stores_needed(config))
    ws.prepare(dataset.questions, config)  # as evaluate_contexts and evaluate do
    resolve = EffectiveConfigs(config)
    records, attempts, stores = {}, {}, {}
    for question in dataset.questions:
        effective, fingerprint = resolve(question.question_type)
        record = context_record(ws, question, effective, fingerprint, round_no=0, phase="eval")
        by_id = {m.memory_id: m for m in ws.store_memories(question.conversation_id, record.granularity)}
        records[question.question_id] = seen([by_id[i] for i in record.context_ids], effective.context_layout)
        stores[question.question_id] = record.granularity
        first = answer_path(ws, question, effective).attempts[0]
        attempts[question.question_id] = seen(first.context, effective.context_layout)
    return records, attempts, stores


def labeller(dataset: Dataset, config: RetrievalConfig) -> dict[str, Seen]:
    retrieval = Retrieval(dataset, config)
    out = {}
    for question in dataset.questions:
        conversation = dataset.conversations[question.conversation_id]
        effective, first = retrieval.first(conversation, question.text, question.question_type)
        out[question.question_id] = seen(first.memories, effective.context_layout)
        assert retrieval.context(conversation, question.text, question.question_type) == out[question.question_id].text
    return out


def served(memory: Memory, dataset: Dataset, spec: str) -> dict[str, Seen]:
    memory.use_config(spec)
    out = {}
    for question in dataset.questions:
        got = memory.context(question.conversation_id, question.text, question_type=question.question_type)
        out[question.question_id] = Seen(tuple(got.memory_ids), got.context)
    return out


def test_every_reader_gets_the_same_first_context_under_every_config(dataset, specs, tmp_path):
    with Memory.open(tmp_path / "memory.duckdb", "default") as memory:
        for conversation in dataset.conversations.values():
            add_turn_by_turn(memory, conversation)
        stores_read: dict[str, set[str]] = {}
        for name, spec in specs.items():
            config = load_serving_config(spec).config
            records, attempts, stores = evaluation(dataset, config)
            assert all(s.ids for s in records.values()), f"{name}: an empty context proves nothing"
            assert attempts == records, f"{name}: the answer path's first context is not the context record's"
            assert served(memory, dataset, spec) == records, f"{name}: the served context differs"
            assert labeller(dataset, config) == records, f"{name}: the labeller's context differs"
            stores_read[name] = set(stores.values())
    # the configs did exercise what they claim: presets read facts or raw turns, the overrides reach
    # every store, and the budget stops a context before its max_context
    assert stores_read["default"] == {"fact"} and stores_read["hybrid"] == {"raw"}
    assert stores_read["overrides"] == {"fact", "raw", "episode"}


def test_the_token_budget_cuts_contexts_that_max_context_would_not(dataset, specs):
    config = load_serving_config(specs["budget"]).config
    ws = Workspace(dataset, build_roles(ModelSettings()))
    ws.build()
    ws.ensure_stores(stores_needed(config))
    resolve = EffectiveConfigs(config)
    shorter = 0
    for question in dataset.questions:
        effective, _ = resolve(question.question_type)
        budgeted = first_context(ws, question, effective, RULES)
        unbudgeted = first_context(ws, question, effective.model_copy(update={"context_token_budget": 0}), RULES)
        assert budgeted.store == unbudgeted.store and budgeted.route == unbudgeted.route
        shorter += len(budgeted.retrieval.items) < len(unbudgeted.retrieval.items)
    assert shorter > 0, "the budget never cut a context: the budget config tests nothing"
