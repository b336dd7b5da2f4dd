"""Oracle answer contexts (`evolve eval --context oracle|oracle+distractors`): the reader's ceiling.

`oracle` hands the reader exactly the question's gold evidence turns, in conversation order, each
as its raw-store memory ("[8 May 2023] Priya: ..."), so the answer prompt renders them as it
renders any context. `oracle+distractors` adds the config's own ranked candidates after them,
skipping any already there, until the context budget (`config.token_limit`, else `max_context`)
is full; the gold turns always stay, even past the budget. The gold turns lead, as a perfect
ranker would put them; a chronological config orders the whole context by date, as its retrieval
does. Questions with no gold turn in their conversation have no oracle context: the eval skips
them (`oracle_questions`).

An evaluation mode, never a config: the loop cannot hand a reader the gold evidence, so this
is no dimension of `action_space/`."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Sequence

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.vocab import ContextMode, StoreKind
from evolvemem.data.models import Dataset, Question
from evolvemem.errors import ConfigError
from evolvemem.retrieval.retriever import RetrievalResult, RetrievedItem, memory_tokens

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig
    from evolvemem.workspace import Workspace

ORACLE_VIEW = "oracle"  # the view label of a gold turn in `context_views`
ORACLE_ROUTE = "oracle"  # the record's `route`: no router chose the store
ORACLE_STORE = StoreKind.RAW  # the store the gold turns come from (built for every oracle eval)


def context_mode(value: str) -> ContextMode:
    """The `--context` value as a mode; an unknown one is a one-line ConfigError naming the known."""
    try:
        return ContextMode(value)
    except ValueError:
        known = ", ".join(str(m) for m in ContextMode)
        raise ConfigError(f"unknown --context {value!r}; choose one of: {known}") from None


def gold_turn_ids(dataset: Dataset, question: Question) -> tuple[str, ...]:
    """The question's evidence ids that are turns of its conversation, in conversation order."""
    wanted = {e.strip() for e in question.evidence}
    return tuple(t.turn_id for t in dataset.conversations[question.conversation_id].turns() if t.turn_id in wanted)


def oracle_questions(dataset: Dataset, questions: Sequence[Question]) -> tuple[list[Question], int]:
    """The questions an oracle context can be built for, and how many others were skipped (no
    evidence ids, e.g. adversarial ones, or none naming a turn of the conversation)."""
    kept = [q for q in questions if gold_turn_ids(dataset, q)]
    return kept, len(questions) - len(kept)


def oracle_memory_id(conversation_id: str, turn_id: str) -> str:
    """A gold turn's id in an oracle context: it names the turn, so a record's `context_ids` show
    which gold turns the reader read."""
    return f"{conversation_id}:turn:{turn_id}"


def gold_units(ws: Workspace, question: Question) -> list[MemoryUnit]:
    """The gold turns as their raw-store memories (same text and date), in conversation order, each
    under an id naming its turn (the raw store must be built)."""
    conv = question.conversation_id
    by_turn = ws.raw_unit_by_turn(conv)
    return [
        by_turn[t].evolve(memory_id=oracle_memory_id(conv, t))
        for t in gold_turn_ids(ws.dataset, question)
        if t in by_turn
    ]


def oracle_retrieval(
    ws: Workspace, question: Question, effective: RetrievalConfig, mode: ContextMode, retrieved: RetrievalResult | None
) -> RetrievalResult:
    """The oracle context of `question` under `mode` (`retrieved`: the config's own retrieval,
    which `oracle+distractors` tops the gold turns up from)."""
    gold = [RetrievedItem(m, 1.0, rank, {ORACLE_VIEW: rank}) for rank, m in enumerate(gold_units(ws, question), 1)]
    if mode is ContextMode.ORACLE or retrieved is None:
        return RetrievalResult(tuple(gold), ())
    context, cut = with_distractors(gold, [*retrieved.items, *retrieved.cut], effective)
    return RetrievalResult(tuple(context), tuple(cut), retrieved.sub_queries, retrieved.cost)


def with_distractors(
    gold: list[RetrievedItem], ranked: Sequence[RetrievedItem], effective: RetrievalConfig
) -> tuple[list[RetrievedItem], list[RetrievedItem]]:
    """(context, cut): the gold items, then ranked candidates by rank while they fit the budget;
    a candidate whose text or id is already in the context is left out, not cut."""
    limit = effective.token_limit
    seen_ids = {item.memory.memory_id for item in gold}
    seen_text = {item.memory.content for item in gold}
    context, cut = list(gold), list[RetrievedItem]()
    used = sum(memory_tokens(item.memory) for item in gold)
    for item in sorted(ranked, key=lambda i: i.rank):
        memory = item.memory
        if memory.memory_id in seen_ids or memory.content in seen_text:
            continue
        seen_ids.add(memory.memory_id)
        seen_text.add(memory.content)
        cost = memory_tokens(memory)
        fits = used + cost <= limit if limit else len(context) < effective.max_context
        if fits and not cut:  # the first candidate that does not fit ends the context, as a retriever's cut
            context.append(item)
            used += cost
        else:
            cut.append(item)
    if effective.context_order == "chronological":
        context.sort(key=_when)
    return context, cut


def _when(item: RetrievedItem) -> datetime:
    """A context line's date for chronological order (undated lines last)."""
    return item.memory.timestamp or datetime.max
