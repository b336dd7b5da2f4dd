"""The second embedding model: its dense view in the retriever (a fixed case where it must reorder,
nothing changed while it is off), its vectors embedded once ever (a second round, a re-extraction,
a reopened served store), the refusal of a config that uses it without the model, the rubric
reaching for it only when the run has it, and `evolve eval --second-embedding-model` end to end.

Only all-MiniLM-L6-v2 ships inside a package the tests can rely on, so the tests build the second
model: a one-layer BERT with seeded random weights and the bundled MiniLM's tokenizer, mean-pooled,
saved as a folder sentence-transformers loads. Its vectors mean nothing, which keeps the tests
sharp: the view must follow whatever that model says, not what MiniLM would."""

from __future__ import annotations

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
from evolvemem.retrieval.retriever import Retriever
from evolvemem.retrieval.second_embedder import SecondEmbedder, require_second_embedder
from evolvemem.space.config import load_config
from evolvemem.space.action_space import files_space
from evolvemem.space.dimensions import dimension_from_table, dimension_to_toml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_retrieval import SPEAKERS, TEXTS, candidates, config, contents, memories, memory, question  # noqa: E402
from tiny_bert import bundled_tokenizer, save_with_tokenizer, tiny_bert_config  # noqa: E402

QUERY = "What is Priya Raman learning, and where did she travel?"
EVOLVE = [sys.executable, "-m", "evolvemem.cli.main"]
SECOND_ONLY = dict(semantic_top_k=0, keyword_top_k=0, structured_top_k=0, second_semantic_top_k=len(TEXTS))
EVERYTHING = dict(max_context=len(TEXTS), context_order="score")
TINY_DIMENSION = 32


@pytest.fixture(scope="module")
def tiny_embedding_model(tmp_path_factory) -> Path:
    """A folder holding a tiny, seeded, untrained BERT sentence embedder (mean pooling)."""
    pytest.importorskip("torch")
    from sentence_transformers import SentenceTransformer
    from transformers import BertModel

    try:
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers.models import Pooling, Transformer

    root = tmp_path_factory.mktemp("tiny-embedder")
    tokenizer = bundled_tokenizer()
    bert = BertModel(tiny_bert_config(tokenizer.vocab_size, seed=11, max_position_embeddings=128))
    save_with_tokenizer(bert, tokenizer, root / "bert")
    word = Transformer(str(root / "bert"), max_seq_length=64)
    pooling = Pooling(TINY_DIMENSION, pooling_mode="mean")
    SentenceTransformer(modules=[word, pooling], device="cpu").save(str(root / "model"))
    return root / "model"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def second_embedder(model: Path, cache: Path) -> SecondEmbedder:
    """A second embedder with its own cache: what a fresh process on that cache would have."""
    return SecondEmbedder(Embedder(str(model), cache_root=cache))


def retriever(units, embedder: Embedder, second: SecondEmbedder | None = None) -> Retriever:
    index = ConversationIndex.build(units, embedder, known_persons=SPEAKERS)
    return Retriever(index, embedder, known_persons=SPEAKERS, second_embedder=second)


def test_the_view_ranks_by_the_second_model_and_reorders_the_fusion(tiny_embedding_model, embedder, tmp_path):
    second = second_embedder(tiny_embedding_model, tmp_path / "cache")
    with_model = retriever(memories(), embedder, second)

    from sentence_transformers import SentenceTransformer

    own = SentenceTransformer(str(tiny_embedding_model), device="cpu").encode(
        [QUERY, *TEXTS], normalize_embeddings=True, convert_to_numpy=True
    )
    by_model = [TEXTS[i] for i in np.argsort(-(own[1:] @ own[0]), kind="stable")]
    alone = with_model.retrieve(question(QUERY), config(**EVERYTHING, **SECOND_ONLY))
    assert contents(alone) == by_model  # the view alone: exactly the second model's cosine order
    assert all(set(item.views) == {"second_semantic"} for item in alone.items)
    first_only = with_model.retrieve(question(QUERY), config(**EVERYTHING, **{**SECOND_ONLY, "semantic_top_k": 12}))
    first_only_order = contents(
        with_model.retrieve(question(QUERY), config(**EVERYTHING, semantic_top_k=12, keyword_top_k=0))
    )
    assert first_only_order != by_model, "the fixture's model should disagree with MiniLM"
    # both on: the fusion of the two orders, which is neither of them
    fused = contents(first_only)
    assert fused != by_model and fused != first_only_order


def test_the_first_model_as_the_second_is_a_switch_that_changes_nothing(embedder, tmp_path):
    """With MiniLM as both models the second view is the first again: switching the dense view to
    it gives today's ranking exactly (this is why these machines have no second-model figure of
    their own without another model's weights)."""
    second = SecondEmbedder(Embedder(embedder.model_name, cache_root=tmp_path / "cache"))
    with_model = retriever(memories(), embedder, second)
    first = with_model.retrieve(question(QUERY), config(**EVERYTHING, semantic_top_k=12))
    switched = with_model.retrieve(question(QUERY), config(**EVERYTHING, semantic_top_k=0, second_semantic_top_k=12))
    assert [(i.memory.memory_id, round(i.score, 6)) for i in switched.items] == [
        (i.memory.memory_id, round(i.score, 6)) for i in first.items
    ]


def test_equal_configs_with_the_view_off_give_todays_results(tiny_embedding_model, embedder, tmp_path):
    second = second_embedder(tiny_embedding_model, tmp_path / "cache")
    today = retriever(memories(), embedder)
    with_model = retriever(memories(), embedder, second)
    for changes in ({}, dict(keyword_top_k=0), dict(fusion_mode="rrf", late_top_k=10)):
        cfg = config(**EVERYTHING, **changes)
        assert cfg.second_semantic_top_k == 0  # off in the default preset
        plain, given = today.retrieve(question(QUERY), cfg), with_model.retrieve(question(QUERY), cfg)
        assert [(i.memory.memory_id, i.score, i.rank, i.views) for i in given.items] == [
            (i.memory.memory_id, i.score, i.rank, i.views) for i in plain.items
        ]
    assert second.texts_embedded == 0  # a view that is off costs nothing


def test_memory_vectors_are_embedded_once_across_rounds_reextraction_and_reopening(
    tiny_embedding_model, embedder, tmp_path
):
    cache = tmp_path / "cache"
    units = memories()
    second = second_embedder(tiny_embedding_model, cache)
    first = retriever(units, embedder, second)
    cfg = config(**EVERYTHING, **SECOND_ONLY)
    first.prepare([question(QUERY)], cfg)
    assert second.texts_embedded == len(TEXTS) + 1  # every memory and the question, once
    before = contents(first.retrieve(question(QUERY), cfg))
    first.retrieve(question(QUERY), cfg)  # a second round
    assert second.texts_embedded == len(TEXTS) + 1
    first.index.add([memory("Tomasz painted a mural of a lighthouse.", 28)])  # targeted re-extraction
    after_add = first.retrieve(question(QUERY), cfg)
    assert second.texts_embedded == len(TEXTS) + 2  # only the new memory reached the model
    assert "Tomasz painted a mural of a lighthouse." in candidates(after_add)
    reopened = second_embedder(tiny_embedding_model, cache)  # a new process on the same cache
    again = retriever(units, embedder, reopened)
    assert contents(again.retrieve(question(QUERY), cfg)) == before
    assert reopened.texts_embedded == 0


def test_a_config_using_the_view_without_the_model_is_refused(embedder):
    plain = retriever(memories(), embedder)
    with pytest.raises(ConfigError, match="--second-embedding-model"):
        plain.retrieve(question(QUERY), config(second_semantic_top_k=10))
    # a per-type override that turns it on counts too
    base, _ = load_config("default")
    override, _ = base.with_changes({"second_semantic_top_k": 10}, question_type="multi_hop")
    with pytest.raises(ConfigError, match="--second-embedding-model"):
        require_second_embedder(override, None)
    require_second_embedder(base, None)  # off: nothing to refuse


def test_the_view_on_without_a_model_is_refused_in_one_line(tmp_path):
    cfg = tmp_path / "second.toml"
    cfg.write_text("second_semantic_top_k = 20\n")
    done = subprocess.run(
        [*EVOLVE, "eval", "--benchmark", "synth", "--config", str(cfg), "--out", str(tmp_path / "eval"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2
    assert "--second-embedding-model" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_wrong_second_model_fails_in_one_line(tmp_path):
    done = subprocess.run(
        [
            *EVOLVE,
            "eval",
            "--benchmark",
            "synth",
            "--second-embedding-model",
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
    assert "cannot be loaded" in done.stderr and "Traceback" not in done.stderr


def test_a_served_memory_refuses_the_view_without_the_model_and_embeds_nothing_when_reopened(
    tiny_embedding_model, tmp_path
):
    pytest.importorskip("duckdb")
    from evolvemem.serving import LocalModels, Memory

    with_view = LocalModels(second_embedding=str(tiny_embedding_model))
    uses_view = tmp_path / "second.toml"
    uses_view.write_text("second_semantic_top_k = 10\nsemantic_top_k = 0\n")
    store = tmp_path / "memory.duckdb"
    with pytest.raises(ConfigError, match="--second-embedding-model"):
        Memory.open(store, uses_view)
    with Memory.open(store, "default") as memory:  # the hot swap refuses it too
        with pytest.raises(ConfigError, match="--second-embedding-model"):
            memory.use_config(uses_view)
    turns = [  # texts no other test embeds, so the cache starts without them
        {"speaker": "Ines", "text": "Ines restored an old sailing dinghy over the winter."},
        {"speaker": "Ola", "text": "Ola keeps bees on the roof of her block of flats."},
        {"speaker": "Ines", "text": "Ines sold the dinghy to a sailing club in Gdansk."},
    ]
    with Memory.open(store, uses_view, local_models=with_view) as memory:
        memory.add("ines", turns)
        assert memory.second_embedder is not None and memory.second_embedder.texts_embedded > 0
        first = memory.search("ines", "Who keeps bees?")
    with Memory.open(store, uses_view, local_models=with_view) as memory:
        second = memory.search("ines", "Who keeps bees?")
        assert memory.second_embedder is not None and memory.second_embedder.texts_embedded == 0
    assert [h.memory_id for h in second.hits] == [h.memory_id for h in first.hits]
    assert first.hits and all("second_semantic" in h.views for h in first.hits)


def diagnosis_input(fixed: tuple[str, ...]) -> DiagnosisInput:
    base, _ = load_config("hybrid")
    inp = DiagnosisInput(
        round=1,
        objective="evidence",
        score=0.5,
        overall=ScoreSummary(),
        by_type=[],
        by_category=[],
        taxonomy={"retrieval_miss": 60, "correct": 100},
        taxonomy_by_type={},
        worst_cases=[],
        config=base.values(),
        overrides={},
    )
    inp.fixed = fixed
    return inp


def test_the_rubric_reaches_for_the_second_model_only_when_the_run_has_one():
    rubric = RubricDiagnoser()
    cross_encoder = tuple(name for name, dim in files_space().items() if dim.needs_reranker)
    with_model = rubric.diagnose(diagnosis_input(cross_encoder), load_config("hybrid")[0]).proposal.changes
    assert set(with_model) == {"second_semantic_top_k"} and with_model["second_semantic_top_k"] > 0
    second = tuple(name for name, dim in files_space().items() if dim.needs_second_embedder)
    assert set(second) == {"second_semantic_top_k", "second_semantic_weight"}
    without = rubric.diagnose(diagnosis_input(cross_encoder + second), load_config("hybrid")[0]).proposal.changes
    assert without and not set(without) & set(second)


def test_the_field_survives_a_toml_round_trip():
    dim = files_space()["second_semantic_top_k"]
    assert dim.needs_second_embedder and dim.default == 0 and dim.mechanism_off == 0
    import tomllib

    (table,) = tomllib.loads(dimension_to_toml(dim)).values()
    assert dimension_from_table(Path("1_views.toml"), dim.name, table) == dim


@pytest.mark.slow
def test_evolve_eval_with_a_second_model_end_to_end(tiny_embedding_model, tmp_path):
    """The view through the real CLI at a token budget: the model is recorded in the manifest, and
    switching the dense view to it changes the contexts' evidence recall."""
    from evolvemem.store.run_store import RunStore

    (tmp_path / "first.toml").write_text("semantic_top_k = 20\nkeyword_top_k = 0\nstructured_top_k = 0\n")
    (tmp_path / "second.toml").write_text(
        "semantic_top_k = 0\nkeyword_top_k = 0\nstructured_top_k = 0\nsecond_semantic_top_k = 20\n"
    )
    results = {}
    for label in ("first", "second"):
        done = subprocess.run(
            [
                *EVOLVE,
                "eval",
                "--benchmark",
                "synth",
                "--config",
                str(tmp_path / f"{label}.toml"),
                "--second-embedding-model",
                str(tiny_embedding_model),
                "--context-tokens",
                "300",
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
        with RunStore(tmp_path / label, read_only=True) as store:
            assert store.manifest()["second_embedding_model"] == str(tiny_embedding_model)
            views = " ".join(" ".join(r.context_views or ()) for r in store.round_records(0, "eval"))
        assert ("second_semantic:" in views) == (label == "second")
    assert results["first"]["main_evidence_recall"] != results["second"]["main_evidence_recall"]
