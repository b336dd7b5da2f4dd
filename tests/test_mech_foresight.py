"""Foresight items: plans and temporary states with validity intervals, filtered by the question date.

Real parts only: the bundled all-MiniLM-L6-v2 model, bm25s, a real ConversationIndex and
Retriever over invented memories, and litellm against tests/fake_llm_server.py on 127.0.0.1
for the LLM variant (its responders read the prompt our code rendered and answer from it)."""

from __future__ import annotations

import json
import re
import threading
from datetime import date, datetime

import numpy as np
import pytest

from evolvemem.data.models import Question
from evolvemem.llm.client import LLMClient
from evolvemem.mechanisms.foresight import (
    LLM_BATCH,
    SOURCE,
    ForesightItem,
    build_index,
    horizon_end,
    parse_foresight,
    rule_item,
    rule_items,
)
from evolvemem.contracts.memory import MemoryUnit, make_memory_id
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.mechanisms import candidate_sources
from evolvemem.retrieval.extensions import ViewRequest
from evolvemem.retrieval.index import ConversationIndex
from evolvemem.retrieval.retriever import Retriever
from evolvemem.contracts.usage import Usage
from evolvemem.space.config import load_config
from tests.fake_llm_server import FakeLLMServer, count_tokens, fake_llm, last_user_message, message_text  # noqa: F401

MONDAY = date(2023, 5, 8)
PERSONS = ("Priya Raman", "Tomasz")
# (day said, text): plans with and without an end, and plain past events
SAID = [
    (
        datetime(2023, 5, 8, 14),
        "[8 May 2023] Priya Raman: I'm flying to Lisbon next week for a marine biology "
        "conference! (next week = the week after 8 May 2023)",
    ),
    (datetime(2023, 5, 8, 14), "[8 May 2023] Tomasz: I went hiking in the Tatra mountains yesterday."),
    (
        datetime(2023, 5, 8, 14),
        "[8 May 2023] Tomasz: I'm staying at my parents' place until 20 May while my flat is painted.",
    ),
    (datetime(2023, 3, 1, 9), "[1 March 2023] Priya Raman: I will start learning the cello."),
    (datetime(2023, 3, 1, 9), "[1 March 2023] Tomasz: I baked sourdough bread with rye flour."),
    (datetime(2023, 6, 20, 9), "[20 June 2023] Priya Raman: I bought a second-hand bicycle for my commute."),
    (datetime(2023, 6, 20, 9), "[20 June 2023] Tomasz: Are you going to the concert tomorrow?"),
]
PLANS = {0, 2, 3}  # the rows that state a plan or a temporary state
PLAIN = dict(
    semantic_top_k=3,
    keyword_top_k=3,
    structured_top_k=0,
    enable_entity_swap=False,
    importance_weight=0.0,
    max_context=30,
)


def memories() -> list[MemoryUnit]:
    return [
        MemoryUnit(
            make_memory_id("c1", text),
            "c1",
            text,
            session_id=f"s{when.month}",
            timestamp=when,
            source_turn_ids=(f"D{i}:1",),
        )
        for i, (when, text) in enumerate(SAID)
    ]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def retriever(embedder) -> Retriever:
    return Retriever(
        ConversationIndex.build(memories(), embedder, PERSONS),
        embedder,
        known_persons=PERSONS,
        sources=candidate_sources(),
    )


def config(**changes):
    base, _ = load_config("default")
    cfg, _ = base.with_changes({**PLAIN, **changes})
    return cfg


def asked(text: str, when: datetime | None) -> Question:
    return Question("q", "c1", text, "-", "single_fact", ("-",), question_date=when)


def foresight_view(result) -> list[str]:
    ranked = sorted(
        (i.views["foresight"], i.memory.content) for i in result.items + result.cut if "foresight" in i.views
    )
    return [content for _, content in ranked]


# ----------------------------------------------------------------------------- dates and rules
@pytest.mark.parametrize(
    "text, end",
    [
        ("Priya will call tomorrow.", date(2023, 5, 9)),
        ("The exam is the day after tomorrow.", date(2023, 5, 10)),
        ("We're going next week.", date(2023, 5, 21)),  # the Sunday of next week (8 May is a Monday)
        ("She moves next month.", date(2023, 6, 30)),
        ("I'll be away for the next 3 days.", date(2023, 5, 11)),
        ("The course ends in two weeks.", date(2023, 5, 22)),
        ("I'm here until 20 May.", date(2023, 5, 20)),
        ("The launch is on June 3rd.", date(2023, 6, 3)),
        ("Back by 2 November.", date(2023, 11, 2)),  # without a year: the occurrence nearest the day said
        ("The trip is on 2024-01-15.", date(2024, 1, 15)),
        ("Staying with them until Friday.", date(2023, 5, 12)),
        ("I plan to hike next summer.", date(2023, 8, 31)),  # said in May: the coming summer
        ("I plan to hike next winter.", date(2024, 2, 29)),
        ("Later this year we renovate.", date(2023, 12, 31)),
        ("I met her on 3 May.", None),  # a date just past is not a future end
        ("This may take a while.", None),  # the verb "may" is no month
        ("I went hiking yesterday.", None),
    ],
)
def test_horizon_end_reads_the_period_a_plan_names(text, end):
    assert horizon_end(text, MONDAY) == end


def test_ambiguous_expressions_set_an_end_but_do_not_make_a_plan():
    assert horizon_end("I was busy this week.", MONDAY) == date(2023, 5, 14)
    assert horizon_end("I was busy this week.", MONDAY, ambiguous=False) is None
    when = datetime(2023, 5, 8, 14)
    assert rule_item("Tomasz: I have been painting for two years.", 0, when) is None  # a past duration
    assert rule_item("Tomasz: I was busy this week.", 0, when) is None
    item = rule_item("Tomasz: I will paint murals for two years.", 0, when)
    assert item is not None and item.valid_until == date(2025, 5, 7)


def test_rule_items_keep_the_speaker_and_the_plan_sentences_only():
    items = rule_items(memories())
    assert [i.row for i in items] == sorted(PLANS)
    lisbon, parents, cello = items
    assert lisbon.text == "Priya Raman: I'm flying to Lisbon next week for a marine biology conference!"  # note dropped
    assert (lisbon.valid_from, lisbon.valid_until) == (MONDAY, date(2023, 5, 21))
    assert (parents.valid_from, parents.valid_until) == (MONDAY, date(2023, 5, 20))
    assert (cello.valid_from, cello.valid_until) == (date(2023, 3, 1), None)  # no end named: the horizon decides
    mixed = rule_item("Priya Raman: I went to Porto. Next month I'll visit Lisbon. Will you come?", 5, None)
    assert mixed == ForesightItem("Priya Raman: Next month I'll visit Lisbon.", 5, None, None)  # undated: no end


def test_validity_filter_by_question_date_and_horizon(embedder):
    index = build_index(rule_items(memories()) + [ForesightItem("Tomasz will paint.", 4, None)], embedder.encode)
    rows = index.rows
    on = lambda when, horizon=30.0: sorted(rows[index.valid_at(when, horizon)].tolist())  # noqa: E731
    assert on(None) == [0, 2, 3, 4]  # no question date: nothing filtered
    assert on(datetime(2023, 5, 12, 20)) == [0, 2, 4]  # the cello plan (1 March) is past its 30 days
    assert on(datetime(2023, 5, 12, 20), horizon=90) == [0, 2, 3, 4]
    assert on(datetime(2023, 5, 21, 23)) == [0, 4]  # the parents' stay ended on 20 May, the trip week not yet
    assert on(datetime(2023, 5, 22, 0)) == [4]  # the undated item is never filtered
    assert on(datetime(2023, 2, 1)) == [4]  # nothing holds before it was said
    assert on(datetime(2023, 5, 8, 9)) == [0, 2, 4]  # the day it was said counts, whatever the hour


# ----------------------------------------------------------------------------- retrieval
def test_registered_and_off_by_default(retriever):
    assert SOURCE in candidate_sources()
    default, _ = load_config("default")
    assert default.foresight_top_k == 0 and not SOURCE.enabled(default)
    result = retriever.retrieve(asked("What is Priya Raman doing next?", datetime(2023, 5, 12)), default)
    assert not any("foresight" in item.views for item in result.items)


def test_the_view_returns_the_plans_that_hold_on_the_question_date(retriever):
    question = "Where is Priya Raman travelling for work?"
    on = config(foresight_top_k=5)
    during = foresight_view(retriever.retrieve(asked(question, datetime(2023, 5, 12)), on))
    assert during[0] == SAID[0][1] and set(during) == {SAID[0][1], SAID[2][1]}
    assert foresight_view(retriever.retrieve(asked(question, datetime(2023, 7, 1)), on)) == []  # all expired
    undated = foresight_view(retriever.retrieve(asked(question, None), on))
    assert undated[0] == SAID[0][1] and set(undated) == {SAID[r][1] for r in PLANS}
    longer = foresight_view(
        retriever.retrieve(
            asked("Which instrument will Priya Raman learn?", datetime(2023, 5, 12)),
            config(foresight_top_k=5, foresight_horizon_days=120),
        )
    )
    assert longer[0] == SAID[3][1]  # the cello plan holds for 120 days and matches best
    assert len(foresight_view(retriever.retrieve(asked(question, None), config(foresight_top_k=3)))) == 3


def test_items_are_built_once_per_index_state_and_cost_nothing_offline(retriever):
    on = config(foresight_top_k=5)
    first = retriever.retrieve(asked("Where is Priya Raman going?", datetime(2023, 5, 12)), on)
    cache = retriever._source_cache("foresight", retriever.index.state)
    built = [v for k, v in cache.items() if isinstance(k, tuple) and k[0] == "items"]
    retriever.retrieve(asked("What is Tomasz doing?", datetime(2023, 5, 12)), on)
    assert [v for k, v in cache.items() if isinstance(k, tuple) and k[0] == "items"] == built and len(built) == 1
    assert first.cost == Usage()
    fresh = Retriever(
        ConversationIndex.build(memories(), retriever.embedder, PERSONS),
        retriever.embedder,
        known_persons=PERSONS,
        sources=candidate_sources(),
    )
    again = fresh.retrieve(asked("Where is Priya Raman going?", datetime(2023, 5, 12)), on)
    assert [(i.memory.memory_id, round(i.score, 12), tuple(sorted(i.views.items()))) for i in again.items] == [
        (i.memory.memory_id, round(i.score, 12), tuple(sorted(i.views.items()))) for i in first.items
    ]


def test_items_sharing_a_memory_give_it_one_rank(retriever):
    from evolvemem.memory.nlp import tokenize

    items = [
        ForesightItem("Tomasz stays with his parents.", 2, MONDAY),
        ForesightItem("Priya Raman flies to Lisbon.", 0, MONDAY),
        ForesightItem("Priya Raman attends a biology conference.", 0, MONDAY),
    ]
    index = build_index(items, retriever.embedder.encode)
    assert not index.one_per_row and build_index(items[:2], retriever.embedder.encode).one_per_row
    text = "Which conference does Priya Raman attend?"
    state = retriever.index.state
    request = ViewRequest(
        state,
        asked(text, datetime(2023, 5, 10)),
        tuple(tokenize(text)),
        (),
        retriever.embedder.encode([text])[0],
        config(foresight_top_k=5),
        retriever.embedder.encode,
        lambda tokens: state.keyword.scores(state.keyword.token_ids(tokens), len(state.memories)),
    )
    views, cost = SOURCE.hits(request, {("items", None, None): index})
    assert views[0].label == "foresight" and views[0].rows.tolist() == [0, 2] and cost == Usage()


# ----------------------------------------------------------------------------- LLM variant
LISTED = re.compile(r"^\[(\d+)\] \((\S+)\) (.*)$", re.M)


def listed(prompt: str) -> list[tuple[str, str, str]]:
    """(number, date, text) of the memories a foresight prompt lists (not its example)."""
    return LISTED.findall(prompt.split("\nRules:", 1)[0])


def llm_retriever(embedder: Embedder, server: FakeLLMServer, units: list[MemoryUnit] | None = None) -> Retriever:
    client = LLMClient("openai/fake-model", api_base=server.url, cache=None, max_retries=0, timeout=10.0)
    return Retriever(
        ConversationIndex.build(units or memories(), embedder, PERSONS),
        embedder,
        known_persons=PERSONS,
        llm=client,
        sources=candidate_sources(),
    )


def plans_by_model(prompt: str) -> dict:
    """Items for the listed memories that say "Lisbon" or "parents", with dates the model chose."""
    items = []
    for number, said, text in listed(prompt):
        if "Lisbon" in text:
            items.append(
                {
                    "memory": int(number),
                    "text": "Priya Raman attends a conference in Lisbon.",
                    "valid_from": said,
                    "valid_until": "2023-05-13",
                }
            )
        elif "parents" in text:
            items.append(
                {
                    "memory": int(number),
                    "text": "Tomasz lives with his parents for now.",
                    "valid_from": said,
                    "valid_until": None,
                }
            )
    return {"items": items}


def test_llm_items_use_the_models_text_and_dates_and_are_billed_once(embedder, fake_llm):
    fake_llm.responder = lambda body: json.dumps(plans_by_model(last_user_message(body)))
    llm = llm_retriever(embedder, fake_llm)
    on = config(foresight_top_k=5, foresight_llm=True)
    result = llm.retrieve(asked("Where is Priya Raman going for a conference?", datetime(2023, 5, 12)), on)
    assert fake_llm.request_count == 1  # 7 memories: one batch
    prompt = last_user_message(fake_llm.requests[0])
    assert "[1] (2023-05-08) [8 May 2023] Priya Raman: I'm flying to Lisbon" in prompt and "$" not in prompt
    assert foresight_view(result) == [SAID[0][1], SAID[2][1]]  # the cello plan is not the model's item
    prompt_tokens = sum(count_tokens(message_text(m)) for body in fake_llm.requests for m in body["messages"])
    assert result.cost.calls == 1 and result.cost.prompt_tokens == prompt_tokens and result.cost.completion_tokens > 0
    cache = llm._source_cache("foresight", llm.index.state)
    index = next(v for k, v in cache.items() if isinstance(k, tuple) and k[0] == "items")
    assert [(i.text, i.valid_from, i.valid_until) for i in index.items] == [
        ("Priya Raman attends a conference in Lisbon.", MONDAY, date(2023, 5, 13)),
        ("Tomasz lives with his parents for now.", MONDAY, None),
    ]
    # the model's end date (13 May), not the rules' (21 May), decides
    late = llm.retrieve(asked("Where is Priya Raman going for a conference?", datetime(2023, 5, 16)), on)
    assert foresight_view(late) == [SAID[2][1]] and late.cost == Usage() and fake_llm.request_count == 1
    offline = llm.retrieve(asked("Where is Priya Raman going?", datetime(2023, 5, 16)), config(foresight_top_k=5))
    assert SAID[0][1] in foresight_view(offline) and fake_llm.request_count == 1  # foresight_llm off: rules


def test_llm_batches_concurrently_and_a_garbage_batch_falls_back_to_rules(embedder, fake_llm):
    units = [
        MemoryUnit(
            make_memory_id("c1", f"{i}"),
            "c1",
            f"[8 May 2023] Tomasz: I will paint fence number {i}.",
            session_id="s1",
            timestamp=datetime(2023, 5, 8, 10),
            source_turn_ids=(f"D1:{i}",),
        )
        for i in range(2 * LLM_BATCH + 5)
    ]
    lock = threading.Lock()
    seen: list[int] = []

    def respond(body: dict) -> str:
        batch = listed(last_user_message(body))
        with lock:
            seen.append(len(batch))
        if not batch or "fence number 0." in last_user_message(body):  # the batch with fence 0, and its re-ask
            return "Here are the plans I found: fence 0 and more."
        return json.dumps(
            {
                "items": [
                    {
                        "memory": int(n),
                        "text": f"Tomasz paints {t.split()[-1]}",
                        "valid_from": d,
                        "valid_until": "2023-05-09",
                    }
                    for n, d, t in batch
                ]
            }
        )

    fake_llm.responder = respond
    result = llm_retriever(embedder, fake_llm, units).retrieve(
        asked("Which fence will Tomasz paint?", None), config(foresight_top_k=30, foresight_llm=True)
    )
    assert sorted(seen) == [0, 5, LLM_BATCH, LLM_BATCH]  # three batches; the garbage one re-asked once
    assert result.cost.calls == 4
    llm = llm_retriever(embedder, fake_llm, units)
    llm.retrieve(asked("Which fence will Tomasz paint?", None), config(foresight_top_k=30, foresight_llm=True))
    index = next(
        v
        for k, v in llm._source_cache("foresight", llm.index.state).items()
        if isinstance(k, tuple) and k[0] == "items"
    )
    assert index.fallbacks == 1 and len(index) == len(units)
    by_rules = [i for i in index.items if i.row < LLM_BATCH]
    assert all(i.text.startswith("Tomasz: I will paint") and i.valid_until is None for i in by_rules)
    assert all(i.valid_until == date(2023, 5, 9) for i in index.items if i.row >= LLM_BATCH)


def test_parse_foresight_drops_bad_items_and_rejects_a_reply_without_a_list():
    rows, days = [10, 11], [MONDAY, None]
    parsed = parse_foresight(
        {
            "items": [
                {"memory": 1, "text": "ok", "valid_until": "2023-05-20"},
                {"memory": "2", "text": "  spaced   out ", "valid_from": "2023-05-01", "valid_until": "soon"},
                {"memory": 3, "text": "no such memory"},
                {"memory": True, "text": "a bool is no number"},
                {"memory": 1, "text": ""},
                {"memory": 1, "text": "ends before it starts", "valid_from": "2023-05-08", "valid_until": "2023-05-01"},
                "not an object",
            ]
        },
        rows,
        days,
    )
    assert parsed == [
        ForesightItem("ok", 10, MONDAY, date(2023, 5, 20)),
        ForesightItem("spaced out", 11, date(2023, 5, 1), None),
    ]
    assert parse_foresight([], rows, days) == []
    for bad in ({"plans": []}, "items", {"items": "none"}):
        with pytest.raises(ValueError):
            parse_foresight(bad, rows, days)


def test_a_failed_call_falls_back_to_rules_without_cost(embedder, fake_llm):
    fake_llm.fail_next(400)
    result = llm_retriever(embedder, fake_llm).retrieve(
        asked("Where is Priya Raman going?", None), config(foresight_top_k=5, foresight_llm=True)
    )
    assert set(foresight_view(result)) == {SAID[r][1] for r in PLANS} and result.cost == Usage()
    assert np.all(np.isfinite([i.score for i in result.items]))
