"""Extraction: the offline extractor on real LoCoMo, the LLM extractor against the fake
OpenAI-compatible server (real litellm path), and the on-disk memory cache."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta

import pytest

from evolvemem.data.dates import format_day
from evolvemem.data.models import Conversation, Session, Turn
from evolvemem.memory.offline_extract import OfflineExtractor, resolve_relative_dates
from evolvemem.memory.store_cache import cache_key, cache_path, load_or_extract
from tests.fake_llm_server import FakeLLMServer, message_text

# ------------------------------------------------------------------------------------ helpers

_WORDS = (
    "ceramic",
    "orchard",
    "lantern",
    "harbour",
    "violin",
    "meadow",
    "quartz",
    "saffron",
    "glacier",
    "falcon",
    "cobalt",
    "juniper",
    "marble",
    "thistle",
    "canyon",
    "ember",
    "willow",
    "garnet",
    "lagoon",
    "pepper",
)


def synthetic_conversation(n_turns: int = 100, per_session: int = 25) -> Conversation:
    """Invented people and events; every turn has distinct content words."""
    sessions = []
    start = datetime(2023, 5, 8, 14, 0)
    for s in range(0, n_turns, per_session):
        number = s // per_session + 1
        when = start + timedelta(days=7 * (number - 1))
        turns = []
        for k in range(s, min(n_turns, s + per_session)):
            speaker = "Priya" if k % 2 == 0 else "Tomasz"
            a, b, c = _WORDS[k % 20], _WORDS[(k * 7 + 3) % 20], _WORDS[(k * 3 + 11) % 20]
            text = f"Yesterday I bought a {a} {b} bowl number {k} near the {c} gallery"
            turns.append(Turn(f"D{number}:{k - s + 1}", speaker, text, f"session_{number}", when))
        sessions.append(Session(f"session_{number}", when, tuple(turns)))
    return Conversation("conv-test", tuple(sessions), ("Priya", "Tomasz"))


_TURN_LINE = re.compile(r"^\[([^\]]+)\] \(([^)]*)\) (\w+): (.*)$")


def prompt_sections(body: dict) -> tuple[list[tuple[str, str, str]], list[str], str]:
    """(target turns as (id, speaker, text), context turn ids, full prompt) of an extraction request."""
    prompt = next(message_text(m) for m in body["messages"] if m["role"] == "user")
    context_part = prompt.split("Earlier turns, for context only", 1)[1].split("Turns to write memories about:", 1)[0]
    target_part = prompt.split("Turns to write memories about:", 1)[1].split("Rules:", 1)[0]
    targets = [
        (m.group(1), m.group(3), m.group(4)) for line in target_part.splitlines() if (m := _TURN_LINE.match(line))
    ]
    context = [m.group(1) for line in context_part.splitlines() if (m := _TURN_LINE.match(line))]
    return targets, context, prompt


def copy_responder(skip=lambda turn_id, prompt: False, extra=()):
    """A model that writes one memory per target turn (optionally skipping some)."""

    def respond(body: dict) -> str:
        targets, _, prompt = prompt_sections(body)
        memories = [
            {
                "content": f"{speaker} said on that day: {text}",
                "type": "fact",
                "persons": [speaker],
                "importance": 0.7,
                "source_turn_ids": [turn_id],
                "date": "2023-05-07",
            }
            for turn_id, speaker, text in targets
            if not skip(turn_id, prompt)
        ]
        return json.dumps({"memories": memories + list(extra)})

    return respond


@pytest.fixture
def llm_setup(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("EVOLVEMEM_CACHE_DIR", str(tmp_path / "cache"))
    from evolvemem.llm.cache import ResponseCache
    from evolvemem.llm.client import LLMClient

    def make(server: FakeLLMServer, **extractor_options):
        from evolvemem.memory.llm_extract import LLMExtractor

        client = LLMClient(
            "openai/fake-model",
            api_base=server.url,
            cache=ResponseCache(tmp_path / "llm"),
            max_retries=0,
            backoff_base=0.0,
        )
        options = {"max_workers": 1, "retry_wait": 0.0, **extractor_options}
        return LLMExtractor(client, **options)

    return make


def covered_ids(units) -> set[str]:
    return {t for u in units for t in u.source_turn_ids}


# ------------------------------------------------------------------------------- offline


@pytest.fixture(scope="module")
def locomo_conversation():
    from evolvemem.data.locomo import load_locomo
    from tests.conftest import require_dev_data

    return next(iter(load_locomo(require_dev_data()).conversations.values()))


def test_offline_extraction_one_dated_unit_per_turn(locomo_conversation):
    conv = locomo_conversation
    units, cost = OfflineExtractor().extract(conv)
    turns = conv.turns()
    assert len(units) == len(turns) and cost.calls == 0
    assert [u.source_turn_ids for u in units] == [(t.turn_id,) for t in turns]
    assert len({u.memory_id for u in units}) == len(units)
    for unit, turn in zip(units, turns):
        assert unit.content.startswith(f"[{format_day(turn.timestamp)}] {turn.speaker}: {turn.text}")
        assert unit.session_id == turn.session_id and unit.timestamp == turn.timestamp
        assert turn.speaker.lower() in unit.persons
        assert unit.conversation_id == conv.conversation_id
        if turn.image_caption:
            assert f"[shares a photo of {turn.image_caption}]" in unit.content
    assert any(t.image_caption for t in turns)
    assert {u.memory_type for u in units} == {"episodic", "preference"}


def test_offline_extraction_resolves_yesterday_in_real_turns(locomo_conversation):
    units, _ = OfflineExtractor().extract(locomo_conversation)
    by_turn = {t.turn_id: t for t in locomo_conversation.turns()}
    checked = 0
    for unit in units:
        turn = by_turn[unit.source_turn_ids[0]]
        if re.search(r"\byesterday\b", turn.text, re.I):
            assert f"yesterday = {format_day(turn.timestamp - timedelta(days=1))}" in unit.content
            checked += 1
    assert checked > 0


def test_offline_extraction_restricted_to_turn_ids_and_deterministic(locomo_conversation):
    wanted = {t.turn_id for t in locomo_conversation.turns()[5:9]}
    first, _ = OfflineExtractor().extract(locomo_conversation, turn_ids=wanted)
    again, _ = OfflineExtractor().extract(locomo_conversation, turn_ids=wanted)
    assert covered_ids(first) == wanted and first == again


def test_relative_dates_and_rule_importance():
    monday = datetime(2023, 5, 8)
    notes = resolve_relative_dates(
        "Last weekend and 3 days ago; last year I moved. Last Friday too, next month!", monday
    )
    assert notes == [
        "last weekend = 6 May 2023 to 7 May 2023",
        "last year = 2022",
        "next month = June 2023",
        "last friday = 5 May 2023",
        "3 days ago = 5 May 2023",
    ]
    assert resolve_relative_dates("Nothing relative here.", monday) == []
    conv = synthetic_conversation(2)
    greeting = Turn("D1:9", "Priya", "Hey Tomasz! How are you?", "session_1", monday)
    event = Turn(
        "D1:10",
        "Priya",
        "I adopted a puppy at a rescue farm in Lisbon last week, her name is Biscuit.",
        "session_1",
        monday,
    )
    low = OfflineExtractor.memory_for_turn(conv.conversation_id, greeting, conv.speakers)
    high = OfflineExtractor.memory_for_turn(conv.conversation_id, event, conv.speakers)
    assert low.importance <= 0.15 < 0.6 <= high.importance
    assert "(last week = the week before 8 May 2023)" in high.content


# ------------------------------------------------------------------------------------ cache


def test_memory_cache_hit_on_second_call(monkeypatch, tmp_path, locomo_conversation):
    monkeypatch.setenv("EVOLVEMEM_CACHE_DIR", str(tmp_path))
    extractor = OfflineExtractor()
    started = time.perf_counter()
    units, _, from_cache = load_or_extract(extractor, locomo_conversation)
    first_seconds = time.perf_counter() - started
    started = time.perf_counter()
    again, cost, hit = load_or_extract(extractor, locomo_conversation)
    second_seconds = time.perf_counter() - started
    assert (from_cache, hit) == (False, True)
    assert again == units and cost.calls == 0
    print(f"offline extraction {first_seconds * 1000:.1f} ms, cache hit {second_seconds * 1000:.1f} ms")

    key = cache_key(extractor, locomo_conversation)
    assert cache_path(key).is_relative_to(tmp_path / "memories")
    # an edited turn is a different conversation: the cache misses
    first = locomo_conversation.sessions[0]
    edited_turn = Turn(
        first.turns[0].turn_id, first.turns[0].speaker, "An edited greeting.", first.session_id, first.timestamp
    )
    edited = Conversation(
        locomo_conversation.conversation_id,
        (
            Session(first.session_id, first.timestamp, (edited_turn, *first.turns[1:])),
            *locomo_conversation.sessions[1:],
        ),
        locomo_conversation.speakers,
    )
    assert load_or_extract(extractor, edited)[2] is False
    # a corrupt file is ignored and rewritten
    cache_path(key).write_text("{ truncated", encoding="utf-8")
    assert load_or_extract(extractor, locomo_conversation)[2] is False
    assert load_or_extract(extractor, locomo_conversation)[2] is True
    assert not list((tmp_path / "memories").rglob("*.part"))


# ------------------------------------------------------------------------------ LLM extraction


def test_llm_windows_of_40_with_context_tail(llm_setup):
    conv = synthetic_conversation(100)
    with FakeLLMServer(responder=copy_responder()) as server:
        extractor = llm_setup(server)
        units, cost = extractor.extract(conv)
    assert server.request_count == 3 and cost.calls == 3
    ids = [t.turn_id for t in conv.turns()]
    sections = [prompt_sections(body) for body in server.requests]
    assert [[t[0] for t in targets] for targets, _, _ in sections] == [ids[0:40], ids[40:80], ids[80:100]]
    assert [context for _, context, _ in sections] == [[], ids[32:40], ids[72:80]]
    assert covered_ids(units) == set(ids) and extractor.failed_turns[conv.conversation_id] == set()
    unit = units[0]
    assert unit.memory_type == "semantic" and unit.importance == 0.7
    assert unit.timestamp == datetime(2023, 5, 7) and "priya" in unit.persons
    assert extractor.name == "llm:openai/fake-model"


def test_llm_prompt_asks_for_absolute_dates_and_names(llm_setup):
    conv = synthetic_conversation(5)
    with FakeLLMServer(responder=copy_responder()) as server:
        llm_setup(server).extract(conv)
        _, _, prompt = prompt_sections(server.requests[0])
    assert "Absolute dates only" in prompt and "No pronouns" in prompt
    assert "[D1:1] (8 May 2023) Priya: Yesterday I bought" in prompt
    assert "Speakers: Priya, Tomasz" in prompt
    assert "$" not in prompt


def test_llm_rejects_sources_outside_the_window(llm_setup):
    conv = synthetic_conversation(10)
    extra = [
        {"content": "Invented memory citing a turn that does not exist.", "source_turn_ids": ["D9:99"]},
        {"content": "", "source_turn_ids": ["D1:1"]},
        {"content": "A memory with no sources at all."},
        "not an object",
    ]
    with FakeLLMServer(responder=copy_responder(extra=extra)) as server:
        units, _ = llm_setup(server).extract(conv)
    assert len(units) == 10
    assert all(u.source_turn_ids and u.content for u in units)
    assert not any("does not exist" in u.content for u in units)


def test_llm_context_overflow_splits_into_sub_windows(llm_setup):
    conv = synthetic_conversation(100)
    with FakeLLMServer(responder=copy_responder()) as server:
        server.fail_next(
            400,
            body="This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens.",
        )
        units, _ = llm_setup(server).extract(conv)
    sizes = [len(prompt_sections(body)[0]) for body in server.requests]
    assert sizes == [40, 15, 15, 10, 40, 20]  # no retry of the overflowing window: split at once
    assert covered_ids(units) == {t.turn_id for t in conv.turns()}


def test_llm_failing_window_is_retried_then_split(llm_setup):
    conv = synthetic_conversation(100)
    with FakeLLMServer(responder=copy_responder()) as server:
        server.fail_next(500, count=2)
        units, _ = llm_setup(server, attempts=2).extract(conv)
    sizes = [len(prompt_sections(body)[0]) for body in server.requests]
    assert sizes == [40, 40, 15, 15, 10, 40, 20]
    assert covered_ids(units) == {t.turn_id for t in conv.turns()}


def test_llm_partial_results_kept_when_a_piece_keeps_failing(llm_setup):
    conv = synthetic_conversation(100)
    broken = "D2:20"  # turn 45 of the conversation: inside the second window and its first sub-window

    def responder(body: dict) -> str:
        targets, _, _ = prompt_sections(body)
        if any(turn_id == broken for turn_id, _, _ in targets):
            return "I cannot produce JSON for this one, sorry"
        return copy_responder()(body)

    with FakeLLMServer(responder=responder) as server:
        extractor = llm_setup(server, attempts=2)
        units, _, from_cache = load_or_extract(extractor, conv)
    ids = [t.turn_id for t in conv.turns()]
    lost = set(ids[40:55])
    assert extractor.failed_turns[conv.conversation_id] == lost
    assert extractor.offline_turns[conv.conversation_id] == lost  # not lost: one offline memory per turn
    by_model = [u for u in units if not set(u.source_turn_ids) & lost]
    assert covered_ids(by_model) == set(ids) - lost and covered_ids(units) == set(ids)
    assert all(len(u.source_turn_ids) == 1 for u in units if set(u.source_turn_ids) & lost)
    assert from_cache is False
    # a run with failures is not cached: the next run tries the lost turns again
    with FakeLLMServer(responder=copy_responder()) as server:
        again, _, from_cache = load_or_extract(llm_setup(server), conv)
    assert from_cache is False and covered_ids(again) == set(ids)


def test_llm_keyword_coverage_reextracts_missed_turns_once_per_window(llm_setup):
    conv = synthetic_conversation(100)
    ids = [t.turn_id for t in conv.turns()]
    dropped = set(ids[::6])

    def skip(turn_id: str, prompt: str) -> bool:
        return turn_id in dropped and "A first pass wrote no memory" not in prompt

    with FakeLLMServer(responder=copy_responder(skip=skip)) as server:
        units, cost = llm_setup(server).extract(conv)
    sections = [prompt_sections(body) for body in server.requests]
    assert len(sections) == 6 and cost.calls == 6  # 3 windows + one coverage call each
    followups = [{t[0] for t in targets} for targets, _, prompt in sections if "A first pass" in prompt]
    assert followups == [dropped & set(ids[0:40]), dropped & set(ids[40:80]), dropped & set(ids[80:100])]
    assert covered_ids(units) == set(ids)


def test_llm_extraction_cached_by_memory_cache(llm_setup):
    conv = synthetic_conversation(30)
    with FakeLLMServer(responder=copy_responder()) as server:
        extractor = llm_setup(server)
        first, cost, hit = load_or_extract(extractor, conv)
        second, cost2, hit2 = load_or_extract(extractor, conv)
        assert server.request_count == 1
    assert (hit, hit2) == (False, True) and first == second
    assert cost.calls == 1 and cost2.calls == 0
