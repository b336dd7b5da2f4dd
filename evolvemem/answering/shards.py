"""A round's evaluation split by conversation, for an executor whose workers are other processes.

The driver (the session) keeps everything a run owns: it copies the records of an unchanged
effective config itself, sends each conversation once as a `ConversationPack` (memories and
built indexes, embeddings included) and the run's answer memo once per batch, and writes every
record to the run store. A shard — one conversation's questions under one config — runs
`evaluate` in a worker on a workspace made from the pack, kept per worker process (later rounds
cost that worker no setup), and returns its records, the LLM usage they cost, the answers it
added to the memo and whether a model stopped answering. A shard writes nothing, so a shard run
twice (its worker died and Ray ran it again) is still recorded once.

Measured by benchmarks/scale.py: making a worker's workspace from a pack sent through Ray's
object store against rebuilding it from the content-addressed caches on the worker."""

from __future__ import annotations

import os
import time
from collections import OrderedDict, defaultdict
from dataclasses import dataclass, field
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from evolvemem.answering.context_reuse import AnswerMemo, MemoEntries
from evolvemem.answering.evaluate import evaluate
from evolvemem.contracts.local_models import LocalModels
from evolvemem.contracts.records import QuestionRecord
from evolvemem.contracts.usage import Usage
from evolvemem.data.models import Question
from evolvemem.paths import cache_dir
from evolvemem.retrieval.embeddings import DEFAULT_EMBEDDING_MODEL, Embedder
from evolvemem.retrieval.rerank import CrossEncoderReranker
from evolvemem.retrieval.second_embedder import SecondEmbedder
from evolvemem.roles.factory import ModelSettings, Roles, build_roles
from evolvemem.space.action_space import files_space
from evolvemem.space.budget import TokenBudget
from evolvemem.space.config import parse_config
from evolvemem.space.dimensions import Dimension
from evolvemem.workspace import ConversationPack, Workspace, workspace_from_pack

if TYPE_CHECKING:
    from evolvemem.executor import Shared

KEPT_WORKSPACES = 32  # conversations a worker process keeps built (least recently used dropped)
# A shard whose answers come from a model mostly waits on the network: it asks a quarter of a
# CPU, so four such shards share a core (with an offline reader a shard is CPU-bound: one CPU).
MODEL_SHARD_CPUS = 0.25


@dataclass(frozen=True)
class WorkerSetup:
    """How a worker makes the roles and workspace the driver has (the same for every shard of a run)."""

    settings: ModelSettings
    cache_enabled: bool
    local_models: LocalModels
    dimensions: tuple[Dimension, ...] = ()  # levers that emerged in the run, so its configs parse


@dataclass(frozen=True)
class ShardTask:
    job: int  # which evaluation of the driver's batch
    setup: WorkerSetup
    pack: Shared[ConversationPack]
    config: dict[str, Any]  # RetrievalConfig.model_dump(), parsed on the worker in the space its setup carries
    budget: TokenBudget  # the token budget the config carries (values alone do not hold it)
    questions: tuple[Question, ...]
    round_no: int
    phase: str
    protocol: str
    concurrency: int
    memo: Shared[MemoEntries] | None  # None: context-level reuse is off


@dataclass
class ShardResult:
    job: int
    records: list[QuestionRecord]  # in question order
    usage: dict[str, Usage]  # per role, what this shard's calls cost
    answers: MemoEntries = field(default_factory=MemoEntries)  # memo entries the shard added
    stopped: str | None = None  # a model whose circuit breaker tripped
    seconds: float = 0.0
    setup_seconds: float = 0.0  # making the workspace from its pack (0: the worker had it)
    worker_pid: int = 0


def shard_cpus(roles: Roles) -> float:
    return MODEL_SHARD_CPUS if roles.uses_llm else 1.0


def by_conversation(questions: list[Question]) -> list[list[Question]]:
    """Questions grouped by conversation, largest group first (the longest shards start first)."""
    groups: dict[str, list[Question]] = defaultdict(list)
    for question in questions:
        groups[question.conversation_id].append(question)
    return sorted(groups.values(), key=lambda group: (-len(group), group[0].conversation_id))


# ---- the worker side ---------------------------------------------------------------------------
_roles: dict[Hashable, Roles] = {}
_embedders: dict[Hashable, Embedder] = {}
_rerankers: dict[str, CrossEncoderReranker] = {}
_second_embedders: dict[Hashable, SecondEmbedder] = {}
_workspaces: OrderedDict[Hashable, Workspace] = OrderedDict()


def worker_roles(setup: WorkerSetup) -> Roles:
    key = (setup.settings, setup.cache_enabled, cache_dir())
    if key not in _roles:
        _roles[key] = build_roles(setup.settings, cache_enabled=setup.cache_enabled)
    return _roles[key]


def worker_embedder(setup: WorkerSetup) -> Embedder:
    encoder = setup.local_models.resolved_encoder()
    key = (setup.local_models.embedding, encoder, cache_dir())
    if key not in _embedders:
        _embedders[key] = Embedder(setup.local_models.embedding or DEFAULT_EMBEDDING_MODEL, encoder=encoder)
    return _embedders[key]


def worker_reranker(setup: WorkerSetup) -> CrossEncoderReranker | None:
    name = setup.local_models.rerank
    if not name:
        return None
    if name not in _rerankers:
        _rerankers[name] = CrossEncoderReranker(name)
    return _rerankers[name]


def worker_second_embedder(setup: WorkerSetup) -> SecondEmbedder | None:
    name = setup.local_models.second_embedding
    if not name:
        return None
    encoder = setup.local_models.resolved_encoder()
    key = (name, encoder, cache_dir())
    if key not in _second_embedders:
        _second_embedders[key] = SecondEmbedder(Embedder(name, encoder=encoder))
    return _second_embedders[key]


def worker_workspace(setup: WorkerSetup, pack: Shared[ConversationPack]) -> tuple[Workspace, float]:
    """The workspace of one pack in this process (made once), and the seconds making it took."""
    roles = worker_roles(setup)
    key = (pack.key, id(roles), setup.local_models)
    if key in _workspaces:
        _workspaces.move_to_end(key)
        return _workspaces[key], 0.0
    started = time.perf_counter()
    ws = workspace_from_pack(
        pack.get(), roles, worker_embedder(setup), worker_reranker(setup), worker_second_embedder(setup)
    )
    _workspaces[key] = ws
    while len(_workspaces) > KEPT_WORKSPACES:
        _workspaces.popitem(last=False)
    return ws, time.perf_counter() - started


def run_shard(task: ShardTask) -> ShardResult:
    """Evaluate one shard in this (worker) process; nothing is written here."""
    started = time.perf_counter()
    space = files_space().with_dimensions(task.setup.dimensions)  # a worker serves any run
    config = parse_config(task.config, source="shard", space=space)[0].with_budget(task.budget)
    ws, setup_seconds = worker_workspace(task.setup, task.pack)
    shipped = task.memo.get() if task.memo is not None else None
    memo = AnswerMemo(shipped) if shipped is not None else None
    before = ws.roles.usage_snapshot()
    outcome = evaluate(
        ws,
        config,
        list(task.questions),
        round_no=task.round_no,
        phase=task.phase,
        concurrency=task.concurrency,
        protocol=task.protocol,
        memo=memo,
    )
    after = ws.roles.usage_snapshot()
    usage = {role: now - before.get(role, Usage()) for role, now in after.items()}
    answers = memo.added_since(shipped) if memo is not None and shipped is not None else MemoEntries()
    return ShardResult(
        task.job,
        outcome.records,
        usage,
        answers,
        ws.roles.stopped_model(),
        time.perf_counter() - started,
        setup_seconds,
        os.getpid(),
    )
