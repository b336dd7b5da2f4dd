"""Scene-guided retrieval: episodes, scenes, the `scene` view and the sufficiency rewrites.

Real parts only: the bundled all-MiniLM-L6-v2 model, bm25s, a real ConversationIndex and
Retriever over invented memories."""
from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from evolvemem.data.models import Question
from evolvemem.mechanisms.scenes import SOURCE, build_episodes, cluster_scenes
from evolvemem.memory.unit import MemoryUnit, make_memory_id
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.retrieval.extensions import SOURCE_MODULES
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
QUESTION = Question("q1", "c1", "What did Priya Raman enjoy most about her surfing trip?", "sardines",
                    "single_fact", ("D9:3",))
PLAIN = dict(semantic_top_k=6, keyword_top_k=6, structured_top_k=0, enable_entity_swap=False,
             importance_weight=0.0, max_context=30)


def memories() -> list[MemoryUnit]:
    units = [MemoryUnit(make_memory_id("c1", t), "c1", t, session_id="s_trip", timestamp=datetime(2023, 6, 10, 10, i),
                        source_turn_ids=(f"D9:{i}",)) for i, t in enumerate(TRIP)]
    units += [MemoryUnit(make_memory_id("c1", t), "c1", t, session_id=f"s{j}", timestamp=datetime(2022, 1 + j, 1),
                         source_turn_ids=(f"D{j}:1",)) for j, t in enumerate(OTHER)]
    return units


@pytest.fixture(scope="module")
def retriever() -> Retriever:
    embedder = Embedder()
    return Retriever(ConversationIndex.build(memories(), embedder, PERSONS), embedder, known_persons=PERSONS)


def config(**changes):
    base, _ = load_config("default")
    cfg, _ = base.with_changes({**PLAIN, **changes})
    return cfg


def contents(result, label: str | None = None) -> list[str]:
    return [i.memory.content for i in result.items if label is None or label in i.views]


def test_registered_and_off_by_default(retriever):
    assert "evolvemem.mechanisms.scenes" in SOURCE_MODULES
    default, _ = load_config("default")
    assert default.scene_top_k == 0 and not SOURCE.enabled(default)
    result = retriever.retrieve(QUESTION, default)
    assert not any(label.startswith("scene") for item in result.items for label in item.views)


def test_episodes_follow_sessions_and_scenes_respect_time(retriever):
    state = retriever.index.state
    episodes = build_episodes(state)
    trip_rows = {state.row_of_id[make_memory_id("c1", t)] for t in TRIP}
    of_row = episodes.groups.of_row
    assert all(len({of_row[r] for r in trip_rows} & {of_row[state.row_of_id[make_memory_id("c1", t)]]}) <= 1
               for t in OTHER)  # no episode spans two sessions
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
    first = [(i.memory.memory_id, round(i.score, 12), tuple(sorted(i.views.items())))
             for i in retriever.retrieve(QUESTION, cfg).items]
    fresh = Retriever(ConversationIndex.build(memories(), retriever.embedder, PERSONS), retriever.embedder,
                      known_persons=PERSONS)
    again = [(i.memory.memory_id, round(i.score, 12), tuple(sorted(i.views.items())))
             for i in fresh.retrieve(QUESTION, cfg).items]
    assert first == again
    state = retriever.index.state
    a = cluster_scenes(build_episodes(state), 0.7, 7.0)
    b = cluster_scenes(build_episodes(state), 0.7, 7.0)
    assert np.array_equal(a.of_row, b.of_row)
