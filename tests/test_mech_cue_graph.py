"""Cue–tag–content graph: spreading activation reaches a memory linked to the question only
through a shared cue. Real parts: the bundled MiniLM model, bm25s, the rule annotator."""
from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

import numpy as np
import pytest

from evolvemem.data.models import Question
from evolvemem.memory import nlp
from evolvemem.memory.unit import MemoryUnit, make_memory_id
from evolvemem.mechanisms.cue_graph import SOURCE, build_graph, spread
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.retrieval.extensions import candidate_sources
from evolvemem.retrieval.index import ConversationIndex
from evolvemem.retrieval.retriever import Retriever
from evolvemem.space.config import load_config

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
    return MemoryUnit(make_memory_id("c1", text), "c1", text, timestamp=datetime(2023, 3, day),
                      source_turn_ids=(f"D1:{day}",), persons=found.persons, locations=found.locations,
                      entities=found.entities, topics=found.topics, keywords=found.keywords)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def make_retriever(embedder: Embedder) -> Retriever:
    index = ConversationIndex.build([unit(t, d) for d, t in enumerate(TEXTS, start=1)], embedder, SPEAKERS)
    return Retriever(index, embedder, known_persons=SPEAKERS)


def small_views(**changes):
    """Narrow plain views (3 candidates each, 6 in the context) plus `changes`."""
    base, _ = load_config("default")
    cfg, _ = base.with_changes({"semantic_top_k": 3, "keyword_top_k": 3, "structured_top_k": 3,
                                "max_context": 6, **changes})
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
