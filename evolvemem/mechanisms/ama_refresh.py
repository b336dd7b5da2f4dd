"""The refresher (after AMA): conflicting memories are updated, not deleted.

Why: a question about the current state ("where does she live now?") often retrieves both the
old and the new statement; a reader that sees two values with nothing to tell them apart picks
either. The refresher finds such pairs in the question's context and rewrites the *older*
memory to say it was superseded, by what and as of which date. Both stay in the context.

A conflict (offline rules) is two dated memories of the same person, the older one strictly
earlier, about the same subject, where the newer one says something the older does not:

- the newer one states a change ("moved", "left", "switched", "no longer", ...) and shares a
  named value (a place, an entity) or two content words with the older one, or both hold a
  word of the question; or
- both hold a word of the question and name different values of some kind (different places
  or entities, none shared).

Each older memory is paired with its newest conflicting memory. Offline the rewrite is a
template; with a model, prompts/refresh.md confirms the conflict and writes the update (an
unusable reply falls back to the template; a "no conflict" reply leaves the memory as it is).

Question answering stays a pure function of (memories, question, config): refreshed versions
apply to one question's context only and the shared index is never changed. A `Refresher`
memoises each (conversation, older, newer) rewrite, so a conflict is refreshed (and paid for)
once per run; later uses report the calls as cache hits.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any, Sequence

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.usage import Usage
from evolvemem.data.models import Question
from evolvemem.llm.ask import ask_json
from evolvemem.prompts import load_prompt
from evolvemem.qtypes import classify_question
from evolvemem.roles.context_format import (
    format_context,
    memory_date_text,
    parse_memory_text,
)
from evolvemem.roles.reader_support import analyse_question, view_of
from evolvemem.roles.verify import answer_terms

if TYPE_CHECKING:
    from evolvemem.llm.client import LLMClient

MAX_REFRESHES = 4  # conflicts refreshed per question at most (bounds the model calls)
REFRESH_MAX_TOKENS = 300
MIN_UPDATED_CHARS = 10

_CHANGE = re.compile(
    r"\b(?:moved|moving|relocat\w*|switch\w*|chang\w*|left|leaving|quit|quits|quitting|started|starting|"
    r"no longer|any ?more|"
    r"instead|replac\w*|became|become|sold|got rid of|broke up|ended|stopped|retired|transferr\w*|upgrad\w*|"
    r"swapped|gave up|took over|promoted|divorced|married|graduated)\b",
    re.I,
)


def asks_current_state(question: Question) -> bool:
    """A knowledge-update question: typed so by the benchmark, or worded so ("now", "currently",
    "still", "latest" …, by the shared question-type rules)."""

    return question.question_type == "knowledge_update" or classify_question(question.text) == "knowledge_update"


@dataclass(frozen=True)
class _Facts:
    owner: str  # lowercased speaker, else first annotated person ("" when unknown)
    day: date | None
    terms: frozenset[str]  # stems of content words
    values: frozenset[str]  # lowercased named values: places, entities, mid-sentence capitals (not persons)
    change: bool
    body: str


@functools.lru_cache(maxsize=32768)
def facts_of(unit: MemoryUnit) -> _Facts:
    """What the conflict rules read of a memory (cached: contexts overlap across questions)."""

    view = view_of(unit)
    parsed = parse_memory_text(unit.content)
    speaker = parsed.speaker.lower().split() if parsed.speaker else []
    people = {p.lower() for p in unit.persons} | set(speaker)
    owner = " ".join(speaker) or (unit.persons[0].lower() if unit.persons else "")
    values = {v.lower() for v in (*unit.locations, *unit.entities)} | set(view.proper)
    values -= people | {"i", "i'm", "i've", "i'd", "i'll"}
    body = f"{parsed.speaker}: {parsed.body}" if parsed.speaker else parsed.body
    change = bool(_CHANGE.search(parsed.body))
    return _Facts(owner, view.day, answer_terms(parsed.body), frozenset(values), change, body)


@dataclass(frozen=True)
class Conflict:
    older: MemoryUnit
    newer: MemoryUnit


def _conflicting(a: _Facts, b: _Facts, asked: frozenset[str]) -> bool:
    """Whether the newer memory `b` updates the older memory `a` (see the module docstring)."""
    if not a.owner or a.owner != b.owner or a.day is None or b.day is None or not a.day < b.day:
        return False
    if not (b.values - a.values or b.terms - a.terms):
        return False  # the newer memory says nothing the older one does not
    linked = bool(asked & a.terms) and bool(asked & b.terms)
    shared = bool(a.values & b.values) or len(a.terms & b.terms) >= 2
    if b.change and (shared or linked):
        return True
    return linked and bool(a.values) and bool(b.values) and not (a.values & b.values)


def find_conflicts(question_text: str, context: Sequence[MemoryUnit]) -> list[Conflict]:
    """Conflicting pairs in the context: each older memory with its newest conflicting memory,
    in context order of the older one."""

    asked = frozenset(analyse_question(question_text).terms)
    facts = [facts_of(u) for u in context]
    found: list[Conflict] = []
    for i, older in enumerate(facts):
        newer = [j for j, other in enumerate(facts) if j != i and _conflicting(older, other, asked)]
        if newer:
            latest = max(newer, key=lambda j: (facts[j].day, -j))
            found.append(Conflict(context[i], context[latest]))
    return found


def superseded_text(older: MemoryUnit, newer: MemoryUnit) -> str:
    """The offline update of the older memory: its own text, then what superseded it and when."""

    when = memory_date_text(newer) or "a later date"
    return f"{older.content} (superseded as of {when}: {facts_of(newer).body})"


def parse_refresh(parsed: Any) -> str:
    """{"conflict": true, "updated": "..."} → the updated text; {"conflict": false} → ""."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("conflict"), bool):
        raise ValueError('the reply has no boolean "conflict"')
    if not parsed["conflict"]:
        return ""
    updated = parsed.get("updated")
    if not isinstance(updated, str) or len(updated.strip()) < MIN_UPDATED_CHARS:
        raise ValueError('a conflict needs the "updated" text of the older memory')
    return " ".join(updated.split())


@dataclass
class RefreshResult:
    context: list[MemoryUnit]
    refreshed_ids: list[str] = field(default_factory=list)
    cost: Usage = field(default_factory=Usage)


@dataclass
class _Rewrite:
    content: str  # "" = the model saw no conflict: keep the memory as it is
    cost: Usage
    reported: bool = False


class Refresher:
    """Refreshes conflicts in question contexts; memoised per (conversation, older, newer, model)
    for the life of the workspace, so a conflict is rewritten (and paid for) once per run."""

    OWNS = ("enable_refresher",)

    def __init__(self, client: LLMClient | None = None) -> None:
        self.client = client
        self._memo: dict[tuple[str, str, str, str], _Rewrite] = {}  # (conversation, older, newer, model)
        self._lock = threading.Lock()

    def refresh(self, question: Question, context: Sequence[MemoryUnit]) -> RefreshResult:
        """The context with the older memory of each conflict rewritten (ids kept). `context`
        must hold the memories as stored (not already refreshed ones)."""
        conflicts = find_conflicts(question.text, context)
        rewrites: dict[str, str] = {}
        cost = Usage()
        for conflict in conflicts[:MAX_REFRESHES]:
            content, paid = self._rewrite(question.conversation_id, conflict, self.client)
            cost = cost + paid
            if content:
                rewrites[conflict.older.memory_id] = content
        refreshed = [u.evolve(content=rewrites[u.memory_id]) if u.memory_id in rewrites else u for u in context]
        return RefreshResult(refreshed, [u.memory_id for u in context if u.memory_id in rewrites], cost)

    def _rewrite(self, conversation_id: str, conflict: Conflict, client: Any) -> tuple[str, Usage]:
        key = (conversation_id, conflict.older.memory_id, conflict.newer.memory_id, getattr(client, "model", ""))
        with self._lock:
            entry = self._memo.get(key)
        if entry is None:
            content, paid = self._compute(conflict, client)
            with self._lock:
                entry = self._memo.setdefault(key, _Rewrite(content, paid))
        with self._lock:
            if entry.reported:
                return entry.content, Usage(cache_hits=entry.cost.calls + entry.cost.cache_hits)
            entry.reported = True
            return entry.content, entry.cost

    @staticmethod
    def _compute(conflict: Conflict, client: Any) -> tuple[str, Usage]:
        if client is None:
            return superseded_text(conflict.older, conflict.newer), Usage()

        def dated(unit: MemoryUnit) -> str:  # "[8 May 2023] Priya: ..." without the list number
            return format_context([unit]).split(". ", 1)[1]

        prompt = load_prompt("refresh").render(older=dated(conflict.older), newer=dated(conflict.newer))
        updated, cost = ask_json(client, prompt, role="refresh", max_tokens=REFRESH_MAX_TOKENS, parse=parse_refresh)
        if updated is None:  # failed or unusable: the rules found the conflict, so use the template
            return superseded_text(conflict.older, conflict.newer), cost
        return updated, cost
