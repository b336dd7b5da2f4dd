"""A served memory's query embedding: several workers, the same vectors, no wait behind an add.

The real MiniLM model embeds real texts; the shared model's lock is held by the test the way an
add holds it while it embeds a conversation's contents."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from evolvemem.contracts.local_models import Encoder
from evolvemem.retrieval.embeddings import Embedder
from evolvemem.serving.embedding import ServingEmbedder

QUERIES = [
    f"Where did Ottilie {verb} the {thing} in spring?"
    for verb in ("hide", "find", "paint", "sell")
    for thing in ("kettle", "bicycle", "violin", "lantern", "map")
]


BACKENDS = pytest.mark.parametrize("encoder", [Encoder.TORCH, Encoder.ONNX], ids=lambda e: e.value)


@BACKENDS
def test_concurrent_queries_on_two_workers_get_their_own_vectors(tmp_path, encoder):
    """On torch each worker but the first runs a deep copy; on ONNX they share one session."""
    inner = Embedder(cache_root=tmp_path, encoder=encoder)
    embedder = ServingEmbedder(inner, workers=2)
    try:
        with ThreadPoolExecutor(8) as pool:
            served = list(pool.map(lambda text: embedder.encode([text])[0], QUERIES))
        alone = inner.encoder.sentences(QUERIES, 64)
        assert len(embedder._workers) == 2
        assert embedder.queries_embedded == len(QUERIES)  # each text once, none lost or repeated
        for vector, reference in zip(served, alone):
            assert float(np.dot(vector, reference)) > 0.99999  # the same text's vector, whichever worker
        assert inner.texts_embedded == 0  # queries never reach the on-disk content cache
    finally:
        embedder.close()


@BACKENDS
def test_a_lone_query_is_embedded_on_the_searching_thread(tmp_path, encoder):
    """With no query waiting and the shared model free, the search's own thread runs the model
    (two thread hand-offs fewer than a worker); the vector and the token outputs are the ones a
    worker gives."""
    inner = Embedder(cache_root=tmp_path, encoder=encoder)
    embedder = ServingEmbedder(inner, workers=2)
    try:
        query = QUERIES[0]
        vector = embedder.encode([query])[0]
        assert embedder.inline_batches == 1 and embedder.queries_embedded == 1
        assert np.array_equal(vector, inner.encoder.sentences([query], 64)[0])
        embedder.tokens.of_queries([query])
        assert embedder.query_batches == 1  # its token outputs were kept from that pass
        held, release = threading.Event(), threading.Event()

        def add_holding_the_model() -> None:
            with inner.model_lock:
                held.set()
                release.wait(60)

        holder = threading.Thread(target=add_holding_the_model, daemon=True)
        holder.start()
        held.wait(60)
        try:  # while an add holds the shared model, the next query goes to the other worker
            embedder.encode([QUERIES[1]])
        finally:
            release.set()
            holder.join(60)
        assert embedder.inline_batches == 1 and embedder.queries_embedded == 2
    finally:
        embedder.close()


def first_query_done_while_the_shared_model_is_busy(embedder: ServingEmbedder, wait: float) -> bool:
    """Hold the shared model's lock (as an add embedding contents does) and search: is any query
    answered meanwhile? The first may go to the worker on the shared model; a second cannot."""
    done = threading.Event()
    with embedder.inner.model_lock:
        threads = []
        for text in ("What colour is Ottilie's kettle?", "Who repaired the lantern?"):
            thread = threading.Thread(target=lambda t=text: (embedder.encode([t]), done.set()), daemon=True)
            thread.start()
            threads.append(thread)
            if done.wait(wait):
                break
        answered = done.is_set()
    for thread in threads:
        thread.join(timeout=60)
    return answered


@pytest.mark.slow
def test_a_search_is_not_held_up_while_the_shared_model_embeds_an_add(tmp_path):
    inner = Embedder(cache_root=tmp_path)
    two = ServingEmbedder(inner, workers=2)
    one = ServingEmbedder(inner, workers=1)
    try:
        two.encode(["warm up both workers"])
        one.encode(["warm up the only worker"])
        assert first_query_done_while_the_shared_model_is_busy(two, wait=20.0)
        assert not first_query_done_while_the_shared_model_is_busy(one, wait=1.0)  # the control
    finally:
        two.close()
        one.close()


@BACKENDS
def test_one_forward_pass_gives_the_sentence_vectors_and_token_outputs_bit_for_bit(tmp_path, encoder):
    encoder = Embedder(cache_root=tmp_path, encoder=encoder).encoder
    texts = [
        "Ottilie?",
        *QUERIES[:6],
        "Where did the whole choir of Ottilie's village sing on the longest night of 2021?",
    ]
    sentence, tokens = encoder.sentences_and_tokens(texts, 64)
    assert np.array_equal(sentence, encoder.sentences(texts, 64))
    separate = encoder.token_outputs(texts, 64)
    assert len(tokens) == len(texts)
    for ours, theirs in zip(tokens, separate):
        assert np.array_equal(ours, theirs)


def test_a_served_late_interaction_query_runs_the_model_once(tmp_path):
    inner = Embedder(cache_root=tmp_path)
    embedder = ServingEmbedder(inner, workers=1)
    try:
        query = "Which lantern did Ottilie repair before the festival?"
        embedder.encode([query])
        pieces = embedder.tokens.of_queries([query])[0]
        assert embedder.query_batches == 1  # the token outputs came from the sentence vector's pass
        assert pieces.shape[1] == embedder.dimension and 0 < len(pieces) < 12  # content pieces only
        reference = inner.tokens.of_queries([query])[0]  # evaluation's path: a forward pass of its own
        assert np.array_equal(pieces, reference)
        cached = "Who painted the violin?"
        inner.encode([cached])  # its sentence vector is now in the disk cache: no worker pass for it
        embedder.encode([cached])
        assert embedder.query_batches == 1
        embedder.tokens.of_queries([cached])  # so its token outputs need one
        assert embedder.query_batches == 2
    finally:
        embedder.close()
