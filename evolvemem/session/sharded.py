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

from evolvemem.answering.context_reuse import AnswerMemo
from evolvemem.answering.evaluate import FLUSH_EVERY, EffectiveConfigs, ReuseKey, reuse_key, reused_row
from evolvemem.answering.shards import ShardTask, WorkerSetup, by_conversation, run_shard, shard_cpus
from evolvemem.contracts.usage import Usage
from evolvemem.data.models import Question
from evolvemem.executor import Executor
from evolvemem.loop.scorer import RoundJob
from evolvemem.loop.usage import usage_rows
from evolvemem.space.registry import added_dimensions
from evolvemem.store.run_store import RunStore
from evolvemem.workspace import Workspace, pack_conversation

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
        self.records: list[dict] = []
        self.usage: dict[tuple[int, str], dict[str, Usage]] = defaultdict(dict)
        self.flushed = time.perf_counter()

    def add(self, job: RoundJob, records: list[dict], usage: dict[str, Usage] | None = None) -> None:
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
    reuse: dict[ReuseKey, dict],
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
    setup = WorkerSetup(
        ws.roles.settings,
        ws.roles.cache_enabled,
        ws.embedder.model_name,
        tuple(added_dimensions().values()),
        ws.reranker.model_name if ws.reranker is not None else None,
        ws.second_embedder.model_name if ws.second_embedder is not None else None,
    )
    shared_memo = executor.share(memo.entries(), f"memo-{uuid.uuid4().hex}") if memo is not None else None
    outcomes = [ShardedOutcome() for _ in jobs]
    writer = _Writer(store)
    claimed: set[ReuseKey] = set()
    waiting: dict[ReuseKey, list[tuple[int, Question]]] = defaultdict(list)  # later jobs' copies of an answer
    fresh: list[list[Question]] = []
    for index, (job, todo) in enumerate(zip(jobs, todos)):
        resolve = EffectiveConfigs(job.config)
        copied, mine = [], []
        for question in todo:
            fingerprint = resolve(question.question_type)[1]
            row = reused_row(reuse, ws, question, fingerprint, job.round_no, job.phase)
            key = reuse_key(question.question_id, fingerprint, ws.memory_version(question.conversation_id))
            if row is not None:
                copied.append(row)
            elif key in claimed:
                waiting[key].append((index, question))
            else:
                claimed.add(key)
                mine.append(question)
        writer.add(job, copied)
        outcomes[index].seconds = time.perf_counter() - started
        fresh.append(mine)

    def run(questions: list[list[Question]]) -> list[list[Question]]:
        """Shard and run the questions of every job; returns those whose copies have no answer."""
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
                        tuple(group),
                        job.round_no,
                        job.phase,
                        protocol,
                        concurrency,
                        shared_memo,
                    )
                )
        tasks.sort(key=lambda task: -len(task.questions))  # the longest shards start first
        unanswered: list[list[Question]] = [[] for _ in jobs]
        for _, result in executor.map(run_shard, tasks, cpus=shard_cpus(ws.roles)):
            writer.add(jobs[result.job], result.records, result.usage)
            for record in result.records:
                key = reuse_key(record["question_id"], record["config_fingerprint"], record["memory_version"])
                for later, question in waiting.pop(key, []):
                    if record["failed"]:  # nothing to copy: the later job asks it itself
                        unanswered[later].append(question)
                        continue
                    copy = reused_row({key: record}, ws, question, key[1], jobs[later].round_no, jobs[later].phase)
                    writer.add(jobs[later], [copy] if copy is not None else [])
                    outcomes[later].seconds = time.perf_counter() - started
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
