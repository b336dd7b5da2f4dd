"""The round bracket's evaluation on a remote executor: every evaluation of a batch, split by
conversation into shards that run in parallel (answering/shards.py).

The driver copies the records of an unchanged effective config itself (config-level reuse, as
`evaluate` does in process), sends each conversation's pack once, and writes each shard's records
and their usage to the run store as the shard comes back: the store has one writer, and a driver
killed mid-batch loses only the shards in flight (a resume asks those questions again)."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from evolvemem.answering.context_reuse import AnswerMemo
from evolvemem.answering.evaluate import EffectiveConfigs, ReuseKey, reused_row
from evolvemem.answering.shards import ShardTask, WorkerSetup, by_conversation, run_shard, shard_cpus
from evolvemem.data.models import Question
from evolvemem.executor import Executor
from evolvemem.loop.scorer import RoundJob
from evolvemem.loop.usage import usage_rows
from evolvemem.space.registry import added_dimensions
from evolvemem.store.run_store import RunStore
from evolvemem.workspace import Workspace


@dataclass
class ShardedOutcome:
    """One evaluation of a batch: when its last shard came back, and a model that stopped answering."""

    seconds: float = 0.0
    stopped: str | None = None


def _write(store: RunStore, job: RoundJob, records: list[dict]) -> None:
    store.record_questions(records)
    if job.on_record is not None:
        for record in records:
            job.on_record(record)


def evaluate_sharded(executor: Executor, store: RunStore, ws: Workspace, jobs: list[RoundJob],
                     todos: list[list[Question]], *, reuse: dict[ReuseKey, dict], memo: AnswerMemo | None,
                     protocol: str, concurrency: int) -> list[ShardedOutcome]:
    """Evaluate `todos[i]` under `jobs[i]` for every i at once; returns one outcome per job."""
    started = time.perf_counter()
    setup = WorkerSetup(ws.roles.settings, ws.roles.cache_enabled, ws.embedder.model_name,
                        tuple(added_dimensions().values()))
    shared_memo = executor.share(memo.entries(), f"memo-{uuid.uuid4().hex}") if memo is not None else None
    outcomes = [ShardedOutcome() for _ in jobs]
    tasks: list[ShardTask] = []
    for index, (job, todo) in enumerate(zip(jobs, todos)):
        resolve = EffectiveConfigs(job.config)
        copied, fresh = [], []
        for question in todo:
            row = reused_row(reuse, ws, question, resolve(question.question_type)[1], job.round_no, job.phase)
            (fresh.append(question) if row is None else copied.append(row))
        _write(store, job, copied)
        outcomes[index].seconds = time.perf_counter() - started
        # questions embedded here, once, into the on-disk cache: a worker of this machine reads
        # them there instead of loading the embedding model
        ws.prepare(fresh, None if ws.roles.uses_llm else job.config)
        config = job.config.model_dump()
        for group in by_conversation(fresh):
            pack = ws.pack(group[0].conversation_id)
            tasks.append(ShardTask(index, setup, executor.share(pack, pack.key), config, tuple(group), job.round_no,
                                   job.phase, protocol, concurrency, shared_memo))
    tasks.sort(key=lambda task: -len(task.questions))  # the longest shards start first
    for _, result in executor.map(run_shard, tasks, cpus=shard_cpus(ws.roles)):
        job = jobs[result.job]
        _write(store, job, result.records)
        store.record_usage(usage_rows({}, result.usage, job.round_no, job.phase))
        if memo is not None:
            memo.merge(result.answers)
        outcome = outcomes[result.job]
        outcome.stopped = outcome.stopped or result.stopped
        outcome.seconds = time.perf_counter() - started
    return outcomes
