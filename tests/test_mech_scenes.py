"""Scene-guided retrieval: episodes, scenes, the `scene` view and the sufficiency rewrites.

Real parts only: the bundled all-MiniLM-L6-v2 model, bm25s, a real ConversationIndex and
Retriever over invented memories."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from evolvemem.data.models import Question
from evolvemem.mechanisms.scenes import SOURCE, build_episodes, cluster_scenes
from evolvemem.contracts.memory import MemoryUnit, make_memory_id
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.mechanisms import candidate_sources
from evolvemem.retrieval.index import ConversationIndex
from evolvemem.retrieval.retriever import Retriever
from evolvemem.space.config import load_config

PERSONS = ("Priya Raman", "Tomasz")
TRIP = [  # one session on one topic; the last line answers the question without naming the trip
    "Priya Raman flew to Lisbon for a week of surfing lessons.",
    "Priya Raman said the surf instructor in Lisbon was patient with beginners.",
    "Priya Raman caught her first green wave on the third morning of the surf camp.",
    "Priya Raman said the best part was the grilled sardines at the harbour afterwards.",
]
OTHER = [  # one session each, months apart
    "Tomasz repaired the chain on his mountain bike.",
    "Tomasz visited his grandmother in Gdansk for her birthday.",
    "Priya Raman started a pottery class on Thursday evenings.",
    "Tomasz watched a documentary about deep sea fishing boats.",
    "Priya Raman's favourite part of the week is the Sunday farmers market.",
    "Tomasz ate at a new ramen restaurant downtown.",
    "Priya Raman booked a week in Lisbon for next spring.",
    "Tomasz's best part of the holiday was the mountain hike.",
    "Priya Raman cooked a seafood paella for her flatmates.",
    "Tomasz is learning to surf videos online but never tried it.",
]
EVIDENCE = TRIP[3]
QUESTION = Question(
    "q1", "c1", "What did Priya Raman enjoy most about her surfing trip?", "sardines", "single_fact", ("D9:3",)
)
PLAIN = dict(
    semantic_top_k=6,
    keyword_top_k=6,
    structured_top_k=0,
    enable_entity_swap=False,
    importance_weight=0.0,
    max_context=30,
)


def memories() -> list[MemoryUnit]:
    units = [
        MemoryUnit(
            make_memory_id("c1", t),
            "c1",
            t,
            session_id="s_trip",
            timestamp=datetime(2023, 6, 10, 10, i),
            source_turn_ids=(f"D9:{i}",),
        )
        for i, t in enumerate(TRIP)
    ]
    units += [
        MemoryUnit(
            make_memory_id("c1", t),
            "c1",
            t,
            session_id=f"s{j}",
            timestamp=datetime(2022, 1 + j, 1),
            source_turn_ids=(f"D{j}:1",),
        )
        for j, t in enumerate(OTHER)
    ]
    return units


@pytest.fixture(scope="module")
def retriever() -> Retriever:
    embedder = Embedder()
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


def contents(result, label: str | None = None) -> list[str]:
    return [i.memory.content for i in result.items if label is None or label in i.views]


def test_registered_and_off_by_default(retriever):
    assert SOURCE in candidate_sources()
    default, _ = load_config("default")
    assert default.scene_top_k == 0 and not SOURCE.enabled(default)
    result = retriever.retrieve(QUESTION, default)
    assert not any(label.startswith("scene") for item in result.items for label in item.views)


def test_episodes_follow_sessions_and_scenes_respect_time(retriever):
    state = retriever.index.state
    episodes = build_episodes(state)
    trip_rows = {state.row_of_id[make_memory_id("c1", t)] for t in TRIP}
    of_row = episodes.groups.of_row
    assert all(
        len({of_row[r] for r in trip_rows} & {of_row[state.row_of_id[make_memory_id("c1", t)]]}) <= 1 for t in OTHER
    )  # no episode spans two sessions
    assert len({of_row[r] for r in trip_rows}) == 1  # the trip exchange is one episode
    loose = cluster_scenes(episodes, 0.5, 60.0)
    # a gap limit of one day keeps sessions a month apart in separate scenes, however similar
    strict_time = cluster_scenes(episodes, 0.5, 1.0)
    assert len(strict_time) == len(episodes.groups) >= len(loose)
    assert sorted(strict_time.rows.tolist()) == list(range(len(state.memories)))


def test_scene_view_finds_the_untold_half_of_an_exchange(retriever):
    plain = retriever.retrieve(QUESTION, config())
    assert EVIDENCE not in contents(plain)  # neither dense nor BM25 top-6 reaches it
    scened = retriever.retrieve(QUESTION, config(scene_top_k=6, scene_top_n=3))
    assert EVIDENCE in contents(scened, "scene")


def test_sufficiency_rewrites_only_when_the_match_is_weak(retriever):
    weak = Question("q2", "c1", "Which snack followed the lessons by the water?", "-", "single_fact", ("-",))
    on = config(scene_top_k=6, scene_top_n=3, scene_sufficiency_rounds=2)
    labels = {label for item in retriever.retrieve(weak, on).items for label in item.views}
    assert "scene_rewrite" in labels
    strong = Question("q3", "c1", "Priya Raman flew to Lisbon for surfing lessons", "-", "single_fact", ("-",))
    labels = {label for item in retriever.retrieve(strong, on).items for label in item.views}
    assert "scene" in labels and "scene_rewrite" not in labels


def test_deterministic(retriever):
    cfg = config(scene_top_k=6, scene_top_n=3, scene_sufficiency_rounds=2)
    first = [
        (i.memory.memory_id, round(i.score, 12), tuple(sorted(i.views.items())))
        for i in retriever.retrieve(QUESTION, cfg).items
    ]
    fresh = Retriever(
        ConversationIndex.build(memories(), retriever.embedder, PERSONS),
        retriever.embedder,
        known_persons=PERSONS,
        sources=candidate_sources(),
    )
    again = [
        (i.memory.memory_id, round(i.score, 12), tuple(sorted(i.views.items())))
        for i in fresh.retrieve(QUESTION, cfg).items
    ]
    assert first == again
    state = retriever.index.state
    a = cluster_scenes(build_episodes(state), 0.7, 7.0)
    b = cluster_scenes(build_episodes(state), 0.7, 7.0)
    assert np.array_equal(a.of_row, b.of_row)


# ----------------------------------------------------------------------------- LLM variant
# Real litellm → openai SDK → httpx against tests/fake_llm_server.py on 127.0.0.1. The responders
# read the prompts our code rendered and answer from them, so the tests check our parsing,
# fallbacks, round caps and cost accounting, not the fake's.
import json  # noqa: E402
import threading  # noqa: E402

from evolvemem.llm.cache import ResponseCache  # noqa: E402
from evolvemem.llm.client import LLMClient  # noqa: E402
from evolvemem.memory.narrative import dated_digest, narrate_episode  # noqa: E402
from evolvemem.contracts.usage import Usage  # noqa: E402
from tests.fake_llm_server import (  # noqa: E402,F401 - fake_llm is a fixture
    FakeLLMServer,
    count_tokens,
    fake_llm,
    last_user_message,
    message_text,
)

WEAK = Question("q2", "c1", "Which snack followed the lessons by the water?", "-", "single_fact", ("-",))
EPISODE_MARK = "Memories of the segment:"
SUFFICIENCY_MARK = "Retrieved memories, best first:"


def client_for(server: FakeLLMServer, cache: ResponseCache | None = None) -> LLMClient:
    return LLMClient("openai/fake-model", api_base=server.url, cache=cache, max_retries=0, timeout=10.0)


def llm_retriever(retriever: Retriever, server: FakeLLMServer, cache: ResponseCache | None = None) -> Retriever:
    """A fresh index (so a fresh source cache) over the same memories, with a model."""
    return Retriever(
        ConversationIndex.build(memories(), retriever.embedder, PERSONS),
        retriever.embedder,
        known_persons=PERSONS,
        llm=client_for(server, cache),
        sources=candidate_sources(),
    )


def segment_lines(prompt: str) -> list[str]:
    block = prompt.split(EPISODE_MARK, 1)[1].split("\nRules:", 1)[0]
    return [line[2:] for line in block.strip().splitlines() if line.startswith("- ")]


def shown_memories(prompt: str) -> list[str]:
    block = prompt.split(SUFFICIENCY_MARK, 1)[1].split("\nRules:", 1)[0]
    return [line.split(". ", 1)[1] for line in block.strip().splitlines() if ". " in line]


def responder(narrative, sufficiency):
    """Routes each request by the prompt it carries; both handlers get the rendered prompt."""

    def respond(body: dict) -> str:
        prompt = last_user_message(body)
        value = narrative(prompt) if EPISODE_MARK in prompt else sufficiency(prompt)
        return value if isinstance(value, str) else json.dumps(value)

    return respond


def retell(prompt: str) -> dict:
    return {"narrative": "In this part of the story, " + " ".join(segment_lines(prompt))}


def requests_with(server: FakeLLMServer, mark: str) -> list[str]:
    return [last_user_message(b) for b in server.requests if mark in last_user_message(b)]


def billed(server: FakeLLMServer) -> Usage:
    """What the fake server's requests cost, by its whitespace token counts."""
    prompt = sum(count_tokens(message_text(m)) for body in server.requests for m in body["messages"])
    return Usage(calls=server.request_count, prompt_tokens=prompt)


def test_narrate_episode_parses_and_falls_back_with_the_cost_paid(fake_llm):
    lines = ["[8 May 2023] Priya Raman: I start a pottery class on Thursday.", "[8 May 2023] Tomasz: Where?"]
    assert narrate_episode(None, lines, "8 May 2023") == (dated_digest(lines, "8 May 2023"), Usage())
    assert dated_digest(lines, "8 May 2023") == (
        "On 8 May 2023: Priya Raman: I start a pottery class on Thursday. Tomasz: Where?"
    )
    fake_llm.responder = lambda body: json.dumps({"narrative": "Priya Raman told Tomasz about a pottery class."})
    client = client_for(fake_llm)
    text, cost = narrate_episode(client, lines, "8 May 2023")
    assert text == "Priya Raman told Tomasz about a pottery class."
    prompt = last_user_message(fake_llm.requests[0])
    assert segment_lines(prompt) == lines and "Date of the segment: 8 May 2023" in prompt and "$" not in prompt
    assert cost.calls == 1 and cost.prompt_tokens == billed(fake_llm).prompt_tokens and cost.completion_tokens > 0
    for garbage, requests in (("no json here", 2), (json.dumps({"narrative": ""}), 1), (json.dumps([1, 2]), 1)):
        fake_llm.responder = lambda body, g=garbage: g
        before = fake_llm.request_count
        text, cost = narrate_episode(client, lines, "8 May 2023")
        assert text == dated_digest(lines, "8 May 2023")
        assert cost.calls == requests == fake_llm.request_count - before  # a re-asked reply is billed twice
    fake_llm.fail_next(400)  # not retryable: no reply, nothing billed
    assert narrate_episode(client, lines, None) == (dated_digest(lines, None), Usage())


def test_narratives_are_written_once_and_drive_scene_clustering(retriever, fake_llm):
    lock = threading.Lock()
    seen: list[list[str]] = []

    def same_story(prompt: str) -> dict:
        with lock:
            seen.append(segment_lines(prompt))
        return {"narrative": "Two friends talk about their weekends, their food and their hobbies."}

    fake_llm.responder = responder(same_story, lambda p: {"sufficient": True, "queries": []})
    llm = llm_retriever(retriever, fake_llm)
    on = config(scene_top_k=6, scene_top_n=3, scene_llm=True, scene_similarity=0.5, scene_max_gap_days=60.0)
    first = llm.retrieve(QUESTION, on)
    episodes = build_episodes(llm.index.state)
    assert fake_llm.request_count == len(episodes.groups) == 11  # one call per episode
    assert sorted(map(tuple, seen)) == sorted(
        tuple(m.content for m in (llm.index.state.memories[r] for r in episodes.groups.members(e)))
        for e in range(len(episodes.groups))
    )
    assert (
        first.cost.calls == 11
        and first.cost.prompt_tokens == billed(fake_llm).prompt_tokens
        and first.cost.completion_tokens > 0
    )
    again = llm.retrieve(QUESTION, on)
    assert fake_llm.request_count == 11 and again.cost == Usage()  # written once, reported once
    # identical narratives make identical episode vectors: every episode within the time gap
    # joins one scene (the 2022 sessions, a month apart) and the 2023 trip stays apart
    cache = llm._source_cache("scenes", llm.index.state)
    narrated = next(v for k, v in cache.items() if isinstance(k, tuple) and k[0] == "narrated")
    assert np.allclose(narrated.episodes.vectors, narrated.episodes.vectors[0], atol=1e-6)
    llm_scenes = next(v for k, v in cache.items() if isinstance(k, tuple) and k[0] == "scenes" and k[3])
    assert len(llm_scenes) == 2
    assert len(cluster_scenes(episodes, 0.5, 60.0)) > 2  # the memory centroids keep topics apart
    # scene_llm off: the same retriever (with its model) stays offline and calls nothing
    offline = llm.retrieve(QUESTION, config(scene_top_k=6, scene_top_n=3, scene_sufficiency_rounds=2))
    assert fake_llm.request_count == 11 and offline.cost == Usage()
    assert contents(offline) == contents(
        retriever.retrieve(QUESTION, config(scene_top_k=6, scene_top_n=3, scene_sufficiency_rounds=2))
    )


def test_narratives_replay_from_the_response_cache(retriever, fake_llm, tmp_path):
    fake_llm.responder = responder(retell, lambda p: {"sufficient": True, "queries": []})
    on = config(scene_top_k=6, scene_top_n=3, scene_llm=True)
    cache = ResponseCache(tmp_path / "llm")
    paid = llm_retriever(retriever, fake_llm, cache).retrieve(QUESTION, on).cost
    assert paid.calls == 11 and paid.cache_hits == 0
    replayed = llm_retriever(retriever, fake_llm, cache).retrieve(QUESTION, on).cost  # new index state
    assert fake_llm.request_count == 11 and replayed == Usage(cache_hits=11)


def test_llm_sufficiency_searches_the_models_rewrites_until_sufficient(retriever, fake_llm):
    def judge(prompt: str) -> dict:
        if shown_memories(prompt)[0] == EVIDENCE:
            return {"sufficient": True, "queries": []}
        return {"sufficient": False, "queries": ["grilled sardines at the harbour"]}

    fake_llm.responder = responder(retell, judge)
    llm = llm_retriever(retriever, fake_llm)
    on = config(scene_top_k=6, scene_top_n=3, scene_llm=True, scene_sufficiency_rounds=2)
    llm.retrieve(WEAK, on)  # narratives written (and billed) here
    before = fake_llm.request_count
    result = llm.retrieve(WEAK, on)
    asked = requests_with(fake_llm, SUFFICIENCY_MARK)[-(fake_llm.request_count - before) :]
    assert len(asked) == 2  # insufficient, rewrites searched, then sufficient: the cap is not reached
    assert "Question: Which snack followed the lessons by the water?" in asked[0] and "$" not in asked[0]
    assert shown_memories(asked[0])[0] != EVIDENCE and shown_memories(asked[1])[0] == EVIDENCE
    rewrite = sorted(
        (i.views["scene_rewrite"], i.memory.content) for i in result.items + result.cut if "scene_rewrite" in i.views
    )
    assert rewrite[0][1] == EVIDENCE
    assert result.cost.calls == 2 and result.cost.prompt_tokens == sum(count_tokens(p) for p in asked)


@pytest.mark.parametrize("rounds", [1, 2])
def test_llm_sufficiency_stops_at_the_round_cap(retriever, fake_llm, rounds):
    counter = iter(range(1000))
    lock = threading.Lock()

    def never_enough(prompt: str) -> dict:
        with lock:
            n = next(counter)
        return {"sufficient": False, "queries": [f"surf lesson memory {n}", f"harbour food {n}"]}

    fake_llm.responder = responder(retell, never_enough)
    llm = llm_retriever(retriever, fake_llm)
    on = config(scene_top_k=6, scene_top_n=3, scene_llm=True, scene_sufficiency_rounds=rounds)
    llm.retrieve(QUESTION, on)
    before = fake_llm.request_count
    result = llm.retrieve(QUESTION, on)
    assert fake_llm.request_count - before == rounds == result.cost.calls
    assert any("scene_rewrite" in i.views for i in result.items + result.cut)


def test_llm_sufficiency_garbage_falls_back_to_the_offline_rule(retriever, fake_llm):
    fake_llm.responder = responder(retell, lambda p: "I think these memories are probably fine.")
    llm = llm_retriever(retriever, fake_llm)
    on = config(scene_top_k=6, scene_top_n=3, scene_llm=True, scene_sufficiency_rounds=1)
    strong = Question("q3", "c1", "Priya Raman flew to Lisbon for surfing lessons", "-", "single_fact", ("-",))
    llm.retrieve(strong, on)
    for question, rewrites in ((strong, False), (WEAK, True)):
        before = fake_llm.request_count
        result = llm.retrieve(question, on)
        assert fake_llm.request_count - before == 2 == result.cost.calls  # the reply re-asked once, both billed
        labels = {label for item in result.items + result.cut for label in item.views}
        assert ("scene_rewrite" in labels) is rewrites  # the cosine rule decided, as offline
    for reply in ({"sufficient": "maybe"}, {"sufficient": False, "queries": []}, {"queries": ["x"]}):
        fake_llm.responder = responder(retell, lambda p, r=reply: r)
        before = fake_llm.request_count
        result = llm.retrieve(WEAK, on)
        assert fake_llm.request_count - before == 1 == result.cost.calls
        assert any("scene_rewrite" in i.views for i in result.items + result.cut)  # offline rule: weak → rewrite
