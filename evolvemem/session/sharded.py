"""The round bracket's evaluation on a remote executor: every evaluation of a batch, split by
conversation into shards that run in parallel (answering/shards.py).

The driver copies the records of an unchanged effective config itself (config-level reuse, as
`evaluate` does in process), sends each conversation's pack once, and writes the shards' records
and their usage to the run store as shards come back: the store has one writer, and a driver
killed mid-batch loses only the shards in flight and its last unwritten batch (a resume asks
those questions again)."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evolvemem.answering.context_reuse import AnswerMemo, MemoEntries
from evolvemem.answering.evaluate import (
    FLUSH_EVERY,
    EffectiveConfigs,
    ReuseKey,
    ReuseMap,
    record_key,
    reuse_key,
    reused_record,
)
from evolvemem.answering.shards import ShardTask, WorkerSetup, by_conversation, run_shard, shard_cpus
from evolvemem.contracts.records import QuestionRecord
from evolvemem.contracts.usage import Usage
from evolvemem.data.models import Question
from evolvemem.executor import Executor
from evolvemem.loop.scorer import RoundJob
from evolvemem.loop.usage import usage_rows
from evolvemem.space.action_space import files_space
from evolvemem.store.run_store import RunStore
from evolvemem.workspace import Workspace, pack_conversation

if TYPE_CHECKING:
    from evolvemem.executor import Shared

FLUSH_SECONDS = 2.0


@dataclass
class ShardedOutcome:
    """One evaluation of a batch: when its last shard came back, and a model that stopped answering."""

    seconds: float = 0.0
    stopped: str | None = None


class _Writer:
    """The shards' records and usage, written in batches: a DuckDB write costs about as much for
    one record as for a hundred (13 ms against 0.3 ms a record, measured by benchmarks/scale.py),
    so a round of many one-question shards (LongMemEval: one conversation a question) would
    otherwise be bound by the driver. A batch is written once it holds `FLUSH_EVERY` records or
    `FLUSH_SECONDS` have passed, and at the end: a killed driver loses at most that much, as an
    in-process evaluation loses at most its last unflushed batch."""

    def __init__(self, store: RunStore):
        self.store = store
        self.records: list[QuestionRecord] = []
        self.usage: dict[tuple[int, str], dict[str, Usage]] = defaultdict(dict)
        self.flushed = time.perf_counter()

    def add(self, job: RoundJob, records: list[QuestionRecord], usage: dict[str, Usage] | None = None) -> None:
        self.records += records
        totals = self.usage[(job.round_no, job.phase)]
        for role, spent in (usage or {}).items():
            totals[role] = totals.get(role, Usage()) + spent
        if job.on_record is not None:
            for record in records:
                job.on_record(record)
        if len(self.records) >= FLUSH_EVERY or time.perf_counter() - self.flushed >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        self.store.record_questions(self.records)
        for (round_no, phase), spent in self.usage.items():
            self.store.record_usage(usage_rows({}, spent, round_no, phase))
        self.records, self.usage, self.flushed = [], defaultdict(dict), time.perf_counter()


def evaluate_sharded(
    executor: Executor,
    store: RunStore,
    ws: Workspace,
    jobs: list[RoundJob],
    todos: list[list[Question]],
    *,
    reuse: ReuseMap,
    memo: AnswerMemo | None,
    protocol: str,
    concurrency: int,
) -> list[ShardedOutcome]:
    """Evaluate `todos[i]` under `jobs[i]` for every i at once; returns one outcome per job.

    As one after another in process, a question a job of the batch shares with an earlier one
    (same effective config and memories: candidates that differ only in other question types'
    settings) is answered once and copied to the later job; a question whose answer to the
    same context another candidate gives in the same batch is asked twice, since both are asked
    at once (in process the second would be reused by context)."""
    started = time.perf_counter()
    space = files_space()
    for job in jobs:  # the levers of every config of the batch (one run's: each space holds the one before)
        space = space.with_dimensions(job.config.space.added())
    setup = WorkerSetup(ws.roles.settings, ws.roles.cache_enabled, ws.local_models, space.added())
    shared_memo = executor.share(memo.entries(), f"memo-{uuid.uuid4().hex}") if memo is not None else None
    outcomes = [ShardedOutcome() for _ in jobs]
    writer = _Writer(store)
    batch = _Batch(ws, jobs, writer, outcomes, started)
    fresh = batch.claim(reuse, todos)

    def run(questions: list[list[Question]]) -> list[list[Question]]:
        """Shard and run the questions of every job; returns those whose copies have no answer."""
        tasks = _shard_tasks(executor, ws, jobs, questions, setup, shared_memo, protocol, concurrency)
        unanswered: list[list[Question]] = [[] for _ in jobs]
        for _, result in executor.map(run_shard, tasks, cpus=shard_cpus(ws.roles)):
            writer.add(jobs[result.job], result.records, result.usage)
            for later, question in batch.copy_answers(result.records):
                unanswered[later].append(question)
            if memo is not None:
                memo.merge(result.answers)
            outcome = outcomes[result.job]
            outcome.stopped = outcome.stopped or result.stopped
            outcome.seconds = time.perf_counter() - started
        return unanswered

    try:
        unanswered = run(fresh)
        if any(unanswered):
            run(unanswered)
    finally:  # what came back is kept, whatever stops the batch (Ctrl-C, a failed shard)
        writer.flush()
    return outcomes


class _Batch:
    """Which job of a batch answers each question: the first to need an answer claims it, later
    jobs wait for its record and copy it (config-level reuse within the batch)."""

    def __init__(
        self, ws: Workspace, jobs: list[RoundJob], writer: _Writer, outcomes: list[ShardedOutcome], started: float
    ):
        self.ws, self.jobs, self.writer, self.outcomes, self.started = ws, jobs, writer, outcomes, started
        self.waiting: dict[ReuseKey, list[tuple[int, Question]]] = defaultdict(list)  # later jobs' copies

    def claim(self, reuse: ReuseMap, todos: list[list[Question]]) -> list[list[Question]]:
        """Each job's questions to ask: earlier records are copied at once, a question an earlier
        job of the batch claimed waits for its answer."""
        claimed: set[ReuseKey] = set()
        fresh: list[list[Question]] = []
        for index, (job, todo) in enumerate(zip(self.jobs, todos)):
            resolve = EffectiveConfigs(job.config)
            copied: list[QuestionRecord] = []
            mine: list[Question] = []
            for question in todo:
                fingerprint = resolve(question.question_type)[1]
                copy = reused_record(reuse, self.ws, question, fingerprint, job.round_no, job.phase)
                key = reuse_key(question.question_id, fingerprint, self.ws.memory_version(question.conversation_id))
                if copy is not None:
                    copied.append(copy)
                elif key in claimed:
                    self.waiting[key].append((index, question))
                else:
                    claimed.add(key)
                    mine.append(question)
            self.writer.add(job, copied)
            self.outcomes[index].seconds = time.perf_counter() - self.started
            fresh.append(mine)
        return fresh

    def copy_answers(self, records: list[QuestionRecord]) -> list[tuple[int, Question]]:
        """Copy each answered record to the later jobs waiting for it; returns the (job, question)
        pairs whose record failed: nothing to copy, the later job asks it itself."""
        unanswered = []
        for record in records:
            key = record_key(record)
            for later, question in self.waiting.pop(key, []):
                if record.failed:
                    unanswered.append((later, question))
                    continue
                job = self.jobs[later]
                copy = reused_record({key: record}, self.ws, question, key[1], job.round_no, job.phase)
                self.writer.add(job, [copy] if copy is not None else [])
                self.outcomes[later].seconds = time.perf_counter() - self.started
        return unanswered


def _shard_tasks(
    executor: Executor,
    ws: Workspace,
    jobs: list[RoundJob],
    questions: list[list[Question]],
    setup: WorkerSetup,
    shared_memo: Shared[MemoEntries] | None,
    protocol: str,
    concurrency: int,
) -> list[ShardTask]:
    """One task per (job, conversation), the longest first."""
    tasks = []
    for index, (job, mine) in enumerate(zip(jobs, questions)):
        # embedded here, once, into the on-disk cache: a worker of this machine reads them there
        ws.prepare(mine, job.config)
        config = job.config.model_dump()
        for group in by_conversation(mine):
            pack = pack_conversation(ws, group[0].conversation_id)
            tasks.append(
                ShardTask(
                    index,
                    setup,
                    executor.share(pack, pack.key),
                    config,
                    job.config.budget,
                    tuple(group),
                    job.round_no,
                    job.phase,
                    protocol,
                    concurrency,
                    shared_memo,
                )
            )
    tasks.sort(key=lambda task: -len(task.questions))  # the longest shards start first
    return tasks
