"""Multi-view retrieval: views, fusion math, ranking terms, context budget, augmentation, caches.

Real parts only: the bundled all-MiniLM-L6-v2 model, bm25s and the rule annotator, over a small
invented conversation."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime

import numpy as np
import pytest

from evolvemem.data.models import Question
from evolvemem.errors import ConfigError
from evolvemem.contracts.memory import MemoryUnit, make_memory_id
from evolvemem.retrieval.decompose import RuleDecomposer
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.retrieval.fusion import ViewHits, final_scores, fuse, recency, top_k
from evolvemem.retrieval.index import ConversationIndex, KeywordIndex, to_days
from evolvemem.retrieval.retriever import Retriever
from evolvemem.contracts.usage import Usage
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
    "A recording of the coral reef talk from Lisbon went online.",
    "Priya Raman repainted her kitchen a pale yellow colour.",
    "Tomasz fixed the leaking tap in his bathroom.",
    "Priya Raman planted tomatoes and basil on her balcony.",
]
CELLO, LISBON, SOURDOUGH, KRAKOW, CORAL_TALK = 1, 2, 3, 5, 8


def memory(text: str, day: int, **fields) -> MemoryUnit:
    return MemoryUnit(
        make_memory_id("c1", text, fields.pop("salt", "")),
        "c1",
        text,
        timestamp=datetime(2023, 3, day),
        source_turn_ids=(f"D1:{day}",),
        **fields,
    )


def memories() -> list[MemoryUnit]:
    return [memory(text, day) for day, text in enumerate(TEXTS, start=1)]


def question(text: str, date: datetime | None = None, qtype: str = "single_fact") -> Question:
    return Question("q1", "c1", text, "4", qtype, ("-",), question_date=date)


def config(**changes):
    """The default preset with `changes`; importance off so scores are pure fusion unless asked."""
    base, _ = load_config("default")
    cfg, _ = base.with_changes({"importance_weight": 0.0, **changes})
    return cfg


KEYWORD_ONLY = dict(semantic_top_k=0, structured_top_k=0, keyword_top_k=3)


class CountingModel:
    """Wraps the real encoder (either backend) and counts the sentence texts that reach it."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.calls = 0
        self.texts: list[str] = []

    def sentences(self, texts, batch_size):
        self.calls += 1
        self.texts.extend(texts)
        return self.encoder.sentences(texts, batch_size)

    def sentences_and_tokens(self, texts, batch_size):  # an index's one pass for both kinds of vector
        self.calls += 1
        self.texts.extend(texts)
        return self.encoder.sentences_and_tokens(texts, batch_size)

    def __getattr__(self, name):
        return getattr(self.encoder, name)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def retriever(embedder) -> Retriever:
    index = ConversationIndex.build(memories(), embedder, known_persons=SPEAKERS)
    return Retriever(index, embedder, decomposer=RuleDecomposer(), known_persons=SPEAKERS)


def contents(result) -> list[str]:
    return [item.memory.content for item in result.items]


def candidates(result) -> set[str]:
    return {item.memory.content for item in (*result.items, *result.cut)}


# ------------------------------------------------------------------------------------- views


def test_semantic_view_alone_finds_a_paraphrase(retriever):
    result = retriever.retrieve(
        question("Who plays a string instrument?"), config(semantic_top_k=3, keyword_top_k=0, structured_top_k=0)
    )
    assert result.items[0].memory.content == TEXTS[CELLO]
    assert all(set(item.views) == {"semantic"} for item in result.items)
    assert len(result.items) == 3


def test_keyword_view_alone_finds_exact_terms(retriever):
    result = retriever.retrieve(question("sourdough with rye"), config(**KEYWORD_ONLY))
    assert contents(result) == [TEXTS[SOURDOUGH]]  # BM25 returns only rows that match a term
    assert result.items[0].views == {"keyword": 1}


def test_structured_view_alone_matches_places(retriever):
    result = retriever.retrieve(
        question("Who lives in Krakow?"), config(semantic_top_k=0, keyword_top_k=0, structured_top_k=3)
    )
    assert contents(result) == [TEXTS[KRAKOW]]
    assert result.items[0].views == {"structured": 1}


def test_structured_view_uses_memory_annotations(embedder):
    units = [memory("We met at the usual place.", 1, locations=("lisbon",)), memory("Another day at work.", 2)]
    index = ConversationIndex.build(units, embedder, known_persons=SPEAKERS)
    result = Retriever(index, embedder).retrieve(
        question("What happened in Lisbon?"), config(semantic_top_k=0, keyword_top_k=0, structured_top_k=3)
    )
    assert contents(result) == ["We met at the usual place."]


def test_views_turned_off_with_zero(retriever):
    result = retriever.retrieve(
        question("Where did Priya Raman fly for the conference?"),
        config(semantic_top_k=0, keyword_top_k=5, structured_top_k=3),
    )
    labels = {label for item in (*result.items, *result.cut) for label in item.views}
    assert "semantic" not in labels and "keyword" in labels
    nothing = retriever.retrieve(
        question("Where did Priya Raman fly?"), config(semantic_top_k=0, keyword_top_k=0, structured_top_k=0)
    )
    assert nothing.items == () and nothing.cut == ()


# ------------------------------------------------------------------------------------- fusion math

VIEW_A = ViewHits("a", np.array([2, 0, 1]), np.array([3.0, 2.0, 1.0]), weight=2.0)
VIEW_B = ViewHits("b", np.array([1, 3]), np.array([0.8, 0.4]), weight=1.0)


def test_fusion_sum_by_hand():
    rows, fused = fuse([VIEW_A, VIEW_B], "sum")
    # a min-max: row2 1, row0 0.5, row1 0; b: row1 1, row3 0 -> totals 0.5, 1, 1, 0; max 1
    assert rows.tolist() == [0, 1, 2, 3]
    assert fused.tolist() == pytest.approx([0.5, 1.0, 1.0, 0.0])


def test_fusion_weighted_sum_by_hand():
    rows, fused = fuse([VIEW_A, VIEW_B], "weighted_sum")
    # a x2: row2 2, row0 1, row1 0; b x1: row1 1, row3 0 -> 1, 1, 2, 0; divided by 2
    assert fused.tolist() == pytest.approx([0.5, 0.5, 1.0, 0.0])


def test_fusion_rrf_by_hand():
    rows, fused = fuse([VIEW_A, VIEW_B], "rrf", rrf_k=10)
    raw = {0: 2 / 12, 1: 2 / 13 + 1 / 11, 2: 2 / 11, 3: 1 / 12}
    top = max(raw.values())
    assert fused.tolist() == pytest.approx([raw[r] / top for r in range(4)])


def test_final_score_adds_ranking_terms():
    fused = np.array([1.0, 0.5])
    score = final_scores(
        fused,
        np.array([0.2, 0.9]),
        np.array([0.0, 1.0]),
        np.array([1.0, 0.0]),
        importance_weight=0.5,
        recency_weight=0.25,
        reinforcement_weight=0.1,
    )
    assert score.tolist() == pytest.approx([1.0 + 0.1 + 0.0 + 0.1, 0.5 + 0.45 + 0.25 + 0.0])


def test_keyword_scores_extended_by_more_terms_equal_scoring_the_whole_query_bit_for_bit():
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(60)]
    docs = [list(rng.choice(words, size=int(rng.integers(3, 25)))) for _ in range(300)]
    index = KeywordIndex.build(docs)
    for _ in range(50):
        first = [int(i) for i in rng.integers(0, len(index.id_to_token), size=int(rng.integers(0, 8)))]
        more = [int(i) for i in rng.integers(0, len(index.id_to_token), size=int(rng.integers(1, 6)))]
        grown = index.extended(index.scores(first, len(docs)), more)
        assert np.array_equal(grown, index.scores(first + more, len(docs)))
        assert grown.dtype == index.scores(first + more, len(docs)).dtype


def test_top_k_breaks_ties_by_row_and_drops_non_matches():
    hits = top_k("v", np.array([0.5, 0.9, 0.5, 0.0, 0.5]), 3)
    assert hits.rows.tolist() == [1, 0, 2]
    sparse = top_k("v", np.array([0.0, 2.0, 0.0]), 3, positive_only=True)
    assert sparse.rows.tolist() == [1]


def test_fusion_mode_and_weights_are_honoured_end_to_end(retriever):
    q = question("What did Tomasz bake for the neighbours?")

    def scores(mode, semantic_weight, keyword_weight):
        r = retriever.retrieve(
            q, config(fusion_mode=mode, semantic_weight=semantic_weight, keyword_weight=keyword_weight)
        )
        assert r.items[0].memory.content == TEXTS[SOURDOUGH]
        return {i.memory.memory_id: round(i.score, 6) for i in (*r.items, *r.cut)}

    assert scores("sum", 2.5, 0.1) == scores("sum", 0.1, 2.5)  # plain sum ignores the weights
    assert scores("weighted_sum", 2.5, 0.1) != scores("weighted_sum", 0.1, 2.5)
    assert scores("rrf", 2.5, 0.1) != scores("rrf", 0.1, 2.5)
    assert scores("rrf", 1.0, 1.0) != scores("sum", 1.0, 1.0)


# ------------------------------------------------------------------------------------- ranking


def test_recency_half_life_math():
    days = np.array([10.0, 0.0, np.nan, 20.0])
    assert recency(days, 10.0, 5.0).tolist() == pytest.approx([1.0, 0.25, 0.0, 1.0])
    assert recency(days, 10.0, None).tolist() == [0.0] * 4
    assert recency(days, None, 5.0).tolist() == [0.0] * 4


def test_recency_reorders_equal_memories(embedder):
    text = "Priya Raman moved into a flat near the river."
    old = memory(text, 1, salt="old")
    new = memory(text, 21, salt="new")
    index = ConversationIndex.build([old, new], embedder, known_persons=SPEAKERS)
    r = Retriever(index, embedder, known_persons=SPEAKERS)
    q = question("Where did Priya Raman move?", date=datetime(2023, 3, 31))
    plain = r.retrieve(q, config(fusion_mode="sum"))  # (rrf would rank the twins 1 and 2)
    assert [i.memory.memory_id for i in plain.items] == [old.memory_id, new.memory_id]  # tie: row order
    recent = r.retrieve(q, config(fusion_mode="sum", recency_weight=0.5, time_decay_half_life_days=10.0))
    assert [i.memory.memory_id for i in recent.items] == [new.memory_id, old.memory_id]
    gap = recent.items[0].score - recent.items[1].score
    assert gap == pytest.approx(0.5 * (0.5 ** (10 / 10) - 0.5 ** (30 / 10)))


def test_importance_and_reinforcement_come_from_the_memory(embedder):
    text = "Tomasz repaired his old bicycle."
    plain, important = memory(text, 1, salt="a"), memory(text, 2, salt="b", importance=1.0, reinforcement=1.0)
    index = ConversationIndex.build([plain, important], embedder)
    r = Retriever(index, embedder)
    result = r.retrieve(
        question("What did Tomasz repair?"), config(fusion_mode="sum", importance_weight=0.2, reinforcement_weight=0.3)
    )
    assert result.items[0].memory.memory_id == important.memory_id
    assert result.items[0].score - result.items[1].score == pytest.approx(0.2 * 0.5 + 0.3 * 1.0)


def test_query_time_reinforcement_rewards_shared_entities(embedder):
    """+0.05 per entity shared with the query, capped at 0.30, only when the weight is on."""
    a = memory("Tomasz cooked dinner in Lisbon with Ines.", 1, salt="a")
    b = memory("Tomasz cooked dinner.", 2, salt="b")
    index = ConversationIndex.build([a, b], embedder, known_persons=("Tomasz", "Ines"))
    r = Retriever(index, embedder, known_persons=("Tomasz", "Ines"))
    q = question("Did Tomasz cook with Ines in Lisbon?")
    off = r.retrieve(q, config(fusion_mode="sum", reinforcement_weight=0.0))
    on = r.retrieve(q, config(fusion_mode="sum", reinforcement_weight=1.0))
    gap = lambda res: {i.memory.memory_id: i.score for i in res.items}
    g_off, g_on = gap(off), gap(on)
    extra_a = g_on[a.memory_id] - g_off[a.memory_id]
    extra_b = g_on[b.memory_id] - g_off[b.memory_id]
    assert extra_a > extra_b >= 0.05 - 1e-6
    assert extra_a <= 0.30 + 1e-6


def test_max_context_cuts_and_reports_the_cut(retriever):
    result = retriever.retrieve(
        question("What did Priya Raman do?"), config(max_context=6, semantic_top_k=12, keyword_top_k=12)
    )
    assert len(result.items) == 6
    assert len(result.cut) == len(TEXTS) - 6
    assert [i.rank for i in result.items] == [1, 2, 3, 4, 5, 6]
    assert [i.rank for i in result.cut] == list(range(7, len(TEXTS) + 1))
    assert min(i.score for i in result.items) >= max(i.score for i in result.cut)


def test_chronological_context_order(retriever):
    q = question("What did Priya Raman do?")
    by_score = retriever.retrieve(q, config(max_context=6))
    by_time = retriever.retrieve(q, config(max_context=6, context_order="chronological"))
    assert {i.memory.memory_id for i in by_time.items} == {i.memory.memory_id for i in by_score.items}
    stamps = [i.memory.timestamp for i in by_time.items]
    assert stamps == sorted(stamps) and stamps != [i.memory.timestamp for i in by_score.items]


# ------------------------------------------------------------------------------------- augmentation


def test_entity_swap_finds_what_a_name_mismatched_question_misses(retriever):
    q = question("Which string instrument does Priya Raman play?")
    without = retriever.retrieve(q, config(**KEYWORD_ONLY))
    assert TEXTS[CELLO] not in candidates(without)
    with_swap = retriever.retrieve(
        q, config(**KEYWORD_ONLY, enable_entity_swap=True, entity_swap_semantic_top_k=3, entity_swap_keyword_top_k=3)
    )
    cello = next(i for i in with_swap.items if i.memory.content == TEXTS[CELLO])
    assert "swap_semantic" in cello.views


def test_decomposition_merges_sub_query_candidates(retriever):
    q = question("What did Tomasz bake and where did Priya Raman fly?")
    cfg = config(
        semantic_top_k=0,
        structured_top_k=0,
        keyword_top_k=3,
        enable_query_decomposition=True,
        decomposition_merge_top_k=3,
    )
    result = retriever.retrieve(q, cfg)
    assert result.sub_queries == ("What did Tomasz bake", "where did Priya Raman fly")
    found = {i.memory.content: i.views for i in result.items}
    assert "sub_query" in found[TEXTS[SOURDOUGH]] and "sub_query" in found[TEXTS[LISBON]]


class ScriptedDecomposer:
    """A real (tiny) Decomposer: fixed sub-queries at a fixed price."""

    name = "scripted"

    def __init__(self, sub_queries):
        self.sub_queries = list(sub_queries)
        self.calls = 0

    def decompose(self, text, max_sub_queries):
        self.calls += 1
        return self.sub_queries[:max_sub_queries], Usage(calls=1, prompt_tokens=40, completion_tokens=8)


def test_decomposition_adds_memories_and_reports_cost_once(embedder):
    decomposer = ScriptedDecomposer(["the question itself", "sourdough bread", "leaking tap"])
    index = ConversationIndex.build(memories(), embedder, known_persons=SPEAKERS)
    r = Retriever(index, embedder, decomposer=decomposer, known_persons=SPEAKERS)
    q = question("the question itself")
    cfg = config(**KEYWORD_ONLY, enable_query_decomposition=True, max_sub_queries=3)
    plain = r.retrieve(q, config(**KEYWORD_ONLY))
    assert plain.items == () and plain.sub_queries == ()
    first = r.retrieve(q, cfg)
    assert first.sub_queries == ("sourdough bread", "leaking tap")  # the question itself is dropped
    by_content = {i.memory.content: i.views for i in first.items}
    # each sub-query searches the semantic and keyword views, even when the question's own are off
    assert by_content[TEXTS[SOURDOUGH]].get("sub_query") == 1 and "sub_query" in by_content[TEXTS[10]]
    assert all(set(views) == {"sub_query"} for views in by_content.values())
    assert first.cost == Usage(calls=1, prompt_tokens=40, completion_tokens=8)
    second = r.retrieve(q, cfg)
    assert second.cost == Usage(cache_hits=1) and decomposer.calls == 1


def test_prepare_decomposes_and_embeds_up_front(embedder):
    decomposer = ScriptedDecomposer(["sourdough bread", "leaking tap"])
    index = ConversationIndex.build(memories(), embedder, known_persons=SPEAKERS)
    r = Retriever(index, embedder, decomposer=decomposer, known_persons=SPEAKERS)
    run_config = config(per_category_overrides={"multi_hop": {"enable_query_decomposition": True}})
    questions = [question("What did Tomasz make?", qtype="multi_hop"), question("Where is Krakow?")]
    r.prepare(questions, run_config)
    assert decomposer.calls == 1  # only the multi_hop question decomposes
    assert {"sourdough bread", "leaking tap", "What did Tomasz make?", "Where is Krakow?"} <= set(r._vectors)
    result = r.retrieve(questions[0], run_config.for_type("multi_hop"))
    assert result.cost.calls == 1 and decomposer.calls == 1


def test_reflection_adds_a_memory_linked_by_salient_terms(retriever):
    q = question("Where did Priya Raman fly for the conference?")
    without = retriever.retrieve(q, config(**KEYWORD_ONLY))
    assert TEXTS[CORAL_TALK] not in candidates(without)
    reflected = retriever.retrieve(q, config(**KEYWORD_ONLY, reflection_rounds=2))
    talk = next(i for i in (*reflected.items, *reflected.cut) if i.memory.content == TEXTS[CORAL_TALK])
    assert set(talk.views) == {"reflection"}


def test_retrieval_is_deterministic(embedder, retriever):
    q = question("What did Tomasz and Priya Raman do in March?")
    cfg = config(enable_entity_swap=True, reflection_rounds=1, enable_query_decomposition=True)
    first, second = retriever.retrieve(q, cfg), retriever.retrieve(q, cfg)
    rebuilt = Retriever(
        ConversationIndex.build(memories(), embedder, known_persons=SPEAKERS),
        embedder,
        decomposer=RuleDecomposer(),
        known_persons=SPEAKERS,
    ).retrieve(q, cfg)
    for other in (second, rebuilt):
        assert [(i.memory.memory_id, i.score, i.views) for i in other.items] == [
            (i.memory.memory_id, i.score, i.views) for i in first.items
        ]


def test_empty_index_returns_nothing(embedder):
    index = ConversationIndex.build([], embedder)
    assert Retriever(index, embedder).retrieve(question("Anything?"), config()).items == ()


# ------------------------------------------------------------------------------------- embeddings and index


def test_embeddings_are_normalised_and_cached_on_disk(tmp_path):
    texts = [
        "Priya Raman keeps bees on the roof.",
        "Tomasz collects vinyl records.",
        "Priya Raman keeps bees on the roof.",
    ]
    first = Embedder(cache_root=tmp_path)
    counting = CountingModel(first.encoder)
    first._encoder = counting
    vectors = first.encode(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert counting.calls == 1 and len(counting.texts) == 2  # the duplicate was embedded once
    again = first.encode(texts[:2])
    assert counting.calls == 1 and np.array_equal(again, vectors[:2])

    fresh = Embedder(cache_root=tmp_path)  # a new process: reads the disk cache, never loads the model
    assert np.array_equal(fresh.encode(texts), vectors)
    assert fresh._encoder is None and fresh.texts_embedded == 0


def test_embedding_cache_compacts_many_shards(tmp_path):
    writer = Embedder(cache_root=tmp_path)
    texts = [f"Tomasz walked {n} kilometres along the coast." for n in range(10)]
    for text in texts:  # one shard per call
        writer.encode([text])
    folder = next(tmp_path.iterdir())
    assert len(list(folder.glob("*.keys.npy"))) == 10
    reader = Embedder(cache_root=tmp_path)
    assert np.array_equal(reader.encode(texts), writer.encode(texts))
    assert len(list(folder.glob("*.keys.npy"))) == 1 and reader._encoder is None


def test_unknown_embedding_model_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError) as err:
        Embedder("no-such-org/no-such-embedding-model", cache_root=tmp_path).encode(["hello"])
    assert "no-such-org/no-such-embedding-model" in str(err.value) and "\n" not in str(err.value)


def test_index_add_keeps_old_embeddings_and_embeds_only_new(tmp_path):
    emb = Embedder(cache_root=tmp_path)
    index = ConversationIndex.build(memories(), emb, known_persons=SPEAKERS)
    old_vectors = index.embeddings.copy()
    counting = CountingModel(emb.encoder)
    emb._encoder = counting
    new = memory("Tomasz joined a rowing club on the Vistula.", 20)
    assert index.add([new, memories()[0]]) == 1  # a known id is not added twice
    assert counting.texts == [new.content]
    assert np.array_equal(index.embeddings[: len(TEXTS)], old_vectors)
    assert len(index) == len(TEXTS) + 1
    r = Retriever(index, emb, known_persons=SPEAKERS)
    assert contents(r.retrieve(question("rowing club"), config(**KEYWORD_ONLY))) == [new.content]


def test_to_days_handles_naive_aware_and_missing():
    assert to_days(datetime(1970, 1, 2)) == 1.0
    assert math.isnan(to_days(None))
    from datetime import timezone, timedelta

    assert to_days(datetime(1970, 1, 2, 2, tzinfo=timezone(timedelta(hours=2)))) == 1.0


def test_question_date_and_config_change_nothing_else(retriever):
    q = question("What did Tomasz bake?")
    dated = replace(q, question_date=datetime(2023, 4, 1))
    cfg = config()
    assert [i.memory.memory_id for i in retriever.retrieve(q, cfg).items] == [
        i.memory.memory_id for i in retriever.retrieve(dated, cfg).items
    ]  # recency is off by default


def test_concurrent_retrieval_matches_sequential(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    emb = Embedder(cache_root=tmp_path)
    index = ConversationIndex.build(memories(), emb, known_persons=SPEAKERS)
    counting = CountingModel(emb.encoder)
    emb._encoder = counting
    questions = [question(f"What did Tomasz do on day {n} of the trip?") for n in range(12)] * 2
    cfg = config(enable_entity_swap=True, reflection_rounds=1)

    def ids(r, q):
        return [(i.memory.memory_id, i.score) for i in r.retrieve(q, cfg).items]

    concurrent_retriever = Retriever(index, emb, known_persons=SPEAKERS)  # unprepared: embeds on demand
    with ThreadPoolExecutor(max_workers=6) as pool:
        concurrent = list(pool.map(lambda q: ids(concurrent_retriever, q), questions))
    sequential_retriever = Retriever(index, emb, known_persons=SPEAKERS)
    assert concurrent == [ids(sequential_retriever, q) for q in questions]
    assert len(counting.texts) == len(set(counting.texts)) == 24  # 12 questions + 12 name-stripped forms, once each


def test_torch_threads_setting(monkeypatch):
    from evolvemem.retrieval.embeddings import THREADS_ENV, torch_threads

    monkeypatch.setenv(THREADS_ENV, "3")
    assert torch_threads() == 3
    monkeypatch.setenv(THREADS_ENV, "many")
    with pytest.raises(ConfigError, match=THREADS_ENV):
        torch_threads()
