"""The cross-encoder rerank stage: its blend, its place in the retriever, the loop leaving it alone
without a cross-encoder, and `evolve eval --rerank-model` end to end.

No cross-encoder ships inside a package these machines can install, so the tests build one: a
one-layer BERT sequence classifier with seeded random weights and the bundled MiniLM's own
tokenizer, saved as a folder sentence-transformers' CrossEncoder loads. Its scores mean nothing,
which is what makes the tests sharp: the stage must follow whatever the model says."""

from __future__ import annotations

from evolvemem.space.config import RetrievalConfig

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evolvemem.contracts.diagnosis import DiagnosisInput, ScoreSummary
from evolvemem.diagnosers.rubric import RubricDiagnoser
from evolvemem.errors import ConfigError
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.retrieval.index import ConversationIndex
from evolvemem.retrieval.rerank import CrossEncoderReranker, blended_order
from evolvemem.retrieval.retriever import Retriever
from evolvemem.space.config import load_config
from evolvemem.space.action_space import files_space

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_retrieval import SPEAKERS, TEXTS, config, contents, memories, question  # noqa: E402
from tiny_bert import bundled_tokenizer, save_with_tokenizer, tiny_bert_config  # noqa: E402

QUERY = "What is Priya Raman learning, and where did she travel?"
EVOLVE = [sys.executable, "-m", "evolvemem.cli.main"]


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    """A folder holding a tiny, seeded, untrained BERT cross-encoder (one output: a relevance logit)."""
    pytest.importorskip("torch")
    from transformers import BertForSequenceClassification

    tokenizer = bundled_tokenizer()
    model = BertForSequenceClassification(tiny_bert_config(tokenizer.vocab_size, seed=7, num_labels=1))
    return save_with_tokenizer(model, tokenizer, tmp_path_factory.mktemp("tiny-cross-encoder"))


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def test_blend_of_ranks_follows_the_weight():
    model = np.array([0.1, 0.9, 0.5, 0.2])  # the model's order: 1, 2, 3, 0
    assert blended_order(model, 0.0).tolist() == [0, 1, 2, 3]  # weight 0: the current order
    assert blended_order(model, 1.0).tolist() == [1, 2, 3, 0]  # weight 1: the model's order alone
    # half and half: candidate 1 (current 2nd, model 1st) leads; 0 (1st, model 4th) and 2 (3rd, 2nd)
    # score (1/61 + 1/64) / 2 = 0.016009 and (1/63 + 1/62) / 2 = 0.016001: candidate 0 just keeps its lead
    assert blended_order(model, 0.5).tolist() == [1, 0, 2, 3]
    assert blended_order(model, 0.6).tolist() == [1, 2, 0, 3]  # a little more weight and 2 passes it


def test_the_stage_reorders_the_top_candidates_by_the_cross_encoder(tiny_cross_encoder, embedder):
    units = memories()
    reranker = CrossEncoderReranker(str(tiny_cross_encoder))
    plain = Retriever(
        ConversationIndex.build(units, embedder, known_persons=SPEAKERS), embedder, known_persons=SPEAKERS
    )
    reranking = Retriever(plain.index, embedder, known_persons=SPEAKERS, reranker=reranker)
    everything = dict(max_context=len(TEXTS), context_order="score")
    before = contents(plain.retrieve(question(QUERY), config(**everything)))
    k = int(files_space()["rerank_top_k"].min or 0)  # the fewest candidates the stage reads
    result = reranking.retrieve(question(QUERY), config(**everything, rerank_top_k=k, rerank_weight=1.0))
    after = contents(result)

    from sentence_transformers import CrossEncoder

    own = CrossEncoder(str(tiny_cross_encoder), device="cpu").predict([(QUERY, t) for t in before[:k]])
    by_model = [before[:k][i] for i in np.argsort(-np.asarray(own), kind="stable")]
    assert by_model != before[:k], "the fixture's model should disagree with retrieval's order"
    assert after[:k] == by_model  # weight 1: exactly the cross-encoder's order of the top k
    assert after[k:] == before[k:]  # the rest keep their order below them
    assert all("rerank" in item.views for item in result.items[:k])
    assert not any("rerank" in item.views for item in result.items[k:])
    # weight 0 is the plain order, and asking again reads no pair twice
    scored = reranker.pairs_scored
    unchanged = reranking.retrieve(question(QUERY), config(**everything, rerank_top_k=k, rerank_weight=0.0))
    assert contents(unchanged) == before
    assert reranker.pairs_scored == scored


def test_a_config_that_reranks_without_a_cross_encoder_is_refused(embedder):
    units = memories()
    plain = Retriever(
        ConversationIndex.build(units, embedder, known_persons=SPEAKERS), embedder, known_persons=SPEAKERS
    )
    with pytest.raises(ConfigError, match="--rerank-model"):
        plain.retrieve(question(QUERY), config(rerank_top_k=10))


@pytest.mark.slow
def test_a_wrong_rerank_model_fails_in_one_line(tmp_path):
    done = subprocess.run(
        [
            *EVOLVE,
            "eval",
            "--benchmark",
            "synth",
            "--config",
            "hybrid",
            "--rerank-model",
            str(tmp_path / "missing"),
            "--out",
            str(tmp_path / "eval"),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2
    assert "cannot be loaded as a cross-encoder" in done.stderr
    assert "Traceback" not in done.stderr


def test_rerank_on_without_a_model_is_refused_before_any_work(tmp_path):
    cfg = tmp_path / "reranks.toml"
    cfg.write_text("rerank_top_k = 20\n")
    done = subprocess.run(
        [*EVOLVE, "eval", "--benchmark", "synth", "--config", str(cfg), "--out", str(tmp_path / "eval"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2
    assert "--rerank-model" in done.stderr and "Traceback" not in done.stderr


def diagnosis_input(fixed: tuple[str, ...]) -> DiagnosisInput:
    base, _ = load_config("hybrid")
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
        config=base.values(),
        overrides={},
        token_budget=1500,
    )
    inp.fixed = fixed
    return inp


def test_the_rubric_reaches_for_the_cross_encoder_only_when_the_run_has_one():
    rubric = RubricDiagnoser()
    with_model = rubric.diagnose(diagnosis_input(()), RetrievalConfig()).proposal.changes
    assert set(with_model) == {"rerank_top_k"} and with_model["rerank_top_k"] > 0
    without = rubric.diagnose(diagnosis_input(("rerank_top_k", "rerank_weight")), RetrievalConfig()).proposal.changes
    assert "rerank_top_k" not in without and set(without) == {"late_top_k"}


@pytest.mark.slow
def test_evolve_eval_with_a_cross_encoder_end_to_end(tiny_cross_encoder, tmp_path):
    """The stage through the real CLI: the model is recorded in the manifest and changes contexts."""
    from evolvemem.store.run_store import RunStore

    plain = 'semantic_top_k = 20\nkeyword_top_k = 20\nfusion_mode = "rrf"\nmax_context = 5\n'
    (tmp_path / "plain.toml").write_text(plain)
    (tmp_path / "reranked.toml").write_text(plain + "rerank_top_k = 10\nrerank_weight = 1.0\n")
    results = {}
    for label, extra in (("plain", []), ("reranked", ["--rerank-model", str(tiny_cross_encoder)])):
        done = subprocess.run(
            [
                *EVOLVE,
                "eval",
                "--benchmark",
                "synth",
                "--config",
                str(tmp_path / f"{label}.toml"),
                *extra,
                "--json",
                "--out",
                str(tmp_path / label),
                "--quiet",
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        results[label] = json.loads(done.stdout.strip().splitlines()[-1])["overall"]
    with RunStore(tmp_path / "reranked", read_only=True) as store:
        assert store.manifest()["rerank_model"] == str(tiny_cross_encoder)
    assert results["plain"]["main_evidence_recall"] != results["reranked"]["main_evidence_recall"]
