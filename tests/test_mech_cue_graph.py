"""Cue–tag–content graph: spreading activation reaches a memory linked to the question only
through a shared cue; in llm mode a model walks the graph with tools. Real parts: the bundled
MiniLM model, bm25s, the rule annotator, litellm against the fake server on 127.0.0.1."""

from __future__ import annotations

import json
import re
from datetime import datetime
from types import SimpleNamespace

import numpy as np
import pytest

from evolvemem.data.models import Question
from evolvemem.memory import nlp
from evolvemem.contracts.memory import MemoryUnit, make_memory_id
from evolvemem.llm.client import LLMClient
from evolvemem.mechanisms.cue_graph import SOURCE
from evolvemem.mechanisms.cue_graph_activation import build_graph, spread
from evolvemem.mechanisms.cue_graph_llm import GraphTools, kept_first, parse_ids
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.mechanisms import candidate_sources
from evolvemem.retrieval.index import ConversationIndex
from evolvemem.retrieval.retriever import Retriever
from evolvemem.contracts.usage import Usage
from evolvemem.space.config import load_config
from tests.fake_llm_server import FakeLLMServer, count_tokens, fake_llm, last_user_message, message_text  # noqa: F401

SPEAKERS = ("Priya Raman", "Tomasz")
TEXTS = [
    "Priya Raman adopted a grey kitten named Biscuit from a rescue charity.",
    "Tomasz is learning the cello at the community music school.",
    "Priya Raman flew to Lisbon for a conference on coral reef biology.",
    "Tomasz baked sourdough bread with rye flour for his neighbours.",
    "Priya Raman ran the Porto half marathon in under two hours.",
    "Tomasz's sister Agnieszka works as an architect in Krakow.",
    "Priya Raman is learning to paint watercolour landscapes.",
    "Priya Raman bought a second-hand bicycle for her commute.",
    "Agnieszka collects vintage postage stamps from Brazil.",
    "Priya Raman repainted her kitchen a pale yellow colour.",
    "Tomasz fixed the leaking tap in his bathroom.",
    "Priya Raman planted tomatoes and basil on her balcony.",
    "Tomasz enjoys hiking in the Tatra mountains with friends.",
    "Priya Raman's hobby is birdwatching at the lake on weekends.",
]
STAMPS = TEXTS[8]  # linked to the question below only through "Agnieszka"
QUESTION = "What is the architect from Krakow passionate about?"


def unit(text: str, day: int) -> MemoryUnit:
    found = nlp.annotate(text, SPEAKERS)
    return MemoryUnit(
        make_memory_id("c1", text),
        "c1",
        text,
        timestamp=datetime(2023, 3, day),
        source_turn_ids=(f"D1:{day}",),
        persons=found.persons,
        locations=found.locations,
        entities=found.entities,
        topics=found.topics,
        keywords=found.keywords,
    )


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def make_retriever(embedder: Embedder) -> Retriever:
    index = ConversationIndex.build([unit(t, d) for d, t in enumerate(TEXTS, start=1)], embedder, SPEAKERS)
    return Retriever(index, embedder, known_persons=SPEAKERS, sources=candidate_sources())


def small_views(**changes):
    """Narrow plain views (3 candidates each, 6 in the context) plus `changes`."""
    base, _ = load_config("default")
    cfg, _ = base.with_changes(
        {"semantic_top_k": 3, "keyword_top_k": 3, "structured_top_k": 3, "max_context": 6, **changes}
    )
    return cfg


def question(text: str = QUESTION) -> Question:
    return Question("q1", "c1", text, "-", "single_fact", ("-",))


def test_registered_and_off_by_default(embedder):
    assert SOURCE in candidate_sources()
    default, _ = load_config("default")
    assert default.cue_graph_top_k == 0 and not SOURCE.enabled(default)
    result = make_retriever(embedder).retrieve(question(), default)
    assert all("cue_graph" not in item.views for item in result.items + result.cut)


def test_spreading_activation_finds_what_plain_views_miss(embedder):
    retriever = make_retriever(embedder)
    plain = retriever.retrieve(question(), small_views())
    assert STAMPS not in [i.memory.content for i in plain.items + plain.cut]

    one_hop = retriever.retrieve(question(), small_views(cue_graph_top_k=5, cue_graph_steps=1))
    assert STAMPS not in [i.memory.content for i in one_hop.items + one_hop.cut]

    two_hops = retriever.retrieve(question(), small_views(cue_graph_top_k=5, cue_graph_steps=2))
    found = [i for i in two_hops.items if i.memory.content == STAMPS]
    assert found and set(found[0].views) == {"cue_graph"}  # only the graph found it, inside the context


def test_deterministic_across_retrievers(embedder):
    cfg = small_views(cue_graph_top_k=8, cue_graph_steps=3, cue_graph_beam=5)
    runs = [make_retriever(embedder).retrieve(question(), cfg) for _ in range(2)]
    a, b = ([(i.memory.memory_id, round(i.score, 12), i.views) for i in r.items + r.cut] for r in runs)
    assert a == b


def test_graph_is_built_once_per_index_state(embedder):
    retriever = make_retriever(embedder)
    cfg = small_views(cue_graph_top_k=5)
    retriever.retrieve(question(), cfg)
    cache = retriever._source_cache("cue_graph", retriever.index.state)
    graph = cache["graph"]
    retriever.retrieve(question("Which city does Agnieszka work in?"), cfg)
    assert retriever._source_cache("cue_graph", retriever.index.state)["graph"] is graph
    retriever.index.add([unit("Agnieszka sings in a jazz choir on Thursdays.", 20)])
    retriever.retrieve(question(), cfg)
    rebuilt = retriever._source_cache("cue_graph", retriever.index.state)["graph"]
    assert rebuilt is not graph and rebuilt.n_memories == len(TEXTS) + 1


def chain_state():
    """A - B - C linked by the cues y (A, B) and z (B, C); x is A's own, w is D's own."""
    tokens = [["x", "y"], ["y", "z"], ["z", "q"], ["w"]]
    memories = [SimpleNamespace(topics=()) for _ in tokens]
    return SimpleNamespace(memories=memories, token_lists=tokens, term_lists=[[] for _ in tokens])


def test_spread_follows_the_chain_hop_by_hop_with_decay():
    graph = build_graph(chain_state())
    seeds = graph.seeds(["x"], [])
    one, two, three = (spread(graph, seeds, steps, beam=5, decay=0.5) for steps in (1, 2, 3))
    assert np.flatnonzero(one).tolist() == [0]
    assert np.flatnonzero(two).tolist() == [0, 1]
    assert np.flatnonzero(three).tolist() == [0, 1, 2]
    assert three[0] > three[1] > three[2] > 0 and three[3] == 0  # D shares nothing
    weaker = spread(graph, seeds, 3, beam=5, decay=0.2)
    assert weaker[2] < three[2]  # lower decay carries less activation down the chain
    assert not spread(graph, graph.seeds(["unknown"], []), 3, 5, 0.5).any()


def test_beam_limits_the_frontier():
    graph = build_graph(chain_state())
    # seeds x and w: hop 1 activates A and D; D (one cue) is the stronger, so a beam of 1 keeps
    # only D, whose cue leads nowhere: B is never reached
    narrow = spread(graph, graph.seeds(["x", "w"], []), 2, beam=1, decay=0.5)
    assert np.flatnonzero(narrow).tolist() == [3]
    wide = spread(graph, graph.seeds(["x", "w"], []), 2, beam=5, decay=0.5)
    assert set(np.flatnonzero(wide).tolist()) == {0, 1, 3}


# ----------------------------------------------------------------------------- LLM traversal
# Real litellm → openai SDK → httpx against tests/fake_llm_server.py on 127.0.0.1. The scripted
# responders read the prompt our code rendered (ids, results, kept list) and answer from it.
ARCHITECT, SISTER_ROW, STAMPS_ROW = TEXTS[5], 5, 8


def llm_retriever(embedder: Embedder, server: FakeLLMServer) -> Retriever:
    index = ConversationIndex.build([unit(t, d) for d, t in enumerate(TEXTS, start=1)], embedder, SPEAKERS)
    client = LLMClient("openai/fake-model", api_base=server.url, cache=None, max_retries=0, timeout=10.0)
    return Retriever(index, embedder, known_persons=SPEAKERS, llm=client, sources=candidate_sources())


def llm_views(**changes):
    return small_views(**{"cue_graph_top_k": 5, "cue_graph_mode": "llm", **changes})


def cue_view(result) -> list[str]:
    """The cue_graph view's memories in its own rank order."""
    ranked = sorted(
        (i.views["cue_graph"], i.memory.content) for i in result.items + result.cut if "cue_graph" in i.views
    )
    return [content for _, content in ranked]


def prompts(server: FakeLLMServer) -> list[str]:
    return [last_user_message(body) for body in server.requests]


def shown_id(prompt: str, words: str) -> str:
    """The id of the memory whose result line in the prompt contains `words`."""
    results = prompt.split("Results of the last step:", 1)[1].split("Cues and tags", 1)[0]
    return re.search(rf"^  (m\d+) .*{words}", results, re.M).group(1)


def script(*replies):
    """A responder that plays `replies` in turn (each a function of the prompt, or a JSON value)."""
    turns = iter(replies)

    def respond(body: dict) -> str:
        reply = next(turns)
        value = reply(last_user_message(body)) if callable(reply) else reply
        return value if isinstance(value, str) else json.dumps(value)

    return respond


def test_llm_walk_follows_a_cue_and_its_kept_memories_lead_the_view(embedder, fake_llm):  # noqa: F811 - fixture
    fake_llm.responder = script(
        lambda p: {
            "calls": [{"tool": "memories", "cue": "Agnieszka"}, {"tool": "cues", "ids": [shown_id(p, "architect")]}]
        },
        lambda p: {"calls": [{"tool": "keep", "ids": [shown_id(p, "stamps"), shown_id(p, "architect")]}], "stop": True},
    )
    result = llm_retriever(embedder, fake_llm).retrieve(question(), llm_views(cue_graph_steps=4))
    first, second = prompts(fake_llm)
    assert fake_llm.request_count == 2  # stopped at step 2 of 4
    # step 1 starts from the offline activation of the question's own cues
    assert "m5 [2023-03-06] Tomasz's sister Agnieszka works as an architect in Krakow." in first
    assert "step 1 of 4" in first and "$" not in first
    # step 2 shows what the step-1 tools returned: the cue's memories and the memory's cues
    assert "- memories(Agnieszka):\n  m8 " in second and "  m5: " in second and "agnieszka [2]" in second
    assert "Already followed: memories(Agnieszka); cues(m5)" in second
    view = cue_view(result)
    assert view[:2] == [STAMPS, ARCHITECT]  # keep order, ahead of the activation ranking
    assert len(view) == 5  # filled up to cue_graph_top_k from the activation ranking
    offline = make_retriever(embedder).retrieve(question(), small_views(cue_graph_top_k=5))
    assert cue_view(offline)[0] == ARCHITECT  # so the order above is the model's, not activation's
    prompt_tokens = sum(count_tokens(message_text(m)) for body in fake_llm.requests for m in body["messages"])
    assert result.cost.calls == 2 and result.cost.prompt_tokens == prompt_tokens
    assert result.cost.completion_tokens > 0


def test_a_walk_that_never_stops_makes_exactly_steps_calls(embedder, fake_llm):  # noqa: F811 - fixture
    fake_llm.responder = lambda body: json.dumps({"calls": [{"tool": "search", "text": "hobby weekends"}]})
    retriever = llm_retriever(embedder, fake_llm)
    for steps in (1, 3):
        before = fake_llm.request_count
        result = retriever.retrieve(question(), llm_views(cue_graph_steps=steps))
        assert fake_llm.request_count - before == steps
        assert result.cost.calls == steps
    last = prompts(fake_llm)[-1]
    assert "step 3 of 3" in last and "- search(hobby weekends):\n  m13 " in last  # the birdwatching memory


def test_only_the_first_k_tool_calls_of_a_reply_run(embedder, fake_llm):  # noqa: F811 - fixture
    thirty = {"calls": [{"tool": "keep", "ids": [f"m{i}"]} for i in range(30)]}
    fake_llm.responder = script(thirty, {"calls": [], "stop": True})
    result = llm_retriever(embedder, fake_llm).retrieve(
        question(), llm_views(cue_graph_top_k=10, cue_graph_llm_calls=3, cue_graph_steps=2)
    )
    assert cue_view(result)[:3] == TEXTS[:3]
    second = prompts(fake_llm)[1]
    assert "(only the first 3 of your 30 calls were run)" in second
    kept = second.split("Kept so far:", 1)[1].split("Results of the last step:", 1)[0]
    assert re.findall(r"^m\d+", kept, re.M) == ["m0", "m1", "m2"]


def test_the_walk_ends_once_top_k_memories_are_kept(embedder, fake_llm):  # noqa: F811 - fixture
    fake_llm.responder = lambda body: json.dumps({"calls": [{"tool": "keep", "ids": ["m9", "m4", "m7", "m2"]}]})
    result = llm_retriever(embedder, fake_llm).retrieve(question(), llm_views(cue_graph_top_k=3, cue_graph_steps=5))
    assert fake_llm.request_count == 1
    assert cue_view(result) == [TEXTS[9], TEXTS[4], TEXTS[7]]


def test_a_step_that_only_keeps_leaves_the_earlier_results_open(embedder, fake_llm):  # noqa: F811 - fixture
    fake_llm.responder = script(
        lambda p: {"calls": [{"tool": "keep", "ids": [shown_id(p, "architect")]}]}, {"calls": [], "stop": True}
    )
    llm_retriever(embedder, fake_llm).retrieve(question(), llm_views(cue_graph_steps=2))
    results = prompts(fake_llm)[1].split("Results of the last step:", 1)[1].split("Cues and tags", 1)[0]
    assert results.startswith("\n- keep: m5\nStill open from before:\n  m8 [2023-03-09] Agnieszka collects")
    assert "  m5 " not in results  # the kept memory is listed under "Kept so far", not as open


@pytest.mark.parametrize(
    "replies, calls",
    [
        (["Sure, let me look that up.", "still not json"], 2),  # re-asked once, both billed
        ([{"calls": "memories(agnieszka)"}], 1),  # JSON, but not a list of calls
        ([{"calls": [{"tool": "teleport", "to": "m3"}, "keep m3"]}], 1),  # no valid call and no stop
        ([{"calls": []}], 1),  # nothing to do and no stop
        ([{"calls": [{"tool": "keep", "ids": ["m9"]}]}, [1, 2]], 2),  # garbage at step 2: step 1's keeps dropped too
    ],
)
def test_garbage_falls_back_to_activation_and_is_billed(embedder, fake_llm, replies, calls):  # noqa: F811 - fixture
    fake_llm.responder = script(*replies)
    failures = len(SOURCE.llm_failures)
    result = llm_retriever(embedder, fake_llm).retrieve(question(), llm_views(cue_graph_steps=3))
    offline = make_retriever(embedder).retrieve(question(), small_views(cue_graph_top_k=5))
    assert cue_view(result) == cue_view(offline)
    assert fake_llm.request_count == calls and result.cost.calls == calls
    assert len(SOURCE.llm_failures) == failures + 1 and "cue graph walk" in SOURCE.llm_failures[-1]


def test_a_failed_call_falls_back_to_activation(embedder, fake_llm):  # noqa: F811 - fixture
    fake_llm.fail_next(400)  # not retryable: the call gives up at once
    failures = len(SOURCE.llm_failures)
    result = llm_retriever(embedder, fake_llm).retrieve(question(), llm_views())
    offline = make_retriever(embedder).retrieve(question(), small_views(cue_graph_top_k=5))
    assert cue_view(result) == cue_view(offline) and result.cost.calls == 0
    assert "HTTP 400" in SOURCE.llm_failures[failures]


def test_llm_mode_needs_a_model_and_activation_mode_never_calls_one(embedder, fake_llm):  # noqa: F811 - fixture
    offline = cue_view(make_retriever(embedder).retrieve(question(), small_views(cue_graph_top_k=5)))
    no_model = make_retriever(embedder).retrieve(question(), llm_views())  # llm mode, offline roles
    assert cue_view(no_model) == offline and no_model.cost == Usage()
    with_model = llm_retriever(embedder, fake_llm).retrieve(question(), small_views(cue_graph_top_k=5))
    assert cue_view(with_model) == offline and fake_llm.request_count == 0


def test_tool_helpers():
    tokens = [["apple", "berry"], ["berry", "cherry"], ["cherry", "quince"], ["walnut"]]
    memories = [SimpleNamespace(topics=()) for _ in tokens]
    state = SimpleNamespace(
        memories=memories, token_lists=tokens, term_lists=[["ada lovelace"], ["ada lovelace"], [], []]
    )
    graph = build_graph(state)
    tools = GraphTools(graph, state)
    node = graph.node_of.__getitem__
    assert tools.resolve(" Ada  Lovelace") == [node("t:ada lovelace")]  # a tag by its name
    assert tools.resolve("BERRY") == [node("w:berry")]
    assert tools.resolve("the apple and the cherry") == sorted([node("w:apple"), node("w:cherry")])
    assert tools.resolve("nowhere") == []
    assert sorted(tools.cues_of(1)) == sorted([node("w:berry"), node("w:cherry"), node("t:ada lovelace")])
    assert tools.cues_of(3) == []  # walnut is one memory's alone: it leads nowhere
    assert np.flatnonzero(tools.memory_scores([node("w:cherry")])).tolist() == [1, 2]
    assert parse_ids(["m2", 1, "3", "m9", "x", True, "m2"], 4) == ([2, 1, 3], ["m9", "x", "True"])
    view = kept_first("cue_graph", [3, 1], np.array([0.0, 0.9, 0.5, 0.0]), 3)
    assert view.rows.tolist() == [3, 1, 2] and list(view.scores) == sorted(view.scores, reverse=True)
