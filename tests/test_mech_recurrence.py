"""Recurrence-gated consolidation (RecMem): when the extractor is called, what merging and
refinement add, and the LLM variant's calls, parsing, costs and fallbacks.

Real parts only: the bundled all-MiniLM-L6-v2 embedder, the offline extractor, and the LLM
variant through litellm against the fake OpenAI-compatible server on 127.0.0.1. The test texts
are chosen so every cosine the assertions rely on sits clearly on one side of its threshold;
the first test checks that."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

import numpy as np
import pytest

from evolvemem.data.models import Conversation, Session, Turn
from evolvemem.memory import nlp
from evolvemem.memory.consolidate import jaccard
from evolvemem.memory.recurrence import (
    MERGE_SIM,
    THETA_COUNT,
    THETA_SIM,
    RecurrenceExtractor,
    digest,
    plan_recurrence,
    recurrence_extractor,
)
from evolvemem.retrieval.embeddings import Embedder
from tests.fake_llm_server import FakeLLMServer, count_tokens, message_text

SPEAKERS = ("Priya Raman", "Lena Okafor")
BAKING = [  # one recurring topic, said on different days
    "Yesterday I baked another sourdough loaf with my starter.",
    "Baked a fresh sourdough loaf again today, the starter is really active.",
    "My sourdough starter made a great loaf this morning, so I baked again.",
    "Another sourdough bake today: the loaf rose well thanks to my starter.",
    "I baked sourdough bread again this weekend, the starter is doing great.",
    "This morning I baked one more sourdough loaf from my starter.",
]
NEW_DETAIL = "Baked yet another sourdough loaf from my starter today, with rye flour this time."
RYE = "Yesterday the rye sourdough I baked with my starter tasted sour and dense."
FILLER = [  # unrelated to the topic and to each other
    "The train to Porto was delayed by two hours because of a strike.",
    "My cousin Tomasz just adopted a grey kitten named Pixel.",
    "We are repainting the living room walls a pale green colour.",
    "I finally finished reading that long novel about a lighthouse keeper.",
    "The chess club meets on Thursday evenings at the public library.",
    "My phone screen cracked when it fell on the kitchen tiles.",
    "Lena Okafor starts her new job as a nurse in Lisbon next month.",
    "We watched the solar eclipse from the rooftop with cheap paper glasses.",
]
MODEL = "openai/fake-model"


def conversation(texts: list[str], conversation_id: str = "conv-x") -> Conversation:
    """One session per turn, a day apart; speakers alternate."""
    start = datetime(2023, 5, 1, 10, 0)
    sessions = []
    for i, text in enumerate(texts, start=1):
        when = start + timedelta(days=i)
        turn = Turn(f"S{i}:1", SPEAKERS[i % 2], text, f"S{i}", when)
        sessions.append(Session(f"S{i}", when, (turn,)))
    return Conversation(conversation_id, tuple(sessions), SPEAKERS)


def interleaved(topic: list[str], extra: list[str] = ()) -> list[str]:
    """Topic turns with a filler turn after each, then `extra` turns at the end."""
    texts = []
    for i, text in enumerate(topic):
        texts += [text, FILLER[i % len(FILLER)]]
    return texts + list(extra)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def test_test_texts_sit_clearly_on_one_side_of_the_thresholds(embedder: Embedder) -> None:
    topic = embedder.encode(BAKING)
    filler = embedder.encode(FILLER)
    within = topic @ topic.T
    assert within[~np.eye(len(BAKING), dtype=bool)].min() >= THETA_SIM + 0.05
    assert (topic @ filler.T).max() <= THETA_SIM - 0.3
    assert (filler @ filler.T)[~np.eye(len(FILLER), dtype=bool)].max() <= THETA_SIM - 0.3
    centroid = topic.sum(axis=0) / np.linalg.norm(topic.sum(axis=0))
    assert float(centroid @ embedder.encode([NEW_DETAIL])[0]) >= MERGE_SIM + 0.05
    for later in (NEW_DETAIL, RYE, BAKING[0] + "!"):
        assert float(centroid @ embedder.encode([later])[0]) >= MERGE_SIM + 0.05


def test_plan_counts_neighbours_among_unconsolidated_turns_only() -> None:
    basis = np.eye(4, dtype=np.float32)
    same = np.repeat(basis[:1], THETA_COUNT + 1, axis=0)  # six identical turns: the sixth triggers
    plan = plan_recurrence(np.vstack([same, basis[1:2], same[:1]]))
    assert [e.cluster for e in plan.episodes] == [list(range(THETA_COUNT + 1))]
    assert plan.episodes[0].merged == [THETA_COUNT + 2]  # the repeat merges into the episode
    assert plan.pending == [THETA_COUNT + 1]
    assert plan_recurrence(same[:THETA_COUNT]).episodes == []  # four neighbours are not enough


def test_plan_does_not_depend_on_the_block_size(monkeypatch: pytest.MonkeyPatch) -> None:
    from evolvemem.memory import recurrence

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, 16))[rng.integers(0, 6, 200)] + rng.normal(scale=0.3, size=(200, 16))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    whole = plan_recurrence(vectors)
    monkeypatch.setattr(recurrence, "PLAN_BLOCK", 7)
    blocked = plan_recurrence(vectors)
    assert [(e.cluster, e.merged) for e in whole.episodes] == [(e.cluster, e.merged) for e in blocked.episodes]
    assert whole.pending == blocked.pending and len(whole.episodes) >= 2
    assert sorted([*whole.pending, *(p for e in whole.episodes for p in e.positions)]) == list(range(200))


def test_recurring_topic_triggers_exactly_one_extraction(embedder: Embedder) -> None:
    conv = conversation(interleaved(BAKING))
    extractor = RecurrenceExtractor(embedder)
    units, cost = extractor.extract(conv)
    stats = extractor.stats[conv.conversation_id]
    assert (stats.extraction_calls, stats.episodes, stats.merges, stats.refinement_calls) == (1, 1, 0, 0)
    assert stats.turns == len(conv.turns()) and stats.turns_consolidated == len(BAKING)
    assert cost.calls == 0  # offline: nothing billed
    topic_ids = tuple(f"S{2 * i + 1}:1" for i in range(len(BAKING)))
    episodes = [u for u in units if u.memory_type == "episodic" and len(u.source_turn_ids) > 1]
    assert len(episodes) == 1 and episodes[0].source_turn_ids == topic_ids
    assert episodes[0].content == digest([t for t in conv.turns() if t.turn_id in topic_ids])
    assert "1 May 2023" not in episodes[0].content and "2 May 2023 to 12 May 2023" in episodes[0].content
    # every turn stays retrievable verbatim, consolidated or not
    raw = [
        u
        for u in units
        if len(u.source_turn_ids) == 1
        and u.memory_type == "episodic"
        and next(t.full_text for t in conv.turns() if t.turn_id == u.source_turn_ids[0]) in u.content
    ]
    assert sorted(u.source_turn_ids[0] for u in raw) == sorted(t.turn_id for t in conv.turns())
    # offline facts repeat their raw unit, which already resolves "yesterday": none is stored twice
    assert not [u for u in units if u.memory_type == "semantic"]
    assert "yesterday = 1 May 2023" in next(u.content for u in raw if u.source_turn_ids == ("S1:1",))
    assert len({u.content for u in units}) == len(units) and len({u.memory_id for u in units}) == len(units)
    # offline prompt tokens: the words of the one prompt an LLM would have been sent
    assert (
        0
        < stats.prompt_tokens
        == len(
            extractor.episode_prompt.render(
                speakers=", ".join(SPEAKERS),
                turns="\n".join(_format(t) for t in conv.turns() if t.turn_id in topic_ids),
            ).split()
        )
    )


def _format(turn: Turn) -> str:
    from evolvemem.memory.llm_extract import format_turn

    return format_turn(turn)


def test_five_recurrences_are_not_enough(embedder: Embedder) -> None:
    conv = conversation(interleaved(BAKING[:THETA_COUNT]))
    extractor = RecurrenceExtractor(embedder)
    units, _ = extractor.extract(conv)
    stats = extractor.stats[conv.conversation_id]
    assert (stats.extraction_calls, stats.episodes, stats.prompt_tokens) == (0, 0, 0)
    assert len(units) == len(conv.turns())  # raw units only


def test_merge_above_threshold_refines_without_extraction(embedder: Embedder) -> None:
    # after the episode forms: a near-copy of a held fact, then a turn with a new detail
    conv = conversation(interleaved(BAKING, [BAKING[0] + "!", NEW_DETAIL]))
    extractor = RecurrenceExtractor(embedder)
    units, _ = extractor.extract(conv)
    stats = extractor.stats[conv.conversation_id]
    assert (stats.extraction_calls, stats.merges, stats.refinement_calls) == (1, 2, 2)
    last_two = [t.turn_id for t in conv.turns()[-2:]]
    episode = next(u for u in units if len(u.source_turn_ids) > 1)
    assert episode.source_turn_ids[-2:] == tuple(last_two)
    assert len(units) == len(conv.turns()) + 1 + stats.facts


def test_offline_refinement_adds_only_facts_the_episode_lacks(embedder: Embedder) -> None:
    # after the episode forms: a new detail, an unrelated turn, then the first topic turn again
    # by the same speaker (its fact differs from the held one only in the dates)
    conv = conversation(interleaved(BAKING, [RYE, FILLER[6], BAKING[0]]))
    extractor = RecurrenceExtractor(embedder)
    units, _ = extractor.extract(conv)
    turns = conv.turns()
    tokens = lambda u: set(nlp.tokenize(u.content))  # noqa: E731
    cluster_facts = [extractor._offline_fact(conv, t) for t in turns[: 2 * len(BAKING) : 2]]
    rye, again = extractor._offline_fact(conv, turns[-3]), extractor._offline_fact(conv, turns[-1])
    assert jaccard(tokens(again), tokens(cluster_facts[0])) >= 0.5
    assert all(jaccard(tokens(rye), tokens(f)) < 0.5 for f in cluster_facts)
    from evolvemem.memory.recurrence import _EpisodeOutcome

    speakers = ", ".join(conv.speakers)
    added = extractor._refine(conv, speakers, cluster_facts, turns[-3], _EpisodeOutcome())
    assert [u.source_turn_ids for u in added] == [(turns[-3].turn_id,)]
    assert extractor._refine(conv, speakers, cluster_facts, turns[-1], _EpisodeOutcome()) == []
    # offline, a one-turn fact says no more than its raw unit (which resolves dates too): not stored twice
    assert not [u for u in units if u.memory_type == "semantic"]
    stats = extractor.stats[conv.conversation_id]
    assert (stats.merges, stats.refinement_calls, stats.extraction_calls) == (2, 2, 1)
    assert len([u for u in units if len(u.source_turn_ids) == 1 and u.memory_type == "episodic"]) == len(turns)


def test_turn_ids_limit_the_extraction(embedder: Embedder) -> None:
    conv = conversation(interleaved(BAKING))
    wanted = {t.turn_id for t in conv.turns()[:4]}
    units, _ = RecurrenceExtractor(embedder).extract(conv, turn_ids=wanted)
    assert {t for u in units for t in u.source_turn_ids} == wanted and len(units) == 4


def test_name_and_version_cover_the_thresholds(embedder: Embedder) -> None:
    base = RecurrenceExtractor(embedder)
    assert base.name == "recurrence-offline"
    assert RecurrenceExtractor(embedder, theta_count=3).version != base.version
    assert RecurrenceExtractor(embedder, merge_sim=0.8).version != base.version
    with pytest.raises(ValueError):
        RecurrenceExtractor(embedder, theta_sim=1.5)


def test_store_builder_uses_the_extract_role(embedder: Embedder) -> None:
    from evolvemem.memory.stores import STORE_BUILDERS, store_extractor
    from evolvemem.roles.factory import ModelSettings, build_roles

    assert STORE_BUILDERS["recurrence"] == "evolvemem.memory.recurrence:recurrence_extractor"
    offline = store_extractor("recurrence", build_roles(ModelSettings()).extract_client, embedder)
    assert isinstance(offline, RecurrenceExtractor) and offline.client is None
    llm = recurrence_extractor(build_roles(ModelSettings(model=MODEL), cache_enabled=False).extract_client, embedder)
    assert llm.name == f"recurrence-llm:{MODEL}"


def test_consolidation_policy_dimension_selects_the_store() -> None:
    from evolvemem.answering.stores import base_store, stores_needed
    from evolvemem.space.config import load_config
    from evolvemem.space.action_space import files_space

    dim = files_space()["consolidation_policy"]
    assert (dim.choices, dim.default, dim.per_type, dim.mechanism_off) == (
        ("eager", "recurrence"),
        "eager",
        True,
        "eager",
    )
    config, _ = load_config("default")
    assert "recurrence" not in stores_needed(config)
    changed, _ = config.with_changes({"consolidation_policy": "recurrence"})
    assert base_store(changed.for_type(None)) == "recurrence" and "recurrence" in stores_needed(changed)


# ----------------------------------------------------------------------------- LLM variant
def _turn_ids(section: str) -> list[tuple[str, str]]:
    return re.findall(r"^\[(\S+)\] \([^)]*\) [^:]+: (.+)$", section, re.M)


def responder(garbage_for: str = "") -> callable:
    """Episode prompts: a narrative and one fact per turn. Refine prompts: the first held fact
    restated (must be dropped) plus one new fact. `garbage_for` ("episode"/"refine") gets prose."""

    def respond(body: dict) -> str:
        prompt = message_text(body["messages"][0])
        if "Turns on the recurring topic" in prompt:
            if garbage_for == "episode":
                return "Here is a lovely summary, no JSON today."
            section = prompt.split("in time order:", 1)[1].split("Rules:", 1)[0]
            turns = _turn_ids(section)
            return json.dumps(
                {
                    "episode": f"Priya Raman kept baking sourdough across {len(turns)} turns.",
                    "facts": [
                        {"content": f"Fact of {tid}: {text}", "source_turn_ids": [tid], "date": None}
                        for tid, text in turns
                    ]
                    + [{"content": "No source here."}],
                }
            )
        if "Facts the memory already holds" in prompt:
            if garbage_for == "refine":
                return "not json either"
            held = re.search(r"^1\. (.+)$", prompt.split("already holds:", 1)[1], re.M).group(1)
            new_turn = _turn_ids(prompt.split("New turn, written as", 1)[1])[0]
            return json.dumps(
                {
                    "facts": [
                        {"content": held + "."},
                        {"content": f"New detail of {new_turn[0]}: {new_turn[1]}", "date": "2023-05-20"},
                    ]
                }
            )
        return "{}"

    return respond


def _client(server: FakeLLMServer):
    from evolvemem.llm.client import LLMClient

    return LLMClient(MODEL, api_base=server.url, cache=None, max_retries=0, backoff_base=0.01)


def test_llm_variant_calls_parses_and_bills(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    conv = conversation(interleaved(BAKING, [NEW_DETAIL]))
    with FakeLLMServer(responder()) as server:
        extractor = RecurrenceExtractor(embedder, client=_client(server))
        units, cost = extractor.extract(conv)
        requests = list(server.requests)
    stats = extractor.stats[conv.conversation_id]
    assert len(requests) == 2 == cost.calls == stats.calls  # one extraction, one refinement
    assert stats.fallbacks == 0 and extractor.failures[conv.conversation_id] == []
    assert (
        stats.prompt_tokens == cost.prompt_tokens == sum(count_tokens(message_text(r["messages"][0])) for r in requests)
    )
    episode = next(u for u in units if u.content.startswith("Priya Raman kept baking"))
    assert "across 6 turns" in episode.content and len(episode.source_turn_ids) == 7
    facts = {u.content: u for u in units if u.memory_type == "semantic"}
    assert len(facts) == len(BAKING) + 1 == stats.facts  # the sourceless fact and the restated one are dropped
    new_id = conv.turns()[-1].turn_id
    new = facts[f"New detail of {new_id}: {NEW_DETAIL}"]
    assert new.source_turn_ids == (new_id,) and new.timestamp == datetime(2023, 5, 20)
    assert all(
        f is new or f.source_turn_ids == (re.match(r"Fact of (\S+):", f.content).group(1),) for f in facts.values()
    )
    assert len([u for u in units if len(u.source_turn_ids) == 1 and u.memory_type == "episodic"]) == len(conv.turns())


def test_llm_prompt_tokens_match_the_offline_estimate(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    conv = conversation(interleaved(BAKING))
    offline = RecurrenceExtractor(embedder)
    offline.extract(conv)
    with FakeLLMServer(responder()) as server:
        llm = RecurrenceExtractor(embedder, client=_client(server))
        llm.extract(conv)
    assert llm.stats[conv.conversation_id].prompt_tokens == offline.stats[conv.conversation_id].prompt_tokens > 0


@pytest.mark.parametrize("garbage_for", ["episode", "refine"])
def test_llm_garbage_falls_back_to_offline(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch, garbage_for: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    conv = conversation(interleaved(BAKING, [RYE]))
    with FakeLLMServer(responder(garbage_for)) as server:
        extractor = RecurrenceExtractor(embedder, client=_client(server))
        units, cost = extractor.extract(conv)
    stats = extractor.stats[conv.conversation_id]
    assert stats.fallbacks == 1 and len(extractor.failures[conv.conversation_id]) == 1
    assert cost.calls == 3  # the garbage reply and its re-ask are billed, plus the other call
    texts = {u.content for u in units}
    topic_turns = [t for t in conv.turns() if t.turn_id in {f"S{2 * i + 1}:1" for i in range(len(BAKING))}]
    rye_fact = extractor._offline_fact(conv, conv.turns()[-1]).content
    if garbage_for == "episode":
        assert digest(topic_turns) in texts and not any(t.startswith("Fact of") for t in texts)
        assert any(t.startswith("New detail of") for t in texts)
    else:
        assert any(t.startswith("Priya Raman kept baking") for t in texts) and rye_fact in texts


def test_llm_http_failure_never_breaks_the_build(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    conv = conversation(interleaved(BAKING))
    with FakeLLMServer(responder()) as server:
        server.fail_next(500, count=5)
        extractor = RecurrenceExtractor(embedder, client=_client(server))
        units, cost = extractor.extract(conv)
    assert extractor.stats[conv.conversation_id].fallbacks == 1 and cost.calls == 0
    assert "500" in extractor.failures[conv.conversation_id][0]
    assert any(u.content.startswith("Recurring topic (6 turns") for u in units)
