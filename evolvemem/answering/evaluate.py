"""Score one config on a set of questions: retrieve → answer (→ verify) → score → record.

A pure function of (workspace, config, questions): it neither builds memory stores (the session
builds what the config needs first) nor writes to a run store; records go to a `sink` as they
finish — an answer that made a paid call at once, free ones (cache hits, reused records, offline
answers) in batches of at most FLUSH_SECONDS — so a killed evaluation loses at most the answers
in flight and resumes from the finished ones. Each question's effective config is resolved once per question type and passed down.
LLM-backed roles run concurrently with a bound; offline roles are CPU-bound and run in a plain
loop (threads would only add overhead)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Iterable

from evolvemem.answering.context_reuse import CONFIG_REUSE, CONTEXT_REUSE, AnswerMemo
from evolvemem.answering.oracle import ORACLE_STORE
from evolvemem.answering.path import AnswerTrace, answer_path
from evolvemem.answering.stores import stores_needed
from evolvemem.contracts.records import QuestionRecord
from evolvemem.contracts.roles import AnswerResult
from evolvemem.contracts.usage import Usage
from evolvemem.contracts.vocab import ContextMode
from evolvemem.data.models import Question
from evolvemem.benchmarks import score_prediction
from evolvemem.retrieval.retriever import context_tokens
from evolvemem.scoring.aggregate import EvaluationScores, summarise
from evolvemem.scoring.failure_split import reader_split
from evolvemem.scoring.metrics import evidence_recall, is_abstention
from evolvemem.workspace import Workspace

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig

FLUSH_EVERY = 64  # records a free batch holds at most
FLUSH_SECONDS = 0.5  # ... and the longest it waits
ANSWER_THREAD_PREFIX = "evolvemem-answer"  # the CLI's Ctrl-C handler looks for these threads
RecordFn = Callable[[QuestionRecord], None]
SinkFn = Callable[[list[QuestionRecord]], object]
ReuseKey = tuple[str, str | None, int | None]
ReuseMap = dict[ReuseKey, QuestionRecord]
# the per-question step of an evaluation: (question, its effective config, that config's fingerprint) -> record
PerQuestion = Callable[[Question, "RetrievalConfig", str], QuestionRecord]


@dataclass
class EvalOutcome:
    summary: EvaluationScores  # over the records evaluated in this call
    records: list[QuestionRecord]  # in question order
    wall_seconds: float
    n_reused: int = 0  # records copied whole (config-level reuse)
    n_context_reused: int = 0  # records whose answers all came from the context memo


def view_label(views: dict[str, int]) -> str:
    return "|".join(f"{name}:{rank}" for name, rank in sorted(views.items(), key=lambda kv: kv[1]))


class EffectiveConfigs:
    """The effective config (global + override) and its fingerprint, resolved once per question
    type rather than once per question: resolution validates a whole pydantic model."""

    def __init__(self, config: RetrievalConfig):
        self.config = config
        self._by_type: dict[str | None, tuple[RetrievalConfig, str]] = {}

    def __call__(self, question_type: str | None) -> tuple[RetrievalConfig, str]:
        if question_type not in self._by_type:
            effective = self.config.for_type(question_type)
            self._by_type[question_type] = (effective, effective.fingerprint())
        return self._by_type[question_type]


def answer_question(
    ws: Workspace,
    question: Question,
    effective: RetrievalConfig,
    fingerprint: str,
    *,
    protocol: str,
    benchmark: str,
    round_no: int = 0,
    phase: str = "eval",
    memo: AnswerMemo | None = None,
    mode: ContextMode = ContextMode.RETRIEVED,
) -> QuestionRecord:
    """The full per-question path under its effective config (route → retrieve → answer → verify →
    judge/retry, evolvemem/answering/path.py) and its scores. Context, evidence recall and coverage
    describe the answer kept (the last one). With `memo`, answers to a context already answered
    are reused (answering/context_reuse.py). An oracle `mode` answers from the gold evidence
    (answering/oracle.py). When a model answered, the record holds its reader split."""
    started = time.perf_counter()
    trace = answer_path(ws, question, effective, memo, mode)
    final = trace.final
    answer: AnswerResult = final.answer
    latency_ms = (time.perf_counter() - started) * 1000
    ranked = {t for attempt in trace.attempts for m in (*attempt.context, *attempt.cut) for t in m.source_turn_ids}
    gold = question.adversarial_answer if (protocol == "paper" and question.adversarial_answer) else question.answer
    scores: dict[str, float] = {}
    judged, cost = None, trace.cost
    if not answer.failed:
        scores = score_prediction(question, answer.text, protocol=protocol, benchmark_name=benchmark)
        judged, cost = _judged(ws, question, answer.text, trace, cost, memo)
    record = replace(
        unanswered_record(question, round_no, phase),
        gold=gold or "",
        prediction=answer.text,
        f1=scores.get("f1"),
        bleu1=scores.get("bleu1"),
        exact_match=scores.get("exact_match"),
        mc_accuracy=scores.get("mc_accuracy"),
        judge=judged,
        abstained=is_abstention(answer.text),
        failed=answer.failed,
        error=answer.error or None,
        context_ids=tuple(m.memory_id for m in final.context),
        context_views=tuple(view_label(views) for views in final.views),
        cut_ids=tuple(m.memory_id for m in final.cut),
        sub_queries=tuple(trace.attempts[0].sub_queries),
        granularity=trace.granularity,
        route=trace.route_source,
        judge_verdicts=tuple(trace.verdicts),
        retries=trace.retries,
        retry_sources=tuple(attempt.source for attempt in trace.attempts[1:]),
        refreshed_ids=tuple(trace.refreshed_ids),
        prompt_trimmed=tuple(note for attempt in trace.attempts for note in attempt.answer.trimmed()),
        reused=CONTEXT_REUSE if trace.context_reused else None,
        context_key=trace.answer_keys[-1] if trace.answer_keys else None,
        context_tokens=context_tokens(final.context),
        context_mode=str(mode),
    )
    record = with_evidence_and_cost(
        record,
        ws,
        question,
        in_context={t for m in final.context for t in m.source_turn_ids},
        covered=ws.covered(question.conversation_id, final.store),
        ranked=ranked,
        fingerprint=fingerprint,
        latency_ms=latency_ms,
        cost=cost,
    )
    return with_reader_split(record) if ws.roles.model_answers else record


def with_reader_split(record: QuestionRecord) -> QuestionRecord:
    """`record` with its place in the reader failure split (scoring/failure_split.py); a failed
    or unscored answer has none."""
    if record.failed or (record.f1 is None and record.judge is None):
        return record
    split = reader_split(
        evidence_recall=record.evidence_recall,
        f1=record.f1,
        judge=record.judge,
        abstained=bool(record.abstained),
        prediction=record.prediction,
        gold=record.gold,
    )
    return replace(
        record,
        evidence_in_context=None if split.evidence is None else str(split.evidence),
        answer_right=split.right,
        reader_failure=None if split.failure is None else str(split.failure),
    )


def _judged(
    ws: Workspace, question: Question, prediction: str, trace: AnswerTrace, cost: Usage, memo: AnswerMemo | None
) -> tuple[float | None, Usage]:
    """The judge's verdict on the answer kept and the cost with its call (no judge: None); a reused
    answer keeps its verdict too, with no call."""
    if ws.roles.judge is None:
        return None, cost
    final_key = trace.answer_keys[-1] if trace.answer_keys else ""
    judged = memo.verdict(final_key) if memo is not None and trace.context_reused else None
    if judged is None:
        verdict, judge_cost = ws.roles.judge.judge(question.text, question.answer or "not mentioned", prediction)
        judged = None if verdict is None else float(verdict)
        cost = cost + judge_cost
        if memo is not None:
            memo.put_verdict(final_key, judged)
    return judged, cost


def unanswered_record(question: Question, round_no: int, phase: str) -> QuestionRecord:
    """What every record of `question` in (round_no, phase) holds before it is answered or scored:
    who asked what, with an empty prediction."""
    return QuestionRecord(
        round=round_no,
        phase=phase,
        question_id=question.question_id,
        conversation_id=question.conversation_id,
        category=question.category,
        question_type=question.question_type,
        question=question.text,
        gold=question.answer or "",
        prediction="",
    )


def with_evidence_and_cost(
    record: QuestionRecord,
    ws: Workspace,
    question: Question,
    *,
    in_context: Iterable[str | Iterable[str]],
    covered: Iterable[str | Iterable[str]],
    ranked: Iterable[str | Iterable[str]],
    fingerprint: str,
    latency_ms: float,
    cost: Usage,
) -> QuestionRecord:
    """`record` with what an answer and a contexts-only record both measure: evidence recall of the
    turns `in_context`, `covered` by the store read and `ranked` before the cut; the effective
    config and memories it ran under; its wall time and its cost."""
    return replace(
        record,
        evidence_ids=tuple(question.evidence),
        evidence_recall=evidence_recall(question.evidence, in_context),
        evidence_covered=evidence_recall(question.evidence, covered),
        evidence_retrieved=evidence_recall(question.evidence, ranked),
        config_fingerprint=fingerprint,
        memory_version=ws.memory_version(question.conversation_id),
        latency_ms=latency_ms,
        calls=cost.calls,
        cache_hits=cost.cache_hits,
        prompt_tokens=cost.prompt_tokens,
        completion_tokens=cost.completion_tokens,
    )


def failed_record(question: Question, error: str, round_no: int, phase: str) -> QuestionRecord:
    """A question whose path raised (a role bug or an LLM fault must not kill the round)."""
    return replace(unanswered_record(question, round_no, phase), failed=True, error=error[:300])


def reuse_key(question_id: str, effective_fingerprint: str | None, memory_version: int | None) -> ReuseKey:
    return (question_id, effective_fingerprint, memory_version)


def record_key(record: QuestionRecord) -> ReuseKey:
    """The reuse key of a record: its question, effective config and memories."""
    return reuse_key(record.question_id, record.config_fingerprint, record.memory_version)


def reused_record(
    reuse: ReuseMap, ws: Workspace, question: Question, fingerprint: str | None, round_no: int, phase: str
) -> QuestionRecord | None:
    """An earlier record of this question under the same effective config and memories, as a
    record of (round_no, phase) that cost nothing (None: it must be answered)."""
    earlier = reuse.get(reuse_key(question.question_id, fingerprint, ws.memory_version(question.conversation_id)))
    if earlier is None:
        return None
    return replace(
        earlier,
        round=round_no,
        phase=phase,
        calls=0,
        cache_hits=0,
        prompt_tokens=0,
        completion_tokens=0,
        reused=CONFIG_REUSE,
    )


def remember(reuse: ReuseMap, records: Iterable[QuestionRecord]) -> None:
    """Add answered records to a reuse map (failed ones are asked again; a contexts-only record,
    rung 0's or the evidence objective's, holds no answer to reuse; an oracle answer is no answer
    of the config's own context)."""
    for record in records:
        if record.answered and record.context_mode in (None, ContextMode.RETRIEVED):
            reuse[record_key(record)] = record


class RecordStream:
    """Finished records on their way to a sink, in order of finishing. A batch is written once it
    holds `batch` records, or `seconds` after the last write, and at `close`; with `paid_at_once`
    a record that made a paid call is written at once (with its usage: the session's sink records
    both), so a kill loses neither. `on_record` sees each record as it arrives (progress bars)."""

    def __init__(
        self,
        sink: SinkFn | None,
        on_record: RecordFn | None,
        *,
        batch: int,
        seconds: float | None = None,
        paid_at_once: bool = False,
    ):
        self.sink, self.on_record = sink, on_record
        self.batch, self.seconds, self.paid_at_once = batch, seconds, paid_at_once
        self.buffer: list[QuestionRecord] = []
        self.last_flush = time.monotonic()

    def add(self, record: QuestionRecord) -> None:
        self.buffer.append(record)
        if self.sink is not None and self._due(record):
            self.flush()
        if self.on_record:
            self.on_record(record)

    def _due(self, record: QuestionRecord) -> bool:
        if self.paid_at_once and record.calls:
            return True
        if len(self.buffer) >= self.batch:
            return True
        return self.seconds is not None and time.monotonic() - self.last_flush >= self.seconds

    def flush(self) -> None:
        if self.sink is not None:
            self.sink(list(self.buffer))
        self.buffer.clear()
        self.last_flush = time.monotonic()

    def close(self) -> None:
        """Write what is left (called in a `finally`: an interrupted evaluation keeps it)."""
        if self.sink is not None and self.buffer:
            self.flush()


AnswerOne = Callable[[Question], tuple[QuestionRecord, bool]]


def answer_each(
    questions: list[Question], answer_one: AnswerOne, done: Callable[[int, QuestionRecord, bool], None], *, threads: int
) -> None:
    """`answer_one` for every question, `done(index, record, reused)` as each finishes: on `threads`
    threads when more than one (LLM roles wait on the network), else in a plain loop (offline roles
    are CPU-bound: threads would only add overhead)."""
    if threads <= 1:
        for i, q in enumerate(questions):
            done(i, *answer_one(q))
        return
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=ANSWER_THREAD_PREFIX)
    try:
        futures = {pool.submit(answer_one, q): i for i, q in enumerate(questions)}
        for fut in as_completed(futures):
            done(futures[fut], *fut.result())
    finally:
        # on Ctrl-C the queued questions are cancelled and nobody waits for calls in flight
        # (the CLI exits without them: their answers were never recorded, a resume asks again)
        pool.shutdown(wait=False, cancel_futures=True)


def evaluate_each(
    ws: Workspace,
    config: RetrievalConfig,
    questions: list[Question],
    per_question: PerQuestion,
    stream: RecordStream,
    *,
    round_no: int,
    phase: str,
    threads: int = 1,
    reuse: ReuseMap | None = None,
) -> EvalOutcome:
    """The one skeleton of an evaluation: build the stores `config` reads and prepare the questions;
    then for each question resolve its effective config once per type, copy an earlier record of
    it from `reuse` or make one with `per_question` (a question whose step raises is a failed
    record: a role bug or an LLM fault must not kill the round), and stream the records to their
    sink; then summarise them. `evaluate` answers, `evaluate_contexts` only builds the contexts."""
    started = time.perf_counter()
    ws.ensure_stores(stores_needed(config), conversations={q.conversation_id for q in questions})
    # with an LLM decomposer, sub-queries are made inside the concurrent loop instead
    ws.prepare(questions, config)
    resolve = EffectiveConfigs(config)
    finished: dict[int, QuestionRecord] = {}
    n_reused = 0

    def one(question: Question) -> tuple[QuestionRecord, bool]:
        effective, fingerprint = resolve(question.question_type)
        if reuse is not None:
            copied = reused_record(reuse, ws, question, fingerprint, round_no, phase)
            if copied is not None:
                return copied, True
        try:
            return per_question(question, effective, fingerprint), False
        except Exception as exc:  # a role bug or an LLM fault must not kill the round
            return failed_record(question, f"{type(exc).__name__}: {exc}", round_no, phase), False

    def done(index: int, record: QuestionRecord, reused: bool) -> None:
        nonlocal n_reused
        n_reused += int(reused)
        finished[index] = record
        stream.add(record)

    try:
        answer_each(questions, one, done, threads=threads)
    finally:
        stream.close()
    records = [finished[i] for i in sorted(finished)]  # in question order
    if reuse is not None:
        remember(reuse, records)
    summary = summarise(records, category_names=ws.dataset.category_names)
    n_context = sum(1 for r in records if r.reused == CONTEXT_REUSE)
    return EvalOutcome(summary, records, time.perf_counter() - started, n_reused, n_context)


def evaluate(
    ws: Workspace,
    config: RetrievalConfig,
    questions: list[Question],
    *,
    round_no: int = 0,
    phase: str = "eval",
    concurrency: int = 8,
    protocol: str = "official",
    on_record: RecordFn | None = None,
    sink: SinkFn | None = None,
    reuse: ReuseMap | None = None,
    memo: AnswerMemo | None = None,
    mode: ContextMode = ContextMode.RETRIEVED,
) -> EvalOutcome:
    """Evaluate `config` on `questions` (the memory stores it reads are built first where they are
    not yet: the session's `score_round` builds them before, so their cost is the round's). Records
    reach `sink` in question order, in batches, as they finish;
    `on_record` sees each one as it finishes (progress bars).

    `reuse` maps (question_id, effective-config fingerprint, memory version) to an earlier record:
    when the effective config and the conversation's memories are unchanged the record is copied,
    not recomputed (and costs no call); the records scored here are added to it. `memo` reuses
    answers at the level of a question's answer context (answering/context_reuse.py). An oracle
    `mode` hands the reader the gold evidence instead of the config's context (answering/oracle.py)."""
    benchmark = ws.dataset.name

    def answer(question: Question, effective: RetrievalConfig, fingerprint: str) -> QuestionRecord:
        return answer_question(
            ws,
            question,
            effective,
            fingerprint,
            protocol=protocol,
            benchmark=benchmark,
            round_no=round_no,
            phase=phase,
            memo=memo,
            mode=mode,
        )

    if mode is not ContextMode.RETRIEVED:
        ws.ensure_stores({ORACLE_STORE})  # the gold turns' raw memories (built from the turns: free)
    # a paid answer is written at once; free ones wait for a batch, bounded in size and in time
    stream = RecordStream(sink, on_record, batch=FLUSH_EVERY, seconds=FLUSH_SECONDS, paid_at_once=True)
    threads = concurrency if ws.roles.uses_llm else 1
    return evaluate_each(
        ws, config, questions, answer, stream, round_no=round_no, phase=phase, threads=threads, reuse=reuse
    )
