"""The retrieval timer shared by `benchmarks/retrieval_latency.py` and the run's cost meter.

What it times is retrieval beyond the query embedding: questions are prepared (analysed, batch
embedded, late-interaction scores computed) before the clock starts, and each effective config is
resolved outside it, so a pass is the ranking, fusion and context cut alone. A figure in
milliseconds is only comparable on one machine at one moment; `RetrievalCost` therefore keeps
BM25 alone (the `weak` preset) timed in the same process beside it, and the ratio is what
travels."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from evolvemem.data.models import Question
from evolvemem.retrieval.retriever import Retriever
from evolvemem.space.config import RetrievalConfig

# the retriever a question reads under its effective config (its conversation's, of the store the
# config reads)
RetrieverFor = Callable[[Question, RetrievalConfig], Retriever]


@dataclass(frozen=True)
class RetrievalCost:
    """Retrieval milliseconds a question beyond the query embedding, beside BM25 alone timed in the
    same process (best of a few passes each)."""

    ms: float
    bm25_ms: float

    @property
    def ratio(self) -> float:
        """`ms` as a multiple of BM25 alone: what cancels the machine's speed and load."""
        return self.ms / self.bm25_ms if self.bm25_ms > 0 else float("inf")

    def extra_ms(self, other: RetrievalCost) -> float:
        """How many ms a question this costs more than `other`, with both ratios read at the mean of
        the two BM25 timings (a busier moment for one measurement does not count as a cost)."""
        scale = (self.bm25_ms + other.bm25_ms) / 2
        return (self.ratio - other.ratio) * scale


def timed_pass(retriever_for: RetrieverFor, questions: Sequence[Question], config: RetrievalConfig) -> float:
    """Seconds to retrieve every question once (effective configs resolved outside the clock)."""
    effective = {q.question_type: config.for_type(q.question_type) for q in questions}
    chosen = [(retriever_for(q, effective[q.question_type]), q, effective[q.question_type]) for q in questions]
    started = time.perf_counter()
    for retriever, question, eff in chosen:
        retriever.retrieve(question, eff)
    return time.perf_counter() - started


def ms_per_question(
    retriever_for: RetrieverFor, questions: Sequence[Question], config: RetrievalConfig, repeats: int = 3
) -> float:
    """Milliseconds a question: one warm-up pass, then the best of `repeats` (the least disturbed)."""
    return interleaved_ms(retriever_for, questions, [config], repeats)[0]


def interleaved_ms(
    retriever_for: RetrieverFor, questions: Sequence[Question], configs: Sequence[RetrievalConfig], repeats: int = 3
) -> list[float]:
    """Milliseconds a question of each config, timed in turn pass after pass (one warm-up pass each,
    then the best of `repeats`): on a shared machine the load drifts, and configs timed side by
    side see the same drift."""
    if not questions:
        return [0.0 for _ in configs]
    for config in configs:
        timed_pass(retriever_for, questions, config)
    best = [float("inf") for _ in configs]
    for _ in range(max(1, repeats)):
        for i, config in enumerate(configs):
            best[i] = min(best[i], timed_pass(retriever_for, questions, config))
    return [seconds * 1000 / len(questions) for seconds in best]
