"""AMA's levers: granularity routing, the episode store, the answer judge and the refresher.

Real parts only: the bundled all-MiniLM-L6-v2 model, bm25s, real workspaces and indexes over an
invented conversation, the offline reader, DuckDB for the run store, and litellm against the
fake OpenAI-compatible server on 127.0.0.1 for the LLM variants."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from evolvemem.data.models import Conversation, Dataset, Question, Session, Turn
from evolvemem.answering import path as ama
from evolvemem.answering.evaluate import EffectiveConfigs, answer_question, evaluate
from evolvemem.answering.stores import stores_needed
from evolvemem.llm.client import LLMClient
from evolvemem.mechanisms.ama_judge import judge, judge_by_rules
from evolvemem.mechanisms.ama_refresh import Refresher, asks_current_state, find_conflicts, superseded_text
from evolvemem.mechanisms.ama_router import granularity_for, route, route_by_rules
from evolvemem.memory.granularity import EpisodeExtractor, episode_extractor, topic_segments
from evolvemem.memory.stores import STORE_BUILDERS, raw_unit
from evolvemem.roles.context_format import ABSTENTION
from evolvemem.roles.factory import ModelSettings, build_roles
from evolvemem.contracts.roles import AnswerResult
from evolvemem.contracts.usage import Usage
from evolvemem.space.config import load_config
from evolvemem.space.action_space import files_space
from evolvemem.store import RunStore
from evolvemem.workspace import Workspace
from tests.fake_llm_server import (  # noqa: F401 - fake_llm is a fixture
    FakeLLMServer,
    count_tokens,
    fake_llm,
    last_user_message,
    message_text,
)

SPEAKERS = ("Priya Raman", "Tomasz")
SESSIONS = [
    (
        "s1",
        datetime(2023, 3, 1, 18, 0),
        [
            ("Priya Raman", "I just got back from my pottery class, my first bowl collapsed on the wheel."),
            ("Tomasz", "Clay is tricky! Did the pottery teacher help you centre the clay?"),
            ("Priya Raman", "Yes, she showed me how to brace my elbows so the bowl stays centred on the wheel."),
            ("Tomasz", "Next time your bowl will stand, I am sure, pottery takes patience."),
            ("Tomasz", "By the way, my bike chain snapped on the way to work yesterday."),
            ("Priya Raman", "Oh no, did you have to push the bike all the way to the office?"),
            ("Tomasz", "I pushed it three kilometres and fixed the bike chain with a new master link."),
            ("Priya Raman", "Bike repairs are a mystery to me, well done fixing the chain."),
        ],
    ),
    (
        "s2",
        datetime(2023, 3, 3, 9, 0),
        [
            ("Priya Raman", "My flat in Porto has a lovely view of the river."),
            ("Tomasz", "Porto is beautiful, I loved the bridges there."),
            ("Priya Raman", "I said to Tomasz that the river never sleeps while we watched the boats."),
        ],
    ),
    (
        "s3",
        datetime(2023, 6, 20, 12, 0),
        [
            ("Priya Raman", "I finally moved from Porto to Lisbon last week, still unpacking boxes!"),
            ("Tomasz", "Congratulations on the move! How is Lisbon treating you?"),
            ("Priya Raman", "Lisbon is sunny and the trams are so charming."),
        ],
    ),
]
CID = "c-ama"


def conversation(cid: str = CID) -> Conversation:
    sessions = []
    for n, (sid, when, turns) in enumerate(SESSIONS, start=1):
        sessions.append(
            Session(
                sid,
                when,
                tuple(Turn(f"D{n}:{i}", who, text, sid, when) for i, (who, text) in enumerate(turns, start=1)),
            )
        )
    return Conversation(cid, tuple(sessions), SPEAKERS)


def question(qid: str, text: str, qtype: str, answer: str, evidence: tuple[str, ...] = ()) -> Question:
    return Question(qid, CID, text, qtype, qtype, (answer,), evidence, datetime(2023, 6, 21))


QUESTIONS = [
    question("q-now", "Where does Priya Raman live now?", "knowledge_update", "Lisbon", ("D3:1",)),
    question("q-bike", "How far did Tomasz push his bike?", "single_fact", "three kilometres", ("D1:7",)),
    question("q-feel", "How did Priya Raman feel about her pottery class?", "inference", "frustrated", ("D1:1",)),
    question(
        "q-quote",
        "What exactly did Priya Raman say about the river?",
        "single_fact",
        "the river never sleeps",
        ("D2:3",),
    ),
]


def dataset() -> Dataset:
    types = sorted({q.question_type for q in QUESTIONS})
    return Dataset("ama-invented", {CID: conversation()}, list(QUESTIONS), {t: t for t in types})


def config(**changes):
    base, _ = load_config("default")
    cfg, _ = base.with_changes({"semantic_top_k": 8, "keyword_top_k": 8, "max_context": 6, **changes})
    return cfg


@pytest.fixture(scope="module")
def ws() -> Workspace:
    workspace = Workspace(dataset(), build_roles(ModelSettings()))
    workspace.build()
    workspace.ensure_stores({"raw", "episode"})
    return workspace


def client_for(server: FakeLLMServer) -> LLMClient:
    return LLMClient("openai/fake-model", api_base=server.url, cache=None, max_retries=0, timeout=10.0)


def billed(server: FakeLLMServer, since: int = 0) -> tuple[int, int]:
    """(calls, prompt tokens) the fake server saw since request `since` (its whitespace counts)."""
    bodies = server.requests[since:]
    return len(bodies), sum(count_tokens(message_text(m)) for body in bodies for m in body["messages"])


def paid(cost: Usage) -> tuple[int, int]:
    return cost.calls, cost.prompt_tokens


# ----------------------------------------------------------------------------- the registry
def test_dimensions_are_declared_as_mechanisms_and_off_by_default():
    dims = files_space()
    assert dims["memory_granularity"].choices == ("fact", "raw", "episode", "routed")
    assert dims["memory_granularity"].mechanism_off == "fact" and dims["memory_granularity"].per_type
    assert (dims["judge_retries"].min, dims["judge_retries"].max, dims["judge_retries"].mechanism_off) == (1, 2, 0)
    assert dims["enable_refresher"].mechanism_off is False and dims["enable_refresher"].per_type
    default, _ = load_config("default")
    assert (default.memory_granularity, default.judge_retries, default.enable_refresher) == ("fact", 0, False)
    assert stores_needed(default) == {"fact"}
    assert STORE_BUILDERS["episode"] == "evolvemem.memory.granularity:episode_extractor"


# ----------------------------------------------------------------------------- routing
@pytest.mark.parametrize(
    "text, expected",
    [
        ("What exactly did Tomasz write on the card?", "raw"),
        ("What did Priya Raman say about the new flat?", "raw"),
        ('Did Tomasz ever mention "the blue door"?', "raw"),
        ("How did Tomasz put it when he quit the choir?", "raw"),
        ("When did Priya Raman move to Lisbon?", "fact"),
        ("How many bowls has Priya Raman made?", "fact"),
        ("Where does Tomasz keep his bike?", "fact"),
        ("What is the name of Tomasz's cat?", "fact"),
        ("Why did Priya Raman leave Porto?", "episode"),
        ("How did Tomasz feel after the chain snapped?", "episode"),
        ("What happened at the pottery class?", "episode"),
        ("What was the trip to the coast like?", "episode"),
        ("What does Tomasz do on Sundays?", "fact"),
    ],
)
def test_routing_rules_read_the_question_intent(text, expected):
    assert route_by_rules(text) == expected


def test_configured_granularity_is_used_without_routing():
    for setting in ("fact", "raw", "episode"):
        assert granularity_for("Why did Priya Raman leave Porto?", config(memory_granularity=setting)) == (
            setting,
            "config",
            Usage(),
        )
    assert granularity_for("Why did Priya Raman leave Porto?", config(memory_granularity="routed")) == (
        "episode",
        "rules",
        Usage(),
    )


# ----------------------------------------------------------------------------- the episode store
def test_topic_segments_cut_at_relative_drops_and_respect_the_bounds():
    topic_a, topic_b = np.eye(4, dtype=np.float32)[0], np.eye(4, dtype=np.float32)[1]
    wobble = np.eye(4, dtype=np.float32)[2] * 0.1

    def unit(v):
        return v / np.linalg.norm(v)

    vectors = np.stack(
        [unit(topic_a + wobble * (i % 2)) for i in range(4)] + [unit(topic_b + wobble * (i % 2)) for i in range(4)]
    )
    assert topic_segments(vectors) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # max_len cuts a run; the topic shift right after a cut is not cut again (min_len)
    assert topic_segments(vectors, max_len=3) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    # no cut leaves a run shorter than min_len: the shift after one item is ignored, a short tail merges
    shifted = np.stack([unit(topic_a)] + [unit(topic_b + wobble * (i % 2)) for i in range(6)] + [unit(topic_a)])
    assert topic_segments(shifted, min_len=2) == [list(range(8))]
    assert topic_segments(shifted, min_len=1) == [[0], list(range(1, 7)), [7]]
    assert topic_segments(vectors[:1]) == [[0]] and topic_segments(vectors[:0]) == []


def test_episode_extractor_cuts_at_the_topic_shift_and_keeps_every_turn(ws):
    conv = conversation()
    extractor = episode_extractor(ws.roles.extract_client, ws.embedder)
    assert extractor.name == "episode" and extractor.client is None
    segments = extractor.segments(conv)
    ids = [[t.turn_id for t in seg] for seg in segments]
    assert sum(ids, []) == [t.turn_id for t in conv.turns()]  # every turn once, in order
    assert not any("D1:4" in seg and "D1:5" in seg for seg in ids)  # pottery and the bike are apart
    assert all({t.session_id for t in seg} == {seg[0].session_id} for seg in segments)

    units, cost = extractor.extract(conv)
    assert cost == Usage() and [u.source_turn_ids for u in units] == [tuple(s) for s in ids]
    moved = next(u for u in units if "D3:1" in u.source_turn_ids)
    assert moved.content.startswith("On 20 June 2023: Priya Raman: I finally moved from Porto to Lisbon")
    assert "last week = " in moved.content and "Tomasz: Congratulations" in moved.content
    assert moved.timestamp == datetime(2023, 6, 20, 12, 0) and moved.session_id == "s3"
    assert {"priya raman", "tomasz"} <= set(moved.persons) and "lisbon" in {x.lower() for x in moved.locations}
    # re-extraction of a few turns segments only those
    part, _ = extractor.extract(conv, {"D1:5", "D1:6", "D1:7"})
    assert [u.source_turn_ids for u in part] == [("D1:5", "D1:6", "D1:7")]
    # the workspace built and indexed the store through the registered builder
    stored = ws.store_memories(CID, "episode")
    assert sorted(u.content for u in stored) == sorted(u.content for u in units)
    hit = ws.retriever(CID, "episode").retrieve(QUESTIONS[1], config())
    assert "D1:7" in hit.items[0].memory.source_turn_ids


def test_episode_extractor_narrates_with_a_model_and_does_not_freeze_failures(ws, fake_llm):
    def narrate(body: dict) -> str:
        prompt = message_text(body["messages"][0])  # the episode prompt (a re-ask adds a follow-up)
        lines = prompt.split("Memories of the segment:", 1)[1].split("Rules:", 1)[0]
        first = re.search(r"^- (.+)$", lines, re.M).group(1)
        if "Clay" in prompt:  # one segment gets garbage: it keeps its digest and is reported
            return "not json"
        return json.dumps({"narrative": f"In the third person, {first}"})

    fake_llm.responder = narrate
    extractor = EpisodeExtractor(ws.embedder, client_for(fake_llm))
    offline = EpisodeExtractor(ws.embedder)
    assert extractor.name == "episode-llm" and extractor.version != offline.version
    units, cost = extractor.extract(conversation())
    digests = [u for u in units if u.content.startswith("On ")]
    assert len(digests) == 1 and "Clay is tricky" in digests[0].content
    assert extractor.failed_turns[CID] == set(digests[0].source_turn_ids)
    narrated = [u for u in units if u not in digests]
    assert narrated and all(u.content.startswith("In the third person, ") for u in narrated)
    assert next(u for u in narrated if "D1:5" in u.source_turn_ids).content.startswith(
        "In the third person, Tomasz: By the way, my bike chain snapped"
    )
    assert cost.calls == fake_llm.request_count == len(units) + 1  # the unparseable reply was re-asked once
    assert paid(cost) == billed(fake_llm)
    fake_llm.responder = lambda body: json.dumps({"narrative": "A perfectly ordinary retelling of the segment."})
    again, _ = extractor.extract(conversation())
    assert CID not in extractor.failed_turns and all(u.content.startswith("A perfectly") for u in again)


# ----------------------------------------------------------------------------- refresher
def raw_memory(ws: Workspace, turn_id: str):
    return next(u for u in ws.store_memories(CID, "raw") if u.source_turn_ids == (turn_id,))


def test_refresher_rewrites_the_older_conflicting_memory_and_keeps_both(ws):
    porto, lisbon, bike = raw_memory(ws, "D2:1"), raw_memory(ws, "D3:1"), raw_memory(ws, "D1:7")
    q = QUESTIONS[0]
    assert asks_current_state(q) and asks_current_state(question("x", "Is Tomasz still cycling?", "single_fact", "-"))
    conflicts = find_conflicts(q.text, [lisbon, bike, porto])
    assert [(c.older.memory_id, c.newer.memory_id) for c in conflicts] == [(porto.memory_id, lisbon.memory_id)]

    refresher = Refresher()
    result = refresher.refresh(q, [lisbon, bike, porto])
    assert result.refreshed_ids == [porto.memory_id] and result.cost == Usage()
    new_lisbon, new_bike, new_porto = result.context
    assert (new_lisbon, new_bike) == (lisbon, bike)  # the newer memory and bystanders are untouched
    assert new_porto.memory_id == porto.memory_id and new_porto.content.startswith(porto.content)
    assert "superseded as of 20 June 2023" in new_porto.content and "Lisbon" in new_porto.content
    assert new_porto.content == superseded_text(porto, lisbon)
    assert raw_memory(ws, "D2:1").content == porto.content  # the shared store is not changed
    assert refresher.refresh(q, [lisbon, bike, porto]).context == result.context  # memoised, same result

    # not conflicts: same day, or another person, or a newer memory that adds nothing
    same_day = porto.evolve(
        memory_id="x1", timestamp=lisbon.timestamp, content=porto.content.replace("[3 March 2023]", "[20 June 2023]")
    )
    assert find_conflicts(q.text, [same_day, lisbon]) == []
    tomasz_bridge = raw_memory(ws, "D2:2")
    assert find_conflicts(q.text, [tomasz_bridge, lisbon]) == []
    assert find_conflicts(q.text, [porto, porto.evolve(memory_id="x2", timestamp=lisbon.timestamp)]) == []


def test_llm_refresher_confirms_rewrites_once_and_falls_back(ws, fake_llm):
    porto, lisbon = raw_memory(ws, "D2:1"), raw_memory(ws, "D3:1")
    q = QUESTIONS[0]
    replies = iter(
        [
            json.dumps({"conflict": True, "updated": "Priya Raman lived in Porto until June 2023."}),
            json.dumps({"conflict": False}),
            "garbage",
            "garbage",
        ]
    )
    fake_llm.responder = lambda body: next(replies)
    client = client_for(fake_llm)

    refresher = Refresher(client)
    first = refresher.refresh(q, [porto, lisbon])
    prompt = last_user_message(fake_llm.requests[0])
    assert "Older memory: [3 March 2023] Priya Raman: My flat in Porto" in prompt
    assert "Newer memory: [20 June 2023] Priya Raman: I finally moved" in prompt and "$" not in prompt
    assert first.context[0].content == "Priya Raman lived in Porto until June 2023."
    assert paid(first.cost) == billed(fake_llm) and first.cost.calls == 1 and first.cost.completion_tokens > 0
    second = refresher.refresh(q, [porto, lisbon])  # memoised: no request, reported as a cache hit
    assert fake_llm.request_count == 1 and second.context == first.context
    assert second.cost == Usage(cache_hits=1)

    declined = Refresher(client).refresh(q, [porto, lisbon])  # the model sees no conflict
    assert declined.refreshed_ids == [] and declined.context == [porto, lisbon] and declined.cost.calls == 1
    fallback = Refresher(client).refresh(q, [porto, lisbon])  # unparseable twice: the rules' template
    assert fallback.context[0].content == superseded_text(porto, lisbon) and fallback.cost.calls == 2


# ----------------------------------------------------------------------------- judge
def test_judge_rules(ws):
    bike_q = QUESTIONS[1]
    context = [raw_memory(ws, t) for t in ("D1:5", "D1:6", "D1:7")]
    assert judge_by_rules(bike_q, context, "three kilometres")[0] == "pass"
    assert judge_by_rules(bike_q, context, ABSTENTION)[0] == "retry"
    assert judge_by_rules(bike_q, context, "a velodrome in Gdansk")[0] == "retry"  # not in the context
    when = question("w", "When did Tomasz's bike chain snap?", "temporal", "28 February 2023")
    assert judge_by_rules(when, context, "the chain")[0] == "retry"  # no date for a "when" question
    assert judge_by_rules(when, context, "28 February 2023")[0] == "pass"
    assert judge_by_rules(QUESTIONS[0], [raw_memory(ws, "D2:1")], "Porto", unresolved_conflict=True)[0] == "refresh"
    # an abstention where the context answers it for someone else stands (the question may be a trap)
    trap = question("t", "How far did Priya Raman push her bike?", "adversarial", "not mentioned")
    assert judge_by_rules(trap, [raw_memory(ws, "D1:7")], ABSTENTION)[0] == "pass"


def test_llm_router_and_judge_parse_and_fall_back(fake_llm):
    q = QUESTIONS[1]
    fake_llm.responder = lambda body: json.dumps({"granularity": "Episode"})
    client = client_for(fake_llm)
    granularity, how, cost = route(q.text, client)
    assert (granularity, how) == ("episode", "llm") and paid(cost) == billed(fake_llm) == (1, cost.prompt_tokens)
    prompt = last_user_message(fake_llm.requests[0])
    assert prompt.rstrip().endswith(f"Question: {q.text}") and "$" not in prompt
    for garbage, calls in ((json.dumps({"granularity": "paragraph"}), 1), ("no json", 2)):
        fake_llm.responder = lambda body, g=garbage: g
        before = fake_llm.request_count
        assert route(q.text, client)[:2] == ("fact", "rules-fallback")
        assert fake_llm.request_count - before == calls

    memories = [raw_unit(CID, t) for t in conversation().sessions[0].turns[4:7]]
    fake_llm.responder = lambda body: json.dumps({"verdict": "REFRESH", "reason": "old and new"})
    before = fake_llm.request_count
    verdict, how, cost = judge(q, memories, "three kilometres", client)
    assert (verdict, how) == ("refresh", "llm") and paid(cost) == billed(fake_llm, before)
    prompt = last_user_message(fake_llm.requests[-1])
    assert "Answer: three kilometres" in prompt and "I pushed it three kilometres" in prompt
    assert "The question is asked on 21 June 2023." in prompt
    fake_llm.responder = lambda body: json.dumps({"verdict": "maybe"})
    assert judge(q, memories, ABSTENTION, client)[:2] == ("retry", "rules-fallback")
    fake_llm.fail_next(400)
    assert judge(q, memories, "three kilometres", client) == ("pass", "rules-fallback", Usage())


# ----------------------------------------------------------------------------- the answer path
class AbstainingAnswerer:
    """An answerer that never knows (so the judge always asks again); counts its calls."""

    name = "abstains"

    def __init__(self) -> None:
        self.contexts: list[list] = []

    def answer(self, question, context, style, layout="list", levers=None):
        self.contexts.append(list(context))
        return AnswerResult(ABSTENTION)


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_judge_retries_are_bounded_and_each_source_is_tried_once(ws, monkeypatch, retries):
    counter = AbstainingAnswerer()
    monkeypatch.setattr(ws.roles, "answerer", counter)
    trace = ama.answer_path(ws, QUESTIONS[1], config(judge_retries=retries))
    assert len(counter.contexts) == retries + 1 == len(trace.attempts)
    assert trace.verdicts == ["retry"] * retries and trace.retries == retries
    assert [a.source for a in trace.attempts] == ["fact", "related", "episode"][: retries + 1]
    if retries:  # related turns: raw turns of the first context's sources and their neighbours
        first, related = trace.attempts[0].context, trace.attempts[1].context
        raw = ws.store_memories(CID, "raw")
        turn_ids = [t.turn_id for t in conversation().turns()]
        near = {
            turn_ids[i + d]
            for m in first
            for t in m.source_turn_ids
            for i in [turn_ids.index(t)]
            for d in (-1, 0, 1)
            if 0 <= i + d < len(turn_ids)
        }
        assert 0 < len(related) <= 6 and all(m in raw for m in related)
        assert {m.source_turn_ids[0] for m in related} <= near
        assert related[0].source_turn_ids == first[0].source_turn_ids  # the best memory's own turn leads
        assert counter.contexts[1] == list(related)


def test_judge_stops_when_no_other_source_is_built(monkeypatch):
    lonely = Workspace(dataset(), build_roles(ModelSettings()))  # only the fact store
    lonely.build()
    counter = AbstainingAnswerer()
    monkeypatch.setattr(lonely.roles, "answerer", counter)
    trace = ama.answer_path(lonely, QUESTIONS[1], config(judge_retries=2))
    assert len(counter.contexts) == 1 and trace.verdicts == ["retry"] and trace.retries == 0


def test_routed_question_reads_its_store_and_refresh_applies_before_answering(ws):
    quote = ama.answer_path(ws, QUESTIONS[3], config(memory_granularity="routed"))
    assert (quote.granularity, quote.route_source) == ("raw", "rules")
    assert all(m in ws.store_memories(CID, "raw") for m in quote.final.context)
    feel = ama.answer_path(ws, QUESTIONS[2], config(memory_granularity="routed"))
    assert feel.granularity == "episode" and all(len(m.source_turn_ids) > 1 for m in feel.final.context)

    cfg = config(memory_granularity="raw", enable_refresher=True, max_context=10)
    trace = ama.answer_path(ws, QUESTIONS[0], cfg)
    porto = raw_memory(ws, "D2:1")
    assert trace.refreshed_ids == [porto.memory_id] and trace.final.refreshed == (porto.memory_id,)
    shown = next(m for m in trace.final.context if m.memory_id == porto.memory_id)
    assert "superseded as of 20 June 2023" in shown.content
    assert ama.answer_path(ws, QUESTIONS[0], config(memory_granularity="raw", max_context=10)).refreshed_ids == []


def test_evaluate_end_to_end_with_routing_judge_and_refresher(ws, tmp_path: Path):
    cfg = config(memory_granularity="routed", judge_retries=2, enable_refresher=True, max_context=10)
    before = {store: [m.content for m in ws.store_memories(CID, store)] for store in ("fact", "raw", "episode")}
    with RunStore(tmp_path / "run") as store:
        outcome = evaluate(ws, cfg, QUESTIONS, sink=store.record_questions)
        rows = {r["question_id"]: r for r in store.query("SELECT * FROM question_records")}
    assert {store: [m.content for m in ws.store_memories(CID, store)] for store in before} == before
    assert set(rows) == {q.question_id for q in QUESTIONS} and not any(r["failed"] for r in rows.values())
    for row in rows.values():
        assert row["granularity"] in ("fact", "raw", "episode") and row["route"] == "rules"
        assert row["retries"] <= 2 and len(row["judge_verdicts"]) <= 2 and len(row["retry_sources"]) == row["retries"]
        assert row["calls"] == 0 and row["prompt_tokens"] == 0
    assert rows["q-quote"]["granularity"] == "raw" and rows["q-feel"]["granularity"] == "episode"
    assert rows["q-now"]["refreshed_ids"] and rows["q-now"]["prediction"]
    assert outcome.summary.all_f1 is not None
    # the default path is unchanged: base store, no verdicts, no refresh
    default = config()
    effective, fingerprint = EffectiveConfigs(default)(QUESTIONS[0].question_type)
    row = answer_question(ws, QUESTIONS[0], effective, fingerprint, protocol="official", benchmark="x").as_row()
    assert (row["granularity"], row["route"], row["judge_verdicts"], row["retries"], row["refreshed_ids"]) == (
        "fact",
        "config",
        [],
        0,
        [],
    )
    plain = ws.retriever(CID).retrieve(QUESTIONS[0], effective)
    assert row["context_ids"] == [i.memory.memory_id for i in plain.items]


def test_llm_mechanisms_are_billed_on_the_record(ws, fake_llm, monkeypatch):
    """Router, judge and refresher calls go through the answer role's client and add to the record."""

    def respond(body: dict) -> str:
        prompt = last_user_message(body)
        if '"granularity"' in prompt:
            return json.dumps({"granularity": "raw"})
        if '"verdict"' in prompt:
            return json.dumps({"verdict": "refresh", "reason": "old and new homes"})
        if '"conflict"' in prompt:
            return json.dumps({"conflict": True, "updated": "Priya Raman's Porto flat was her home until June 2023."})
        raise AssertionError("unexpected prompt")

    fake_llm.responder = respond
    client = client_for(fake_llm)
    monkeypatch.setattr(type(ws.roles), "mechanism_client", property(lambda self: client))
    cfg = config(memory_granularity="routed", judge_retries=1, enable_refresher=True, max_context=10)
    effective, fingerprint = EffectiveConfigs(cfg)(QUESTIONS[0].question_type)
    row = answer_question(ws, QUESTIONS[0], effective, fingerprint, protocol="official", benchmark="x").as_row()
    kinds = [
        ("route" if '"granularity"' in p else "judge" if '"verdict"' in p else "refresh")
        for p in (last_user_message(b) for b in fake_llm.requests)
    ]
    assert kinds[0] == "route" and kinds.count("judge") == 1 and "refresh" in kinds
    assert (row["granularity"], row["route"]) == ("raw", "llm") and row["judge_verdicts"] == ["refresh"]
    assert (row["calls"], row["prompt_tokens"]) == billed(fake_llm) and row["completion_tokens"] > 0
    # the refresh was done before the first answer (the question asks for the current state),
    # so the judge's Refresh finds nothing new to refresh and becomes a retry from another
    # source, whose own copy of the old statement is refreshed too (one model call per pair)
    assert row["retries"] == 1 and row["retry_sources"] == ["fact"]
    fact_porto = next(m for m in ws.store_memories(CID, "fact") if m.source_turn_ids == ("D2:1",))
    assert row["refreshed_ids"] == [raw_memory(ws, "D2:1").memory_id, fact_porto.memory_id]
    assert kinds.count("refresh") == 2
