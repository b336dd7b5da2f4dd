"""What a config hands the reader, without asking it: rung 0 of the ladder and `--objective evidence`.

For each question this builds the first answer context the answer path would build (the store
the router's rules pick, then retrieval under the effective config) and records its evidence
recall and its size in tokens — no answer call, so it costs only retrieval (and an LLM
decomposition when that is on, cached by text). The context is cut at the token budget the
config carries (`config.budget`, the run's), so configs are compared at an equal token budget:
otherwise "more memories" always wins on recall. The records have no prediction and no F1; they pair with
each other on `evidence_recall` (loop/paired.py, `metric`).

A frontier run (`--budgets`) records every question at each further budget too, as its own phase
(`cuts`): one route and one ranking per question, cut at each budget (`first_contexts`)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from evolvemem.answering.evaluate import (
    EvalOutcome,
    RecordFn,
    RecordStream,
    SinkFn,
    evaluate_each,
    unanswered_record,
    view_label,
    with_evidence_and_cost,
)
from evolvemem.answering.first_context import RULES, FirstContext, first_context, first_contexts
from evolvemem.contracts.records import QuestionRecord
from evolvemem.data.models import Question
from evolvemem.retrieval.retriever import context_tokens
from evolvemem.workspace import Workspace

if TYPE_CHECKING:
    from evolvemem.space.budget import TokenBudget
    from evolvemem.space.config import RetrievalConfig

FLUSH_EVERY = 256


def context_record(
    ws: Workspace,
    question: Question,
    effective: RetrievalConfig,
    fingerprint: str,
    *,
    round_no: int,
    phase: str,
) -> QuestionRecord:
    """The first answer context of `question` and its evidence figures (no answer call: the
    store is the one the router's rules pick, never a model's)."""
    started = time.perf_counter()
    first = first_context(ws, question, effective, RULES)
    return record_of(ws, question, first, fingerprint, round_no, phase, (time.perf_counter() - started) * 1000)


def record_of(
    ws: Workspace,
    question: Question,
    first: FirstContext,
    fingerprint: str,
    round_no: int,
    phase: str,
    latency_ms: float,
    same_ranking: QuestionRecord | None = None,
) -> QuestionRecord:
    """The contexts-only record of one built first context. `same_ranking`: a record of another
    cut of the same ranking, whose recall of the store and of the whole ranking this one shares
    (the costly figures: they read every memory), so they are copied, not counted again."""
    store, retrieval = first.store, first.retrieval
    context = [item.memory for item in retrieval.items]
    ranked = [] if same_ranking else [*context, *(item.memory for item in retrieval.cut)]
    record = replace(
        unanswered_record(question, round_no, phase),
        context_ids=tuple(m.memory_id for m in context),
        context_views=tuple(view_label(item.views) for item in retrieval.items),
        cut_ids=tuple(item.memory.memory_id for item in retrieval.cut),
        sub_queries=tuple(retrieval.sub_queries),
        granularity=store,
        route="rules",
        context_tokens=context_tokens(context),
    )
    record = with_evidence_and_cost(
        record,
        ws,
        question,
        in_context=[m.source_turn_ids for m in context],
        covered=() if same_ranking else ws.covered(question.conversation_id, store),
        ranked=[m.source_turn_ids for m in ranked],
        fingerprint=fingerprint,
        latency_ms=latency_ms,
        cost=retrieval.cost,
    )
    if same_ranking is None:
        return record
    return replace(
        record,
        evidence_covered=same_ranking.evidence_covered,
        evidence_retrieved=same_ranking.evidence_retrieved,
    )


def evaluate_contexts(
    ws: Workspace,
    config: RetrievalConfig,
    questions: list[Question],
    *,
    round_no: int = 0,
    phase: str = "eval",
    on_record: RecordFn | None = None,
    sink: SinkFn | None = None,
    cuts: Sequence[tuple[str, TokenBudget]] = (),
) -> EvalOutcome:
    """`context_record` for every question, in order (retrieval is CPU-bound: a plain loop);
    records reach `sink` in batches, as `evaluate`'s do, so an interruption loses nothing.
    `cuts`: (phase, budget) — each question's ranking is also cut at each budget and recorded as
    that phase (those records reach `sink` too; the returned outcome holds `phase`'s alone)."""
    stream = RecordStream(sink, on_record, batch=FLUSH_EVERY)
    cut_stream = RecordStream(sink, None, batch=FLUSH_EVERY)  # progress counts `phase`'s questions

    def contexts(question: Question, effective: RetrievalConfig, fingerprint: str) -> QuestionRecord:
        if not cuts:
            return context_record(ws, question, effective, fingerprint, round_no=round_no, phase=phase)
        started = time.perf_counter()
        configs = [effective, *(effective.with_budget(budget) for _, budget in cuts)]
        firsts = first_contexts(ws, question, configs, RULES)
        ms = (time.perf_counter() - started) * 1000  # the one ranking and all its cuts
        primary = record_of(ws, question, firsts[0], fingerprint, round_no, phase, ms)
        for (cut_phase, _), first in zip(cuts, firsts[1:]):
            cut_stream.add(record_of(ws, question, first, fingerprint, round_no, cut_phase, ms, primary))
        return primary

    try:
        return evaluate_each(ws, config, questions, contexts, stream, round_no=round_no, phase=phase)
    finally:
        cut_stream.close()
