"""One question's answer path with AMA's levers: route → retrieve → (refresh) → answer → judge → retry.

- `memory_granularity` picks the store the first answer reads ("fact" means the run's base
  store: facts, or RecMem's recurrence store; "routed" asks `ama_router`).
- `enable_refresher`: for questions about the current state, conflicting memories in the context
  are rewritten before answering (`ama_refresh`; the shared index is never changed).
- `judge_retries` = K: after each answer (and its verification) the judge (`ama_judge`) says
  Pass, Retry or Refresh, at most K times. Retry answers again from the next source of
  RETRY_ORDER not yet tried: the base store, the related turns (the raw turns of the first
  context's sources and their neighbours), episodes, raw turns. Refresh refreshes the context
  when the refresher is on and has something to refresh, and is otherwise a Retry. The last
  answer is kept; every source is tried at most once, so the path ends after at most K + 1
  answers.

The router, judge and refresher are plug-ins (answering/plugins.py): with an answer model they
ask it (`roles.mechanism_client`), otherwise they use their rules. Every call's cost is in the
trace. With an `AnswerMemo` (answering/context_reuse.py) every answer step first looks up its
context: an answer already given for the same question, context and answer-stage settings is
reused without a call. The answer-side levers reach the reader's prompt and its answer through
answering/answer_rules.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from evolvemem.answering.answer_rules import answer_rules, apply_answer_rules, prompt_levers
from evolvemem.answering.context_reuse import AnswerMemo, context_key
from evolvemem.answering.first_context import first_context, store_of
from evolvemem.answering.oracle import ORACLE_ROUTE, ORACLE_STORE, oracle_retrieval
from evolvemem.answering.plugins import AnswerPlugins, default_plugins
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.roles import AnswerResult
from evolvemem.contracts.usage import Usage
from evolvemem.contracts.vocab import ContextMode
from evolvemem.data.models import Question
from evolvemem.mechanisms.ama_judge import PASS, REFRESH
from evolvemem.mechanisms.ama_refresh import asks_current_state, find_conflicts
from evolvemem.mechanisms.ama_router import EPISODE, FACT, RAW
from evolvemem.retrieval.retriever import RetrievalResult
from evolvemem.workspace import Workspace

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig

RELATED = "related"  # retry source: raw turns around the first context's source turns
# Retry sources in order: the base store, the turns around the first context (the cheapest,
# most local widening: the untold half of an exchange), the coarser episodes, the raw turns.
RETRY_ORDER = (FACT, RELATED, EPISODE, RAW)


@dataclass(frozen=True)
class Attempt:
    """One answer: where its context came from, the context, and the answer."""

    source: str  # the store read ("fact", "recurrence", "raw", "episode"), "related", or "<store>+refresh"
    context: tuple[MemoryUnit, ...]
    views: tuple[dict[str, int], ...]  # per context memory: view label -> rank in that view
    cut: tuple[MemoryUnit, ...]  # ranked candidates the context budget cut
    sub_queries: tuple[str, ...]
    answer: AnswerResult
    refreshed: tuple[str, ...] = ()  # ids of context memories shown in their refreshed version

    @property
    def store(self) -> str:
        """The memory store the context came from."""
        return RAW if self.source == RELATED else self.source.split("+")[0]


@dataclass
class AnswerTrace:
    granularity: str  # the store the first answer read
    route_source: str  # "config", "rules", "llm" or "rules-fallback"
    attempts: list[Attempt] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    refreshed_ids: list[str] = field(default_factory=list)
    cost: Usage = field(default_factory=Usage)
    answer_keys: list[str] = field(default_factory=list)  # context key of each answer step, in order
    reused_answers: int = 0  # answer steps taken from the memo (no call)

    @property
    def context_reused(self) -> bool:
        """Every answer of the path came from the memo."""
        return bool(self.answer_keys) and self.reused_answers == len(self.answer_keys)

    @property
    def final(self) -> Attempt:
        return self.attempts[-1]

    @property
    def retries(self) -> int:
        return len(self.attempts) - 1


def plugins_of(ws: Workspace) -> AnswerPlugins:
    """The workspace's plug-ins for its answer model, made once: the refresher's memo lives as
    long as the workspace."""
    client = ws.roles.mechanism_client
    return ws.memo(f"answer-plugins:{id(client)}", lambda: default_plugins(client))


class _Path:
    """The state of one question's answer path (see the module docstring)."""

    def __init__(
        self,
        ws: Workspace,
        question: Question,
        effective: RetrievalConfig,
        memo: AnswerMemo | None = None,
        mode: ContextMode = ContextMode.RETRIEVED,
    ):
        self.ws, self.question, self.effective, self.memo, self.mode = ws, question, effective, memo, mode
        self.plugins = plugins_of(ws)
        self.current_state = effective.enable_refresher and asks_current_state(question)
        self.trace: AnswerTrace  # set by run()
        self.originals: list[tuple[MemoryUnit, ...]] = []  # each attempt's context before any refresh

    def charge(self, cost: Usage) -> None:
        self.trace.cost = self.trace.cost + cost

    def answer(self, context: Sequence[MemoryUnit]) -> AnswerResult:
        key = context_key(self.question.question_id, context, self.effective)
        self.trace.answer_keys.append(key)
        known = self.memo.get(key) if self.memo is not None else None
        if known is not None:
            self.trace.reused_answers += 1
            return known
        answer = self.ask(context)
        if self.memo is not None:
            self.memo.put(key, answer)
        return answer

    def ask(self, context: Sequence[MemoryUnit]) -> AnswerResult:
        ws, effective = self.ws, self.effective
        answer = ws.roles.answerer.answer(
            self.question, list(context), effective.answer_style, effective.context_layout, prompt_levers(effective)
        )
        self.charge(answer.cost)
        if effective.enable_answer_verification and not answer.failed:
            answer = ws.roles.verifier.verify(self.question, list(context), answer, effective.verification_style)
            self.charge(answer.cost)
        return apply_answer_rules(answer, answer_rules(effective), self.question, context)

    def refresh(self, original: Sequence[MemoryUnit]) -> tuple[list[MemoryUnit], tuple[str, ...]]:
        """The context with its conflicts refreshed (always from the unrefreshed memories)."""
        result = self.plugins.refresher.refresh(self.question, original)
        self.charge(result.cost)
        self.trace.refreshed_ids.extend(i for i in result.refreshed_ids if i not in self.trace.refreshed_ids)
        return result.context, tuple(result.refreshed_ids)

    def attempt(
        self,
        source: str,
        original: Sequence[MemoryUnit],
        views: Sequence[dict[str, int]],
        cut: Sequence[MemoryUnit],
        sub_queries: Sequence[str],
        refresh: bool,
    ) -> Attempt:
        context, refreshed = self.refresh(original) if refresh else (list(original), ())
        self.originals.append(tuple(original))
        return Attempt(
            source, tuple(context), tuple(views), tuple(cut), tuple(sub_queries), self.answer(context), refreshed
        )

    def attempt_from_store(self, store: str) -> Attempt:
        retrieval = self.ws.retriever(self.question.conversation_id, store).retrieve(self.question, self.effective)
        return self.attempt_from_retrieval(store, retrieval)

    def attempt_from_retrieval(self, store: str, retrieval: RetrievalResult) -> Attempt:
        self.charge(retrieval.cost)
        return self.attempt(
            store,
            [i.memory for i in retrieval.items],
            [i.views for i in retrieval.items],
            [i.memory for i in retrieval.cut],
            retrieval.sub_queries,
            self.current_state,
        )

    def attempt_related(self) -> Attempt:
        """Around the first attempt's context: the routed retrieval's best guess of where to look."""
        context = related_turns(self.ws, self.question.conversation_id, self.originals[0], self.effective.max_context)
        return self.attempt(
            RELATED, context, [{RELATED: rank} for rank in range(1, len(context) + 1)], (), (), self.current_state
        )

    def attempt_refreshed(self) -> Attempt | None:
        """The last context with its conflicts refreshed, if the refresher is on and that changes it."""
        if not self.effective.enable_refresher:
            return None
        last, original = self.trace.final, self.originals[-1]
        context, refreshed = self.refresh(original)
        if not set(refreshed) - set(last.refreshed):
            return None
        self.originals.append(original)
        return Attempt(
            f"{last.source}+refresh",
            tuple(context),
            last.views,
            last.cut,
            last.sub_queries,
            self.answer(context),
            refreshed,
        )

    def unresolved_conflict(self) -> bool:
        """The question asks for the current state and the last context shows a conflict unrefreshed."""
        if not asks_current_state(self.question):
            return False
        shown = set(self.trace.final.refreshed)
        return any(c.older.memory_id not in shown for c in find_conflicts(self.question.text, self.originals[-1]))

    def next_source(self) -> str | None:
        """The first source of RETRY_ORDER not tried yet whose store is built."""
        tried = {a.source for a in self.trace.attempts}
        for granularity in RETRY_ORDER:
            source = RELATED if granularity == RELATED else store_of(granularity, self.effective)
            needs = RAW if source == RELATED else source
            if source not in tried and self.ws.has_store(self.question.conversation_id, needs):
                return source
        return None

    def run_oracle(self) -> AnswerTrace:
        """One answer from the oracle context (answering/oracle.py), verified as the config says;
        no judge retry or refresh: either would hand the reader another context than the gold."""
        retrieved, cost = None, Usage()
        if self.mode is ContextMode.ORACLE_DISTRACTORS:
            first = first_context(self.ws, self.question, self.effective, self.plugins.router)
            retrieved, cost = first.retrieval, first.route_cost
        self.trace = trace = AnswerTrace(ORACLE_STORE, ORACLE_ROUTE, cost=cost)
        oracle = oracle_retrieval(self.ws, self.question, self.effective, self.mode, retrieved)
        self.charge(oracle.cost)
        context = [i.memory for i in oracle.items]
        trace.attempts.append(
            self.attempt(
                ORACLE_STORE,
                context,
                [i.views for i in oracle.items],
                [i.memory for i in oracle.cut],
                oracle.sub_queries,
                refresh=False,
            )
        )
        return trace

    def run(self) -> AnswerTrace:
        if self.mode is not ContextMode.RETRIEVED:
            return self.run_oracle()
        first = first_context(self.ws, self.question, self.effective, self.plugins.router)
        self.trace = trace = AnswerTrace(first.store, first.route, cost=first.route_cost)
        trace.attempts.append(self.attempt_from_retrieval(first.store, first.retrieval))
        for _ in range(self.effective.judge_retries):
            last = trace.final
            if last.answer.failed:
                break
            verdict, judge_cost = self.plugins.judge.verdict(
                self.question, last.context, last.answer.text, self.unresolved_conflict()
            )
            self.charge(judge_cost)
            trace.verdicts.append(verdict)
            if verdict == PASS:
                break
            retry = self.attempt_refreshed() if verdict == REFRESH else None
            if retry is None:
                source = self.next_source()
                if source is None:
                    break
                retry = self.attempt_related() if source == RELATED else self.attempt_from_store(source)
            trace.attempts.append(retry)
        return trace


def answer_path(
    ws: Workspace,
    question: Question,
    effective: RetrievalConfig,
    memo: AnswerMemo | None = None,
    mode: ContextMode = ContextMode.RETRIEVED,
) -> AnswerTrace:
    """Route, retrieve, refresh, answer, verify and judge one question under its effective config
    (answer steps whose context `memo` knows are reused, not asked); with an oracle `mode`, one
    answer from the oracle context."""
    return _Path(ws, question, effective, memo, mode).run()


def related_turns(ws: Workspace, conversation_id: str, context: Sequence[MemoryUnit], limit: int) -> list[MemoryUnit]:
    """Raw turns of the context's source turns and of the turns next to them (same session), in
    the context's rank order, at most `limit`."""
    by_turn = ws.raw_unit_by_turn(conversation_id)
    neighbours = ws.turn_neighbours(conversation_id)
    out: dict[str, MemoryUnit] = {}
    for memory in context:
        for turn_id in memory.source_turn_ids:
            for near in (turn_id, *neighbours.get(turn_id, ())):
                unit = by_turn.get(near)
                if unit is not None:
                    out.setdefault(unit.memory_id, unit)
                if len(out) >= limit:
                    return list(out.values())
    return list(out.values())
