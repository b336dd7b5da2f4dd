"""Score one config on a set of questions: retrieve → answer (→ verify) → score → record.

Each question's effective config is resolved once (global + its type's override) and passed
down. Records are written to the run store in question order, in batches, so an interrupted
evaluation resumes from the last finished question. LLM-backed roles run concurrently with a
bound; offline roles are CPU-bound and run in a plain loop (threads would only add overhead)."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Callable

from evolvemem.data.models import Question
from evolvemem.contracts.roles import AnswerResult
from evolvemem.workspace import Workspace

FLUSH_EVERY = 64
RecordFn = Callable[[dict], None]


@dataclass
class EvalOutcome:
    summary: dict
    records: list[dict]
    wall_seconds: float
    n_reused: int = 0


def _view_label(views: dict[str, int]) -> str:
    return "|".join(f"{name}:{rank}" for name, rank in sorted(views.items(), key=lambda kv: kv[1]))


class EffectiveConfigs:
    """The effective config (global + override) and its fingerprint, resolved once per question
    type rather than once per question: resolution validates a whole pydantic model."""

    def __init__(self, config: Any):
        self.config = config
        self._by_type: dict[str | None, tuple[Any, str]] = {}

    def __call__(self, question_type: str | None) -> tuple[Any, str]:
        if question_type not in self._by_type:
            effective = self.config.for_type(question_type)
            self._by_type[question_type] = (effective, effective.fingerprint())
        return self._by_type[question_type]


def answer_question(ws: Workspace, question: Question, effective: Any, fingerprint: str, *, protocol: str,
                    benchmark: str, judge: Any = None) -> dict:
    """The full per-question path under its effective config (route → retrieve → answer → verify →
    judge/retry, evolvemem/mechanisms/ama.py); returns one `question_records` row (without
    round/phase). Context, evidence recall and coverage describe the answer kept (the last one)."""
    from evolvemem.mechanisms.ama import answer_path
    from evolvemem.scoring import score_prediction
    from evolvemem.scoring.metrics import evidence_recall, is_abstention

    started = time.perf_counter()
    conversation_id = question.conversation_id
    trace = answer_path(ws, question, effective)
    final = trace.final
    answer: AnswerResult = final.answer
    cost = trace.cost
    latency_ms = (time.perf_counter() - started) * 1000

    in_context = {t for m in final.context for t in m.source_turn_ids}
    ranked = {t for attempt in trace.attempts for m in (*attempt.context, *attempt.cut) for t in m.source_turn_ids}
    gold = question.adversarial_answer if (protocol == "paper" and question.adversarial_answer) else question.answer
    record = {
        "question_id": question.question_id,
        "conversation_id": question.conversation_id,
        "category": question.category,
        "question_type": question.question_type,
        "question": question.text,
        "gold": gold or "",
        "prediction": answer.text,
        "evidence_ids": list(question.evidence),
        "evidence_recall": evidence_recall(question.evidence, in_context),
        "evidence_covered": evidence_recall(question.evidence, ws.covered(conversation_id, final.store)),
        "evidence_retrieved": evidence_recall(question.evidence, ranked),
        "abstained": is_abstention(answer.text),
        "failed": answer.failed,
        "error": answer.error or None,
        "context_ids": [m.memory_id for m in final.context],
        "context_views": [_view_label(views) for views in final.views],
        "cut_ids": [m.memory_id for m in final.cut],
        "sub_queries": list(trace.attempts[0].sub_queries),
        "config_fingerprint": fingerprint,
        "memory_version": ws.memory_version(question.conversation_id),
        "latency_ms": latency_ms,
        "granularity": trace.granularity,
        "route": trace.route_source,
        "judge_verdicts": list(trace.verdicts),
        "retries": trace.retries,
        "retry_sources": [attempt.source for attempt in trace.attempts[1:]],
        "refreshed_ids": list(trace.refreshed_ids),
    }
    if not answer.failed:
        record.update(score_prediction(question, answer.text, protocol=protocol, benchmark=benchmark))
        if judge is not None:
            verdict, judge_cost = judge.judge(question.text, question.answer or "not mentioned", answer.text)
            record["judge"] = verdict
            cost = cost + judge_cost
    record.update(calls=cost.calls, cache_hits=cost.cache_hits,
                  prompt_tokens=cost.prompt_tokens, completion_tokens=cost.completion_tokens)
    return record


def reuse_key(question_id: str, effective_fingerprint: str, memory_version: int) -> tuple:
    return (question_id, effective_fingerprint, memory_version)


REUSED_FIELDS = ("round", "phase")


def evaluate(ws: Workspace, config: Any, questions: list[Question], *, store: Any = None, round_no: int = 0,
             phase: str = "eval", concurrency: int = 8, protocol: str = "official",
             on_record: RecordFn | None = None, reuse: dict[tuple[str, str], dict] | None = None,
             on_stage: Callable[[str, int, int], None] | None = None) -> EvalOutcome:
    """Evaluate `config` on `questions`, writing records to `store` (if given) as they finish.

    `reuse` maps (question_id, effective-config fingerprint, memory version) to an earlier record:
    when the effective config and the conversation's memories are unchanged the record is copied,
    not recomputed (and costs no call). Memory stores the config needs and nobody built yet are
    built first (`on_stage` reports their progress)."""
    from evolvemem.memory.stores import stores_needed
    from evolvemem.scoring.aggregate import summarise

    started = time.perf_counter()
    ws.ensure_stores(stores_needed(config), progress=on_stage)
    done_ids: set[str] = set()
    if store is not None:
        store.drop_failed(round_no, phase)
        done_ids = store.finished_question_ids(round_no, phase)
    todo = [q for q in questions if q.question_id not in done_ids]
    # with an LLM decomposer, sub-queries are made inside the concurrent loop instead
    ws.prepare(todo, None if ws.roles.uses_llm else config)
    judge = ws.roles.judge
    benchmark = ws.dataset.name

    pending: dict[int, dict] = {}
    next_to_flush = 0
    buffer: list[dict] = []
    fresh: list[dict] = []
    n_reused = 0

    def finish(index: int, record: dict) -> None:
        nonlocal next_to_flush
        record = {"round": round_no, "phase": phase, **record}
        pending[index] = record
        while next_to_flush in pending:
            ready = pending.pop(next_to_flush)
            buffer.append(ready)
            fresh.append(ready)
            next_to_flush += 1
        if store is not None and len(buffer) >= FLUSH_EVERY:
            store.insert("question_records", buffer)
            buffer.clear()
        if on_record:
            on_record(record)

    resolve = EffectiveConfigs(config)

    def run_one(question: Question) -> dict:
        effective, fingerprint = resolve(question.question_type)
        if reuse is not None:
            key = reuse_key(question.question_id, fingerprint, ws.memory_version(question.conversation_id))
            if key in reuse:
                return {**reuse[key], "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "_reused": True}
        try:
            return answer_question(ws, question, effective, fingerprint, protocol=protocol, benchmark=benchmark,
                                   judge=judge)
        except Exception as exc:  # a role bug or an LLM fault must not kill the round
            return {"question_id": question.question_id, "conversation_id": question.conversation_id,
                    "category": question.category, "question_type": question.question_type,
                    "question": question.text, "gold": question.answer, "prediction": "",
                    "failed": True, "error": f"{type(exc).__name__}: {exc}"[:300]}

    try:
        if ws.roles.uses_llm and concurrency > 1:
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                futures = {pool.submit(run_one, q): i for i, q in enumerate(todo)}
                for fut in as_completed(futures):
                    record = fut.result()
                    n_reused += int(record.pop("_reused", False))
                    finish(futures[fut], record)
        else:
            for i, q in enumerate(todo):
                record = run_one(q)
                n_reused += int(record.pop("_reused", False))
                finish(i, record)
    finally:
        if store is not None and buffer:
            store.insert("question_records", buffer)
            buffer.clear()

    if store is not None:
        records = store.query(
            "SELECT * FROM question_records WHERE round = ? AND phase = ? ORDER BY question_id", [round_no, phase])
    else:
        records = fresh
    ds = ws.dataset
    summary = summarise(records, adversarial_categories=ds.adversarial_categories, category_names=ds.category_names)
    if reuse is not None:
        for record in records:
            if not record.get("failed"):
                reuse[reuse_key(record["question_id"], record["config_fingerprint"], record["memory_version"])] = {
                    k: v for k, v in record.items() if k not in REUSED_FIELDS}
    return EvalOutcome(summary, records, time.perf_counter() - started, n_reused)
