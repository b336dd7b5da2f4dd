"""`Memory`: the evolved config in an agent — add turns, search, get the reader's context, answer.

What is tuned is what is served: every verb calls the code evaluation calls. A user's turns form a
benchmark `Conversation`; the config's extractor turns them into memories (only the new turns
are extracted when turns are appended); `Workspace.load_conversation` consolidates and indexes
them as `Workspace.build` does; a query becomes a `Question` typed by the same rules and dated
like a benchmark question (the user's last session); retrieval, routing, refreshing and context
formatting are those of the answer path (`answering/path.py`), and `answer` *is* the answer path.
So a conversation added turn by turn gives the same contexts, byte for byte, as the same
conversation evaluated from a file.

Users live in namespaces (an API key each, when served); a user's state is rebuilt only when its
own turns change, and a reader never waits for a writer: the new state is swapped in whole.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence, cast

from evolvemem.answering.evaluate import EffectiveConfigs
from evolvemem.answering.first_context import first_context
from evolvemem.answering.path import answer_path, plugins_of
from evolvemem.answering.stores import stores_for, stores_needed
from evolvemem.contracts.closing import Closing
from evolvemem.contracts.local_models import LocalModels
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.data.models import Conversation, Dataset, Question
from evolvemem.errors import EvolveMemError
from evolvemem.mechanisms.ama_refresh import asks_current_state
from evolvemem.mechanisms.ama_router import FACT
from evolvemem.qtypes import QUESTION_TYPES, classify_question
from evolvemem.retrieval.rerank import CrossEncoderReranker, load_reranker
from evolvemem.retrieval.retriever import RetrievalResult, RetrievedItem, Retriever, context_tokens
from evolvemem.retrieval.stage_models import require_stage_models
from evolvemem.retrieval.second_embedder import (
    SecondEmbedder,
    load_second_embedder,
    uses_second_view,
)
from evolvemem.roles.context_format import format_context
from evolvemem.serving.config_source import ConfigSpec, LoadedConfig, load_serving_config, spec_at
from evolvemem.serving.conversation import build_conversation, new_turns
from evolvemem.serving.embedding import ServingEmbedder
from evolvemem.serving.models import (
    AddResult,
    AnswerResult,
    ContextResult,
    ForgetResult,
    Hit,
    SearchResult,
    TurnIn,
    blank,
    check_user_id,
)
from evolvemem.serving.store import MemoryStore, StoredTurn, TraceRow, replies_of, utcnow
from evolvemem.serving.traces import TraceBuffer
from evolvemem.serving.user_gate import UserGate
from evolvemem.workspace import Workspace

if TYPE_CHECKING:
    from evolvemem.retrieval.embeddings import Embedder
    from evolvemem.roles.factory import ModelSettings, Roles
    from evolvemem.space.config import RetrievalConfig

DEFAULT_NAMESPACE = "local"
DATASET_NAME = "evolvemem-memory"
TurnsIn = Iterable["TurnIn | dict[str, Any]"]


@dataclass(frozen=True)
class _UserState:
    """One user's memory as of its last change: immutable, swapped whole."""

    conversation: Conversation
    turns: tuple[StoredTurn, ...]
    units: tuple[MemoryUnit, ...]  # extracted, before consolidation, in conversation order
    extractor_key: str
    workspace: Workspace

    @property
    def vectors(self) -> dict[str, Any]:
        """content hash -> vector of every indexed memory (what a rebuild need not embed again)."""
        state = self.workspace.indexes[self.conversation.conversation_id].state
        return {m.content_hash: state.embeddings[i] for i, m in enumerate(state.memories)}


@dataclass(frozen=True)
class _Retrieved:
    state: _UserState
    question: Question
    effective: RetrievalConfig
    config_hash: str
    result: RetrievalResult
    context: tuple[MemoryUnit, ...]  # what the reader gets (refreshed when the config refreshes)


@dataclass(frozen=True)
class _StoresOnDemand:
    """A user's workspace as the first context reads it: a store other than facts is built the
    first time a question is routed to it (its contents embedded through evaluation's cache)."""

    workspace: Workspace
    embedder: ServingEmbedder

    def retriever(self, conversation_id: str, store: str) -> Retriever:
        if store != FACT:
            with self.embedder.supplying({}):
                self.workspace.ensure_stores({store})
        return self.workspace.retriever(conversation_id, store)


class Memory(Closing):
    """A memory store opened with a retrieval config. Use `Memory.open(...)`; close it (or use
    it as a context manager) to flush traces and release the store's write lock."""

    def __init__(
        self,
        store: MemoryStore,
        loaded: LoadedConfig,
        roles: Roles,
        embedder: ServingEmbedder,
        config_spec: ConfigSpec | None = None,
        reranker: CrossEncoderReranker | None = None,
        second_embedder: SecondEmbedder | None = None,
    ):
        self.store = store
        self.roles = roles
        self.embedder = embedder
        self.reranker = reranker  # the rerank stage's cross-encoder, if any
        self.second_embedder = second_embedder  # the second dense view's model, if any
        self.config_spec = config_spec
        self._config = loaded
        self._hash = loaded.config.fingerprint()
        self._current = (EffectiveConfigs(loaded.config), self._hash)
        self._states: dict[tuple[str, str], _UserState] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._gates: dict[tuple[str, str], UserGate] = {}
        self._locks_guard = threading.Lock()
        self.traces = TraceBuffer(store)

    # ---- opening --------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        store: str | Path,
        config: str | Path = "default",
        *,
        models: ModelSettings | None = None,
        local_models: LocalModels = LocalModels(),
        cache_enabled: bool = True,
        budget: int | None = None,
    ) -> Memory:
        """Open (or create) the store file `store` with `config`: a preset name, a config file or
        a run directory (its best round; the run's models unless `models` is given). Without
        models the roles are offline: rule-based extraction, the extractive reader. `local_models`
        are the embedding model, the cross-encoder of a config that reranks and the model of a
        config's second dense view; each not given is the run's own when `config` is a run. The
        second model's memory vectors live in its embedding cache by content, not in the store file.
        `budget`: a run directory's point at that token budget (a `--budgets` run's frontier)."""
        from evolvemem.retrieval.embeddings import DEFAULT_EMBEDDING_MODEL, Embedder
        from evolvemem.roles.factory import ModelSettings, build_roles

        spec = spec_at(config, budget)
        loaded = load_serving_config(spec)
        settings = models or loaded.models or ModelSettings()
        roles = build_roles(settings, cache_enabled=cache_enabled, reply_cache=replies_of(Path(store)))
        opened = MemoryStore(store)
        try:
            local = local_models.or_else(loaded.local_models)
            encoder = local.resolved_encoder()
            embedder = ServingEmbedder(Embedder(local.embedding or DEFAULT_EMBEDDING_MODEL, encoder=encoder))
            reranker = load_reranker(local.rerank)
            second = load_second_embedder(local.second_embedding, encoder)
            require_stage_models(loaded.config, reranker, second)
            if second is not None:  # queries batched by one worker, kept out of the disk cache
                second = SecondEmbedder(second.embedder, ServingEmbedder(second.embedder))
        except BaseException:
            opened.close()
            raise
        return cls(opened, loaded, roles, embedder, spec, reranker, second)

    def close(self) -> None:
        self.traces.close()
        self.embedder.close()
        if self.second_embedder is not None and isinstance(self.second_embedder.queries, ServingEmbedder):
            self.second_embedder.queries.close()
        self.store.close()

    # ---- the config -------------------------------------------------------------------------------
    @property
    def config(self) -> RetrievalConfig:
        return self._config.config

    @property
    def config_hash(self) -> str:
        return self._hash

    @property
    def config_source(self) -> str:
        return self._config.source

    @property
    def config_warnings(self) -> tuple[str, ...]:
        """Values of the config that were out of range and clamped when it was loaded."""
        return self._config.warnings

    def use_config(self, config: ConfigSpec | LoadedConfig) -> str:
        """Swap in another config (a newly evolved one) without reopening; returns its hash.
        Memories stay: extraction does not depend on the retrieval config. The stores the new
        config reads that are not built yet (the raw and episode stores of a routed granularity)
        are built for every loaded user first, while requests are still served with the old
        config: the swap happens when they are ready, and no request waits for a build."""
        loaded = config if isinstance(config, LoadedConfig) else load_serving_config(config)
        require_stage_models(loaded.config, self.reranker, self.second_embedder)
        self._build_stores(stores_needed(loaded.config))
        effective, config_hash = EffectiveConfigs(loaded.config), loaded.config.fingerprint()
        # readers take (effective, hash) from one tuple: they see the old pair or the new one
        self._config, self._hash = loaded, config_hash
        self._current = (effective, config_hash)
        return config_hash

    def _build_stores(self, stores: set[str]) -> None:
        """Build `stores` for every user loaded (each workspace builds a store once, under its lock)."""
        for state in list(self._states.values()):
            with self.embedder.supplying({}):
                state.workspace.ensure_stores(stores)

    # ---- users --------------------------------------------------------------------------------------
    def _lock(self, key: tuple[str, str]) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(key, threading.Lock())

    def _gate(self, key: tuple[str, str]) -> UserGate:
        with self._locks_guard:
            return self._gates.setdefault(key, UserGate())

    def users(self, namespace: str = DEFAULT_NAMESPACE) -> list[str]:
        return self.store.users(namespace)

    def _extractor_key(self, conversation: Conversation) -> str:
        extractor = self.roles.extractor
        return json.dumps(
            [
                str(extractor.name),
                str(getattr(extractor, "model", "") or ""),
                str(extractor.version),
                list(conversation.speakers),
            ]
        )

    def _workspace(self, conversation: Conversation, units: Sequence[MemoryUnit], vectors: dict[str, Any]) -> Workspace:
        dataset = Dataset(DATASET_NAME, {conversation.conversation_id: conversation}, [])
        ws = Workspace(
            dataset,
            self.roles,
            embedder=cast("Embedder", self.embedder),
            reranker=self.reranker,
            second_embedder=self.second_embedder,
        )
        with self.embedder.supplying(dict(vectors)):
            ws.load_conversation(conversation.conversation_id, list(units))
        if self.second_embedder is not None and uses_second_view(self.config):  # now, not in the next search
            self.second_embedder.of_memories([m.content for m in ws.indexes[conversation.conversation_id].memories])
        return ws

    def _extract(self, conversation: Conversation, turn_ids: set[str] | None) -> list[MemoryUnit]:
        units, _cost = self.roles.extractor.extract(conversation, turn_ids)
        return list(units)

    def _state(self, namespace: str, user: str) -> _UserState | None:
        """The user's state, loaded from the store on first use (call with the user's lock held,
        or accept that a concurrent load may build it twice)."""
        key = (namespace, user)
        state = self._states.get(key)
        if state is not None:
            return state
        turns = self.store.turns(namespace, user)
        if not turns:
            return None
        conversation = build_conversation(user, turns)
        units, keys = self.store.units(namespace, user)
        extractor_key = self._extractor_key(conversation)
        model = self.embedder.vectors_key
        if keys != {extractor_key}:  # rules, model or speakers changed since: extract again
            units = self._extract(conversation, None)
            vectors = self.store.vectors(model, (u.content_hash for u in units))
            ws = self._workspace(conversation, units, vectors)
            state = _UserState(conversation, tuple(turns), tuple(units), extractor_key, ws)
            self.store.replace_units(namespace, user, units, extractor_key, model, state.vectors)
        else:
            vectors = self.store.vectors(model, (u.content_hash for u in units))
            ws = self._workspace(conversation, units, vectors)
            state = _UserState(conversation, tuple(turns), tuple(units), extractor_key, ws)
        self._states[key] = state
        return state

    # ---- writing ------------------------------------------------------------------------------------
    def add(
        self,
        user: str,
        turns: TurnsIn,
        *,
        session: str | None = None,
        at: datetime | str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> AddResult:
        """Remember `turns` (TurnIn, or dicts: {"speaker", "text"} or chat {"role", "content"}) for
        `user`. Returns the stored turn ids; a given id already stored is skipped (retries are safe).
        Once this returns, the add is on disk."""
        parsed = parse_turns(turns)
        when = parse_date(at) if isinstance(at, str) else at
        check_name("user", user)
        key = (namespace, user)
        with self._lock(key):
            old = self._state(namespace, user)
            existing = old.turns if old else ()
            fresh, skipped = new_turns(existing, parsed, session, when)
            if not fresh:
                return AddResult(turn_ids=[], skipped=skipped, memories=self._count(old), config_hash=self.config_hash)
            all_turns = (*existing, *fresh)
            conversation = build_conversation(user, all_turns)
            extractor_key = self._extractor_key(conversation)
            appended = old is not None and old.extractor_key == extractor_key and _appends(conversation, fresh)
            if appended and old is not None:
                units = [*old.units, *self._extract(conversation, {t.turn_id for t in fresh})]
                known = old.vectors
            else:
                units = self._extract(conversation, None)
                known = old.vectors if old else {}
            model = self.embedder.vectors_key
            missing = {u.content_hash for u in units} - set(known)
            known = {**known, **self.store.vectors(model, missing)}
            ws = self._workspace(conversation, units, known)
            state = _UserState(conversation, tuple(all_turns), tuple(units), extractor_key, ws)
            stored = old.vectors if old else {}
            new_vectors = {h: v for h, v in state.vectors.items() if h not in stored}
            added_units = units[len(old.units) :] if appended and old is not None else units
            self.store.commit_add(namespace, user, fresh, added_units, extractor_key, not appended, model, new_vectors)
            self._states[key] = state
        return AddResult(
            turn_ids=[t.turn_id for t in fresh],
            skipped=skipped,
            memories=self._count(state),
            config_hash=self.config_hash,
        )

    def forget(
        self,
        user: str,
        *,
        turn_ids: Sequence[str] | None = None,
        session: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> ForgetResult:
        """Forget a user (everything, traces included), or some of its turns (by id or session) and
        the traces that cite them: the memories of the remaining turns are extracted again.

        Forget means gone: the user's searches and answers under way finish first and new ones
        wait (`UserGate`), their buffered traces are dropped, the store file is rewritten without
        the deleted rows, and the caches outside the store lose what only the forgotten memories
        had (`_forget_cached`)."""
        key = (namespace, user)
        with self._gate(key).closed(), self._lock(key):
            state = self._state(namespace, user)
            if state is None:
                return ForgetResult(forgotten_turns=0, config_hash=self.config_hash)
            gone = (
                None
                if turn_ids is None and session is None
                else {
                    t.turn_id
                    for t in state.turns
                    if (turn_ids is not None and t.turn_id in set(turn_ids)) or (session and t.session_id == session)
                }
            )
            kept = [t for t in state.turns if gone is not None and t.turn_id not in gone]
            self.traces.drop(namespace, user, gone if kept else None)
            if not kept:
                count = self.store.forget(namespace, user, None)
                self._states.pop(key, None)
                self._forget_cached(state, None)
                return ForgetResult(forgotten_turns=count, config_hash=self.config_hash)
            conversation = build_conversation(user, kept)
            units = self._extract(conversation, None)
            ws = self._workspace(conversation, units, state.vectors)
            new_state = _UserState(conversation, tuple(kept), tuple(units), self._extractor_key(conversation), ws)
            assert gone is not None
            count = self.store.forget(
                namespace,
                user,
                sorted(gone),
                units,
                new_state.extractor_key,
                self.embedder.vectors_key,
                new_state.vectors,
            )
            self._states[key] = new_state
            self._forget_cached(state, new_state)
        return ForgetResult(forgotten_turns=count, config_hash=self.config_hash)

    def _forget_cached(self, old: _UserState, new: _UserState | None) -> None:
        """Remove from the caches outside the store what only the forgotten memories had: their
        vectors, unless a memory still in the store or of a loaded user has the same content, and
        the conversation's cached extractions of the other memory stores (built again on demand),
        and the store's model replies (asked again on demand)."""
        from evolvemem.memory.store_cache import forget_conversation

        gone = _content_hashes(old) - (_content_hashes(new) if new is not None else set())
        for state in list(self._states.values()):
            gone -= _content_hashes(state)
        gone -= set(self.store.referenced(gone))
        self.embedder.forget(gone)
        if self.second_embedder is not None:
            self.second_embedder.embedder.forget(gone)
        forget_conversation(old.conversation.conversation_id)
        for client in self.roles.clients.values():  # the store's own model replies: whose prompt held what is unknown
            if client.cache is not None:
                client.cache.clear()

    # ---- reading ------------------------------------------------------------------------------------
    def _reading_state(self, namespace: str, user: str, query: str) -> _UserState | None:
        """The user's loaded state for a query (None: no memories), after checking both names."""
        check_name("user", user)
        if blank(query):
            raise EvolveMemError("query is empty")
        state = self._states.get((namespace, user))
        if state is None:
            with self._lock((namespace, user)):
                state = self._state(namespace, user)
        return state

    def _retrieve(
        self, namespace: str, user: str, query: str, question_type: str | None, at: datetime | None
    ) -> _Retrieved | None:
        """Route, retrieve and (when the config refreshes) refresh: the first context of the answer path."""
        state = self._reading_state(namespace, user, query)
        if state is None:
            return None
        effective_of, config_hash = self._current
        question = self._question(state, query, question_type, at)
        effective, _ = effective_of(question.question_type)
        ws = state.workspace
        plugins = plugins_of(ws)
        first = first_context(_StoresOnDemand(ws, self.embedder), question, effective, plugins.router)
        context = first.memories
        if effective.enable_refresher and asks_current_state(question):
            context = tuple(plugins.refresher.refresh(question, context).context)
        return _Retrieved(state, question, effective, config_hash, first.retrieval, context)

    def _question(self, state: _UserState, query: str, question_type: str | None, at: datetime | None) -> Question:
        """The query as evaluation would hold it: typed by the rules unless a type is given, and
        asked at the user's last session unless a date is given."""
        if question_type is not None and question_type not in QUESTION_TYPES:
            raise EvolveMemError(f"question_type {question_type!r} is not one of {', '.join(QUESTION_TYPES)}")
        qtype = _query_type(query, question_type)
        digest = hashlib.sha256(query.encode("utf-8")).hexdigest()[:16]
        return Question(
            question_id=f"q-{digest}",
            conversation_id=state.conversation.conversation_id,
            text=query,
            category=qtype,
            question_type=qtype,
            answers=(),
            question_date=at or state.conversation.sessions[-1].timestamp,
            type_source="benchmark" if question_type else "rules",
        )

    def search(
        self,
        user: str,
        query: str,
        *,
        limit: int | None = None,
        question_type: str | None = None,
        at: datetime | None = None,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> SearchResult:
        """Ranked memories for `query`: by default the ones the context holds (the config's
        `max_context` and token budget), with `limit` the top `limit` candidates by rank."""
        started = time.perf_counter()
        with self._gate((namespace, user)).reading():
            found = self._retrieve(namespace, user, query, question_type, at)
            if found is None:
                return SearchResult(
                    hits=[], question_type=_query_type(query, question_type), config_hash=self.config_hash
                )
            in_context = {item.memory.memory_id for item in found.result.items}
            ranked = sorted((*found.result.items, *found.result.cut), key=lambda item: item.rank)
            chosen = ranked[:limit] if limit is not None else [i for i in ranked if i.memory.memory_id in in_context]
            hits = [_hit(item, item.memory.memory_id in in_context) for item in chosen]
            ids, turns = [h.memory_id for h in hits], [t for h in hits for t in h.turn_ids]
            self._trace("search", namespace, found.question, found.config_hash, ids, turns, started)
            return SearchResult(hits=hits, question_type=found.question.question_type, config_hash=found.config_hash)

    def context(
        self,
        user: str,
        query: str,
        *,
        question_type: str | None = None,
        at: datetime | None = None,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> ContextResult:
        """The exact context text (and its estimated tokens) the config hands a reader for `query`."""
        started = time.perf_counter()
        with self._gate((namespace, user)).reading():
            found = self._retrieve(namespace, user, query, question_type, at)
            if found is None:
                return ContextResult(
                    context=format_context([]),
                    tokens=0,
                    memory_ids=[],
                    turn_ids=[],
                    question_type=_query_type(query, question_type),
                    config_hash=self.config_hash,
                )
            ids, turns = _sources(found.context)
            self._trace("context", namespace, found.question, found.config_hash, ids, turns, started)
            return ContextResult(
                context=format_context(found.context, found.effective.context_layout),
                tokens=context_tokens(found.context),
                memory_ids=ids,
                turn_ids=turns,
                question_type=found.question.question_type,
                config_hash=found.config_hash,
            )

    def answer(
        self,
        user: str,
        query: str,
        *,
        question_type: str | None = None,
        at: datetime | None = None,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> AnswerResult:
        """Answer through the answer path: the answer role (the offline reader without a model),
        verification and judge retries as the config says."""
        started = time.perf_counter()
        with self._gate((namespace, user)).reading():
            state = self._reading_state(namespace, user, query)
            if state is None:
                return AnswerResult(
                    answer="",
                    failed=True,
                    error=f"no memories for user {user!r}",
                    context=format_context([]),
                    memory_ids=[],
                    turn_ids=[],
                    question_type=_query_type(query, question_type),
                    config_hash=self.config_hash,
                )
            effective_of, config_hash = self._current
            question = self._question(state, query, question_type, at)
            effective, _ = effective_of(question.question_type)
            with self.embedder.supplying({}):
                state.workspace.ensure_stores(stores_for(effective))
            trace = answer_path(state.workspace, question, effective)
            final = trace.final
            ids, turns = _sources(final.context)
            result = AnswerResult(
                answer=final.answer.text,
                failed=final.answer.failed,
                error=final.answer.error or None,
                context=format_context(final.context, effective.context_layout),
                memory_ids=ids,
                turn_ids=turns,
                question_type=question.question_type,
                config_hash=config_hash,
            )
            self._trace("answer", namespace, question, config_hash, ids, turns, started, result.answer)
            return result

    def _trace(
        self,
        kind: str,
        namespace: str,
        question: Question,
        config_hash: str,
        ids: list[str],
        turns: list[str],
        started: float,
        answer: str | None = None,
    ) -> None:
        """One served query as a trace row (what `export(with_traces=True)` turns into questions)."""
        self.traces.add(
            TraceRow(
                uuid.uuid4().hex,
                namespace,
                question.conversation_id,
                kind,
                question.text,
                question.question_type,
                _iso(question.question_date),
                config_hash,
                tuple(ids),
                tuple(turns),
                (time.perf_counter() - started) * 1000,
                answer,
                utcnow(),
            )
        )

    def memories(self, user: str, namespace: str = DEFAULT_NAMESPACE) -> list[MemoryUnit]:
        """The user's memories as indexed (after consolidation)."""
        state = self._states.get((namespace, user))
        if state is None:
            with self._lock((namespace, user)):
                state = self._state(namespace, user)
        return [] if state is None else list(state.workspace.memories[user])

    def loaded_users(self) -> dict[tuple[str, str], int]:
        """(namespace, user) -> memories indexed, for every user loaded in this process."""
        return {key: self._count(state) for key, state in list(self._states.items())}

    def _count(self, state: _UserState | None) -> int:
        return 0 if state is None else len(state.workspace.memories[state.conversation.conversation_id])

    # ---- export ------------------------------------------------------------------------------------
    def conversation(self, user: str, namespace: str = DEFAULT_NAMESPACE) -> Conversation | None:
        state = self._states.get((namespace, user))
        if state is None:
            with self._lock((namespace, user)):
                state = self._state(namespace, user)
        return None if state is None else state.conversation

    def export(self, user: str, *, namespace: str = DEFAULT_NAMESPACE, with_traces: bool = False) -> dict[str, Any]:
        """The user's conversation in the custom benchmark format (evolvemem/data/custom.py), so it
        can be labelled and evolved on; `with_traces` adds every served query as a question with
        no gold answer yet (`served_answer` holds what was answered)."""
        from evolvemem.serving.traces import export_dataset

        self.traces.flush()
        return export_dataset(self, namespace, [user], with_traces=with_traces)


def parse_turns(turns: TurnsIn) -> list[TurnIn]:
    """Turns as `TurnIn`; a malformed one is one EvolveMemError naming it and its first problem."""
    from pydantic import ValidationError

    parsed = []
    for index, turn in enumerate(turns):
        try:
            parsed.append(turn if isinstance(turn, TurnIn) else TurnIn.model_validate(turn))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first.get("loc", ()))
            raise EvolveMemError(f"turn {index}: {where + ': ' if where else ''}{first.get('msg')}") from None
    if not parsed:
        raise EvolveMemError("no turns to add")
    return parsed


def parse_date(text: str) -> datetime:
    from evolvemem.data.dates import parse_iso_datetime

    try:
        return parse_iso_datetime(text)
    except ValueError as exc:
        raise EvolveMemError(str(exc)) from None


def _appends(conversation: Conversation, fresh: Sequence[StoredTurn]) -> bool:
    """Whether the new turns are the last turns of the conversation (then only they are extracted)."""
    tail = [t.turn_id for t in conversation.turns()][-len(fresh) :]
    return tail == [t.turn_id for t in fresh]


def _content_hashes(state: _UserState) -> set[str]:
    """Content hashes of every memory of a user's state: extracted, indexed and of other stores."""
    cid = state.conversation.conversation_id
    hashes = {u.content_hash for u in state.units} | set(state.vectors)
    for _store, units, _retriever in state.workspace.stores.of_conversation(cid):
        hashes |= {u.content_hash for u in units}
    return hashes


def _sources(context: Sequence[MemoryUnit]) -> tuple[list[str], list[str]]:
    """The memory ids of a context and the turns they were drawn from."""
    return [m.memory_id for m in context], [t for m in context for t in m.source_turn_ids]


def _query_type(query: str, given: str | None) -> str:
    """The type a query is answered as: the one given, else the rules' (as evaluation types it)."""
    return given or classify_question(query)


def _hit(item: RetrievedItem, in_context: bool) -> Hit:
    memory = item.memory
    return Hit(
        memory_id=memory.memory_id,
        text=memory.content,
        turn_ids=list(memory.source_turn_ids),
        session=memory.session_id,
        session_date=_iso(memory.timestamp),
        score=float(item.score),
        rank=item.rank,
        views=dict(item.views),
        in_context=in_context,
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def check_name(what: str, value: str) -> None:
    """The one rule of a user id (`models.UserId`), as the HTTP API and the MCP tools apply it."""
    check_user_id(value, what)
