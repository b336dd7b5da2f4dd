"""Levers that reorder what fits a token budget: late interaction, the session prior, the neighbour
term and the person focus; a budget the context fills; the rubric proposing such moves; and
`evolve eval --context-tokens`.

Real parts: the bundled all-MiniLM-L6-v2 model, its token vectors, bm25s and the rule annotator,
over small invented conversations; the CLI test runs the real `evolve` entry point."""

from __future__ import annotations

from evolvemem.space.config import RetrievalConfig

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evolvemem.space.changes import Change
from evolvemem.contracts.diagnosis import DiagnosisInput, HistoryEntry, ScoreSummary
from evolvemem.contracts.memory import content_hash
from evolvemem.diagnosers.rubric import RubricDiagnoser
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.retrieval.index import ConversationIndex
from evolvemem.retrieval.late_interaction import LateIndex
from evolvemem.retrieval.retriever import Retriever, context_tokens
from evolvemem.retrieval.token_vectors import TokenVectors, content_piece
from evolvemem.space.budget import TokenBudget
from evolvemem.space.config import load_config
from evolvemem.space.action_space import files_space

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_retrieval import SPEAKERS, TEXTS, config, contents, memories, memory, question  # noqa: E402

PEOPLE = ("Orla", "Tomasz", "Priya Raman")
KEYWORD_SUM = dict(semantic_top_k=0, keyword_top_k=5, structured_top_k=0, fusion_mode="sum")


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def order(embedder: Embedder, texts: list[str], sessions: list[str], query: str, **changes) -> list[int]:
    """Positions (in `texts`) of the context's memories, best first, keyword view with sum fusion."""
    units = [memory(text, day, session_id=session) for day, (text, session) in enumerate(zip(texts, sessions), 1)]
    retriever = Retriever(
        ConversationIndex.build(units, embedder, known_persons=PEOPLE), embedder, known_persons=PEOPLE
    )
    result = retriever.retrieve(question(query), config(**KEYWORD_SUM, **changes))
    return [texts.index(text) for text in contents(result)]


# ------------------------------------------------------------------------------ late interaction


def test_maxsim_ranks_an_exact_token_match_above_a_closer_average():
    """Hand-made unit vectors: memory A holds the query's token among two unrelated ones, memory B
    one token half-way between the query and another direction. Mean-pooled, B is closer (0.71 vs
    0.58); by MaxSim, A is (1.0 vs 0.71) — late interaction must reorder them."""
    e = np.eye(4, dtype=np.float32)
    a = e[[0, 1, 2]]
    b = ((e[0] + e[3]) / np.sqrt(2)).reshape(1, 4)
    query = e[[0]]
    pooled = [float(np.mean(m, axis=0) @ query[0] / np.linalg.norm(np.mean(m, axis=0))) for m in (a, b)]
    assert pooled[1] > pooled[0]
    scores = LateIndex([a, b], 4).scores([query])[0]
    assert scores[0] == pytest.approx(1.0) and scores[1] == pytest.approx(1 / np.sqrt(2), rel=1e-5)


def test_maxsim_averages_over_query_vectors_and_batches_agree():
    rng = np.random.default_rng(0)
    docs = [rng.normal(size=(n, 8)).astype(np.float32) for n in (3, 1, 5, 2)]
    docs = [d / np.linalg.norm(d, axis=1, keepdims=True) for d in docs]
    queries = [rng.normal(size=(m, 8)).astype(np.float32) for m in (2, 4, 1)]
    expected = [np.array([np.mean([max(float(q @ t) for t in d) for q in qs]) for d in docs]) for qs in queries]
    together = LateIndex(docs, 8).scores(queries)
    alone = [LateIndex(docs, 8).scores([qs])[0] for qs in queries]
    for got, solo, want in zip(together, alone, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5)
        np.testing.assert_allclose(solo, want, rtol=1e-5)


def test_question_pieces_keep_content_words_only():
    stop = frozenset({"what", "did", "the"})
    assert [p for p in ["what", "did", "the", "harm", "##onium", "?", "Ġkiln", "▁the"] if content_piece(p, stop)] == [
        "harm",
        "##onium",
        "Ġkiln",
    ]


def test_token_vectors_are_cached_on_disk_by_content(embedder, tmp_path):
    texts = ["Orla fixed the lighthouse lantern.", "Tomasz baked rye bread."]
    first = TokenVectors(embedder, tmp_path)
    vectors = first.of_memories(texts)
    assert first.texts_encoded == 2 and all(v.shape[1] == embedder.dimension for v in vectors)
    np.testing.assert_allclose(np.linalg.norm(vectors[0], axis=1), 1.0, rtol=1e-3)
    again = TokenVectors(embedder, tmp_path)  # a new process reading the same cache
    reread = again.of_memories(texts[::-1])
    assert again.texts_encoded == 0
    np.testing.assert_allclose(reread[1], vectors[0], atol=1e-3)
    queries = again.of_queries(["What did Orla fix?"])
    assert 1 <= len(queries[0]) <= 4  # "orla", "fix" (and word pieces), not "what" / "did" / "?"


def test_evaluation_keeps_question_vectors_on_disk_and_a_server_does_not(embedder, tmp_path):
    asked = ["What did Orla fix?", "When did Tomasz bake rye bread?"]
    first = TokenVectors(embedder, tmp_path)
    vectors = first.of_queries(asked)
    assert first.queries_encoded == 2
    later = TokenVectors(embedder, tmp_path)  # the next run over the same questions
    again = later.of_queries(asked[::-1] + ["Who repaired the lantern?"])
    assert later.queries_encoded == 1  # only the new question reaches the model
    np.testing.assert_array_equal(again[1], vectors[0])  # the vectors used, bit for bit
    np.testing.assert_array_equal(again[0], vectors[1])

    forwarded: list[str] = []

    def server_forward(texts: list[str]) -> list[np.ndarray]:
        forwarded.extend(texts)
        return embedder.encoder.token_outputs(texts, 8)

    served = TokenVectors(embedder, tmp_path / "served", server_forward)
    served.of_queries(["What did Orla fix?"])
    assert forwarded == ["What did Orla fix?"]
    assert not any((tmp_path / "served").rglob("*.npy"))  # a server leaves no file per query

    later.forget({content_hash("What did Orla fix?").encode("ascii")})
    fresh = TokenVectors(embedder, tmp_path)
    fresh.of_queries(asked)
    assert fresh.queries_encoded == 1  # the forgotten question is gone from disk, the other is not


def test_the_late_view_runs_in_the_retriever_and_labels_its_candidates(embedder):
    retriever = Retriever(
        ConversationIndex.build(memories(), embedder, known_persons=SPEAKERS), embedder, known_persons=SPEAKERS
    )
    q = question("Which talk about reefs was put online?")
    retriever.prepare([q], config(late_top_k=3))  # batch-scored up front
    result = retriever.retrieve(q, config(semantic_top_k=0, keyword_top_k=0, structured_top_k=0, late_top_k=3))
    assert contents(result)[0] == TEXTS[8]
    assert all(set(item.views) == {"late"} for item in result.items) and len(result.items) == 3


# ------------------------------------------------------------------------------ ranking terms


def test_session_prior_lifts_the_sessions_best_match_companion(embedder):
    texts = [
        "Orla fixed the lighthouse lantern and the lighthouse door.",
        "Orla painted a lantern blue.",
        "Lantern festival.",
    ]
    sessions = ["s1", "s1", "s2"]
    assert order(embedder, texts, sessions, "lighthouse lantern") == [0, 2, 1]
    assert order(embedder, texts, sessions, "lighthouse lantern", session_prior_weight=1.0) == [0, 1, 2]


def test_neighbour_term_lifts_the_memory_next_to_the_best_match(embedder):
    texts = [
        "Orla fixed the lighthouse lantern and the lighthouse door.",
        "Orla painted a lantern blue.",
        "The ferry was late.",
        "Lantern festival.",
    ]
    sessions = ["s1"] * 4
    assert order(embedder, texts, sessions, "lighthouse lantern") == [0, 3, 1]
    assert order(embedder, texts, sessions, "lighthouse lantern", neighbour_weight=1.0) == [0, 1, 3]
    # neighbours are only neighbours within a session
    assert order(embedder, texts, ["s1", "s2", "s2", "s2"], "lighthouse lantern", neighbour_weight=1.0) == [0, 3, 1]


def test_person_focus_lifts_the_named_persons_memories(embedder):
    texts = [
        "Priya Raman is learning to paint.",
        "Tomasz is learning the cello.",
        "Tomasz baked bread for the neighbours.",
    ]
    sessions = ["s1"] * 3
    assert order(embedder, texts, sessions, "What is Tomasz learning?") == [1, 0, 2]
    assert order(embedder, texts, sessions, "What is Tomasz learning?", person_focus_weight=0.5) == [1, 2, 0]
    # a question naming two people focuses on neither
    assert order(embedder, texts, sessions, "What are Tomasz and Priya learning?", person_focus_weight=0.5)[2] == 2


def test_question_spans_read_the_time_a_question_names():
    from datetime import datetime

    from evolvemem.retrieval.index import to_days
    from evolvemem.retrieval.temporal import TELL_LATER_DAYS, question_span

    asked = datetime(2023, 8, 20, 10, 0)

    def days(*parts: int) -> float:
        return to_days(datetime(*parts))

    assert question_span("Who did Orla meet on 3 May, 2023?", asked) == (
        days(2023, 5, 3),
        days(2023, 5, 3, 23, 59) + TELL_LATER_DAYS,
    )
    assert question_span("Who did Orla meet on May 3rd, 2023?", None)[0] == days(2023, 5, 3)
    assert question_span("What did Orla bake in June 2022?", asked)[0] == days(2022, 6, 1)
    assert question_span("What did Orla bake in June?", asked)[0] == days(2023, 6, 1)
    assert question_span("What did Orla bake in October?", asked)[0] == days(
        2022, 10, 1
    )  # the last October asked about
    assert question_span("Where did Orla travel in 2021?", asked)[:1] == (days(2021, 1, 1),)
    start, end = question_span("What did Orla start two weeks ago?", asked)
    assert start == days(2023, 7, 30, 10, 0) and end == days(2023, 8, 13, 10, 0) + TELL_LATER_DAYS
    assert question_span("What did Orla do last year?", asked)[0] == days(2022, 1, 1)
    assert question_span("What does Orla bake?", asked) is None
    assert question_span("What did Orla bake in June?", None) is None  # which June needs the question's date


def test_temporal_grounding_lifts_memories_dated_when_the_question_says(embedder):
    from datetime import datetime

    texts = [
        "Orla went camping.",
        "Orla went camping in the hills with her old friends from the choir.",
        "Orla bought a new tent.",
    ]
    units = [
        memory(text, 1, session_id=f"s{i}").evolve(timestamp=when)
        for i, (text, when) in enumerate(
            zip(texts, [datetime(2023, 3, 2), datetime(2023, 6, 20), datetime(2023, 9, 1)])
        )
    ]
    retriever = Retriever(
        ConversationIndex.build(units, embedder, known_persons=PEOPLE), embedder, known_persons=PEOPLE
    )
    q = question("Where did Orla go camping in June?", date=datetime(2023, 10, 1))
    plain = [texts.index(c) for c in contents(retriever.retrieve(q, config(**KEYWORD_SUM)))]
    grounded = [
        texts.index(c) for c in contents(retriever.retrieve(q, config(**KEYWORD_SUM, temporal_grounding_weight=0.5)))
    ]
    assert plain[0] == 0 and grounded[0] == 1


# ------------------------------------------------------------------------------ budget filling


def test_a_token_budget_fills_past_view_sizes_and_the_item_cap(embedder):
    retriever = Retriever(
        ConversationIndex.build(memories(), embedder, known_persons=SPEAKERS), embedder, known_persons=SPEAKERS
    )
    q = question("What did Priya do?")
    small = dict(semantic_top_k=3, keyword_top_k=0, structured_top_k=0, max_context=6)
    assert len(retriever.retrieve(q, config(**small)).items) == 3  # no budget: the view's 3
    filled = retriever.retrieve(q, config(**small, context_token_budget=2000))
    assert len(filled.items) == len(TEXTS)  # every memory fits 2000 tokens: the view deepened to fill it
    tight = retriever.retrieve(q, config(**small, context_token_budget=200))
    used = context_tokens([item.memory for item in tight.items])
    assert used <= 200 < used + context_tokens([tight.cut[0].memory])  # filled up to the next that would not fit


def test_a_score_floor_ends_the_context_where_the_ranking_stops_being_sure(embedder):
    retriever = Retriever(
        ConversationIndex.build(memories(), embedder, known_persons=SPEAKERS), embedder, known_persons=SPEAKERS
    )
    q = question("What did Priya do?")
    wide = dict(semantic_top_k=10, keyword_top_k=0, structured_top_k=0, context_token_budget=2000)
    full = retriever.retrieve(q, config(**wide))
    scores = [item.score for item in full.items]
    floor = (scores[0] + scores[-1]) / 2 / scores[0]  # between the best and the worst candidate's share
    cut = retriever.retrieve(q, config(**wide, context_score_floor=round(floor, 3)))
    kept = len(cut.items)
    assert 1 <= kept < len(full.items)  # shorter than the budget allows, never empty
    assert [i.memory.memory_id for i in cut.items] == [i.memory.memory_id for i in full.items[:kept]]
    assert all(i.score >= floor * scores[0] - 1e-9 for i in cut.items)
    assert cut.cut[0].score < floor * scores[0]  # the first left out is under the floor, and recorded as cut
    highest = retriever.retrieve(q, config(**wide, context_score_floor=0.95))
    assert len(highest.items) >= 1


def test_a_run_budget_caps_the_global_budget_and_every_override_and_survives_resolution():
    base, _ = load_config("default")
    cfg, _ = base.with_changes({"context_token_budget": 900})
    cfg, _ = cfg.with_changes({"context_token_budget": 2500}, question_type="temporal")
    cfg, _ = cfg.with_changes({"answer_style": "temporal"}, question_type="multi_hop")
    capped = cfg.with_budget(TokenBudget(1500))
    assert capped.token_limit == 900  # its own budget is smaller
    assert capped.for_type("temporal").token_limit == 1500
    assert capped.for_type("multi_hop").token_limit == 900
    assert capped.for_type("temporal").context_token_budget == 2500  # the tuned value is not rewritten
    assert capped.fingerprint() == cfg.fingerprint()  # the budget is not a value
    assert capped.with_changes({"max_context": 9})[0].budget == TokenBudget(1500)  # proposals keep it
    assert base.with_budget(TokenBudget(600)).token_limit == 600  # no budget of its own: the run's
    assert base.with_budget(TokenBudget()).token_limit == 0 == base.token_limit


# ------------------------------------------------------------------------------ diagnosis


def diagnosis_input(token_budget: int, **values) -> DiagnosisInput:
    base, _ = load_config("hybrid")
    cfg, _ = base.with_changes(values)
    inp = DiagnosisInput(
        round=1,
        objective="evidence",
        score=0.7,
        overall=ScoreSummary(),
        by_type=[],
        by_category=[],
        taxonomy={"budget_cut": 60, "retrieval_miss": 10, "correct": 100},
        taxonomy_by_type={},
        worst_cases=[],
        config=cfg.values(),
        overrides={},
        token_budget=token_budget,
    )
    # a run without a cross-encoder or a second embedding model
    inp.fixed = tuple(name for name, dim in files_space().items() if dim.needs_reranker or dim.needs_second_embedder)
    return inp


def test_rubric_proposes_ranking_moves_when_a_token_budget_cuts():
    rubric = RubricDiagnoser()
    first = rubric.diagnose(diagnosis_input(1500), RetrievalConfig()).proposal
    assert set(first.changes) == {"late_top_k"}  # not wider views or more items: they fit no better
    later = rubric.diagnose(diagnosis_input(1500, late_top_k=10), RetrievalConfig()).proposal.changes
    assert later.get("late_weight", 0) > 1.0
    # weighting it up brought no gain: the next order moves are the ranking terms, each on its own
    failed = [
        HistoryEntry(
            round=1,
            decision="applied",
            changes=(Change("late_weight", 1.0, 2.0),),
            outcome_delta=0.0,
            outcome_accepted=False,
        )
    ]
    inp = diagnosis_input(1500, late_top_k=10)
    inp.history = failed
    moves = [
        p.changes
        for p in [rubric.diagnose(inp, RetrievalConfig()).proposal, *rubric.alternatives(inp, RetrievalConfig(), 3)]
    ]
    assert moves[:4] == [
        {"session_prior_weight": 0.3},
        {"neighbour_weight": 0.2},
        {"person_focus_weight": 0.1},
        {"temporal_grounding_weight": 0.2},
    ]
    unbudgeted = rubric.diagnose(diagnosis_input(0), RetrievalConfig()).proposal.changes
    assert "max_context" in unbudgeted  # without a budget the item cap is what cuts


# ------------------------------------------------------------------------------ evolve eval


@pytest.mark.slow
def test_evolve_eval_scores_evidence_recall_at_a_token_budget(tmp_path):
    results = {}
    for tokens in (400, 2000):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "evolvemem.cli.main",
                "eval",
                "--benchmark",
                "synth",
                "--config",
                "hybrid",
                "--context-tokens",
                str(tokens),
                "--json",
                "--out",
                str(tmp_path / f"eval-{tokens}"),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        results[tokens] = json.loads(out.stdout.strip().splitlines()[-1])["overall"]
        assert f"contexts cut at {tokens} tokens" in out.stdout + out.stderr
    assert results[400]["context_tokens"] <= 400 < results[2000]["context_tokens"] <= 2000
    assert results[400]["main_evidence_recall"] < results[2000]["main_evidence_recall"]


def test_ablation_of_an_evidence_run_measures_recall_at_the_runs_budget(tmp_path):
    """`evolve ablate` re-scores the best config the way the run scored its rounds: the answer
    contexts alone, cut at the run's --context-tokens (not answers at an uncut context)."""
    import duckdb

    run = tmp_path / "evidence-run"
    evolve = [sys.executable, "-m", "evolvemem.cli.main"]
    done = subprocess.run(
        [
            *evolve,
            "run",
            "--benchmark",
            "synth",
            "--rounds",
            "1",
            "--objective",
            "evidence",
            "--context-tokens",
            "400",
            "--init",
            "hybrid",
            "--out",
            str(run),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    ablated = subprocess.run(
        [*evolve, "ablate", str(run), "--split", "dev", "--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ablated.returncode == 0, ablated.stderr[-2000:]
    result = json.loads(ablated.stdout.strip().splitlines()[-1])
    full = result["rows"][0]
    with duckdb.connect(str(run / "run.duckdb"), read_only=True) as db:
        best = db.execute(
            "SELECT main_evidence_recall FROM rounds WHERE round = ? AND phase = 'dev'", [result["best_round"]]
        ).fetchone()[0]
        answered, widest = db.execute(
            "SELECT count(*) FILTER (WHERE prediction <> ''), max(context_tokens) "
            "FROM question_records WHERE phase LIKE 'ablate%'"
        ).fetchone()
    assert full["main_evidence_recall"] == pytest.approx(best)
    assert answered == 0 and widest <= 400
