"""How memories and answers are written as text — in both directions.

Extractors write memories like `"[8 May 2023] Priya: I started a pottery class yesterday.
(yesterday = 7 May 2023)"`; LLM extractors write third-person sentences with absolute dates.
The answer prompts need them numbered and dated, and the offline reader needs them taken
apart again (date label, speaker, body, resolved-date notes). Digests of several turns
(`"On 8 May 2023: Priya: ... Tomasz: ..."`, `"Recurring topic (...): [8 May 2023] Priya: ... |
Tomasz: ..."`) are taken apart into the turns they quote, so each turn keeps its speaker.
Keeping both directions and the date vocabulary here means the layout is known in exactly one
place.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Sequence

from evolvemem.data.dates import MONTH_NAMES, format_day
from evolvemem.data.date_mentions import find_dates
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.roles import ABSTENTION_TEXT

# What every answerer says when the context does not hold the answer (defined with the scorer
# that recognises it).
ABSTENTION = ABSTENTION_TEXT

MONTHS = MONTH_NAMES  # full names only: what the readers check words against
_DATE_LABEL = re.compile(r"^\s*\[([^\]]{4,40})\]\s*")
_SPEAKER = re.compile(r"^([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}):\s+")
_NOTE = re.compile(r"\(\s*([^()=]{1,40}?)\s*=\s*([^()]{1,60}?)\s*\)")


@dataclass(frozen=True)
class MemoryText:
    """A memory's content taken apart: optional date label and speaker, the body, and any
    resolved relative-date notes `(expression = absolute value)` the extractor appended."""

    date_label: str | None
    speaker: str | None
    body: str
    notes: tuple[tuple[str, str], ...]


def format_date(value: datetime | date | None) -> str:
    """`7 May 2023` (day without zero padding, as extractors write it), or "" when there is none."""
    return format_day(value) if value is not None else ""


def _memory_text(label: str | None, speaker: str | None, rest: str) -> MemoryText:
    """`rest` (what was said, notes included) split into body and resolved-date notes."""
    notes = tuple((expr.strip(), value.strip()) for expr, value in _NOTE.findall(rest))
    body = _NOTE.sub("", rest).strip() if notes else rest.strip()
    return MemoryText(label, speaker, body, notes)


@functools.lru_cache(maxsize=65536)
def parse_memory_text(content: str) -> MemoryText:
    """Split a memory's content into date label, speaker, body and resolved-date notes."""
    rest = content
    label = None
    match = _DATE_LABEL.match(rest)
    if match and find_dates(match.group(1)):
        label = match.group(1).strip()
        rest = rest[match.end() :]
    speaker = None
    match = _SPEAKER.match(rest)
    if match:
        speaker = match.group(1)
        rest = rest[match.end() :]
    return _memory_text(label, speaker, rest)


@functools.lru_cache(maxsize=4096)
def _turn_label(persons: tuple[str, ...]) -> re.Pattern[str] | None:
    """Where a quoted turn starts: "Priya Raman: " (one of `persons`), after whitespace or at the
    start, optionally behind its own "[8 May 2023] " date label."""
    names = sorted({" ".join(p.split()) for p in persons if p.strip()}, key=len, reverse=True)
    if not names:
        return None
    spoken = "|".join(re.escape(name) for name in names)
    return re.compile(rf"(?:^|(?<=\s))(?:\[([^\]]{{4,40}})\]\s*)?({spoken}):\s+", re.I)


@functools.lru_cache(maxsize=65536)
def quoted_turns(content: str, persons: tuple[str, ...]) -> tuple[MemoryText, ...]:
    """The turns a digest of several turns quotes, in order, each with its speaker, its notes
    and its date label: its own ("[9 June 2023] Priya: ...") or else the one before it's (the
    first turn without one has none: it is dated like the memory). () for a memory quoting
    fewer than two turns, which is read whole.

    A turn starts at "Name: " where Name is one of the memory's `persons` written with a
    capital (so "Note: ..." or a lowercase "priya: " inside a turn does not split it). Text
    before the first turn (a heading such as "On 8 May 2023:") is nobody's and is dropped, and
    so is a " |" between turns."""
    pattern = _turn_label(persons)
    if pattern is None:
        return ()
    starts = [m for m in pattern.finditer(content) if m.group(2)[:1].isupper()]
    if len(starts) < 2:
        return ()
    dated = [bool(m.group(1) and find_dates(m.group(1))) for m in starts]
    # a bracket before a name that is not a date ("[shares a photo of ...]") ends the turn before
    begins = [m.start() if is_dated else m.start(2) for m, is_dated in zip(starts, dated)]
    turns: list[MemoryText] = []
    label: str | None = None
    for index, match in enumerate(starts):
        if dated[index]:
            label = match.group(1).strip()
        end = begins[index + 1] if index + 1 < len(starts) else len(content)
        said = content[match.end() : end].strip().rstrip("|").strip()
        turns.append(_memory_text(label, match.group(2), said))
    return tuple(turns)


def date_label_text(label: str) -> str:
    """A "[...]" date label's date, written the canonical way ("7 May 2023")."""
    mentions = find_dates(label)
    return mentions[0].canonical if mentions else label


def memory_date_text(unit: MemoryUnit) -> str:
    """The memory's own date as text: its timestamp, else its content's date label, else ""."""
    if unit.timestamp is not None:
        return format_date(unit.timestamp)
    label = parse_memory_text(unit.content).date_label
    return date_label_text(label) if label else ""


CONTEXT_LAYOUTS = ("list", "sessions")  # the `context_layout` choices this module renders


def format_context(context: Sequence[MemoryUnit], layout: str = "list") -> str:
    """Memories for an answer prompt. `list`: numbered and dated, one per line, in the context's
    order. `sessions`: grouped by the conversation session they come from, each under a header
    with its date, sessions in time order (memories keep their context order inside one) — a
    small model then reads when something was said once per session instead of per line.

    In the list, a memory whose content already starts with a date label is shown as is;
    otherwise its timestamp is prefixed, so the model can always turn relative times into
    absolute dates."""
    if not context:
        return "(no memories were retrieved)"
    if layout == "sessions":
        return _format_by_session(context)
    if layout != "list":
        raise ValueError(f"unknown context layout {layout!r} (known: {', '.join(CONTEXT_LAYOUTS)})")
    lines = []
    for number, unit in enumerate(context, start=1):
        content = " ".join(unit.content.split())
        if parse_memory_text(content).date_label is None:
            when = memory_date_text(unit)
            if when:
                content = f"[{when}] {content}"
        lines.append(f"{number}. {content}")
    return "\n".join(lines)


def _format_by_session(context: Sequence[MemoryUnit]) -> str:
    sessions: dict[str, list[MemoryUnit]] = {}
    for unit in context:
        sessions.setdefault(unit.session_id or memory_date_text(unit) or "undated", []).append(unit)

    def first_seen(key: str) -> tuple[int, datetime, int]:
        stamps = [u.timestamp for u in sessions[key] if u.timestamp is not None]
        order = list(sessions).index(key)
        return (0, min(stamps), order) if stamps else (1, datetime.min, order)

    blocks, number = [], 0
    for key in sorted(sessions, key=first_seen):
        members = sessions[key]
        when = next((memory_date_text(u) for u in members if memory_date_text(u)), "")
        lines = [f"Session of {when}:" if when else "Session (date unknown):"]
        for unit in members:
            number += 1
            body = parse_memory_text(" ".join(unit.content.split()))
            speaker = f"{body.speaker}: " if body.speaker else ""
            notes = "".join(f" ({expr} = {value})" for expr, value in body.notes)
            lines.append(f"{number}. {speaker}{body.body}{notes}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def format_question_date(value: datetime | date | None) -> str:
    """The date a question is asked, for prompts ("unknown" when the benchmark gives none)."""
    return format_date(value) or "unknown"
