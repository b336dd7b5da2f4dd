"""What a round's config costs to retrieve, recorded beside its dev scores.

Each dev evaluation is followed by one timing of its config on a fixed sample of dev questions,
pass for pass beside BM25 alone (the `weak` preset) in this process, with the timer of
`benchmarks/retrieval_latency.py` (retrieval/latency.py): milliseconds a question beyond the
query embedding, and the BM25 figure that makes them comparable across moments. The figure is
reported (`evolve show --frontier`, the round table) and checked against `--max-ms`; the guard's
parsimony never reads it (loop/parsimony.py), so a run's other decisions do not depend on the
machine's load. A config that would ask a model while retrieving is not timed when a model
answers: its calls would go unaccounted."""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import cache

from evolvemem.answering.stores import base_store, stores_needed
from evolvemem.data.models import Question
from evolvemem.loop.parsimony import settings_on
from evolvemem.retrieval.latency import RetrievalCost, interleaved_ms
from evolvemem.space.config import RetrievalConfig, load_config
from evolvemem.workspace import Workspace

TIMED_QUESTIONS = 60  # dev questions a config is timed on (the same sample for every round)
PASSES = 3  # timed passes a figure is the best of, after one warm-up pass


def asks_model_to_retrieve(config: RetrievalConfig) -> bool:
    """Whether `config` has a model-calling setting on, globally or in a per-type override."""
    return bool(settings_on(config, lambda dim: dim.model_calls))


@cache
def _bm25_alone() -> RetrievalConfig:
    """The `weak` preset (BM25 alone), loaded once: every timing's reference."""
    return load_config("weak")[0]


def timed_sample(questions: Sequence[Question], seed: int) -> list[Question]:
    """The fixed sample every round of a run is timed on."""
    sample = list(questions)
    if len(sample) > TIMED_QUESTIONS:
        sample = random.Random(f"timer-{seed}").sample(sample, TIMED_QUESTIONS)
    return sample


def time_retrieval(ws: Workspace, config: RetrievalConfig, sample: Sequence[Question]) -> RetrievalCost | None:
    """`config`'s retrieval ms a question on `sample`, beside BM25 alone (None: it would ask a model)."""
    if not sample or (ws.roles.uses_llm and asks_model_to_retrieve(config)):
        return None
    bm25 = _bm25_alone().with_budget(config.budget)
    for each in (config, bm25):
        ws.ensure_stores(stores_needed(each), conversations={q.conversation_id for q in sample})
        ws.prepare(list(sample), each)  # outside the clock: embeddings, late-interaction scores
    ms, bm25_ms = interleaved_ms(
        lambda q, effective: ws.retriever(q.conversation_id, base_store(effective)), sample, [config, bm25], PASSES
    )
    return RetrievalCost(ms, bm25_ms)
