"""`resolve_relative_dates`: a relative time in the reader's answer, rewritten as the date it means.

A reader often copies "last week" or "yesterday" from the memory it read, and the answer then
means a date only beside the day that memory was said: token F1 against "the week before 14 March
2025" is near zero. After the reader answers, each relative expression of the answer is rewritten
by rules, counted from the date of the context line it comes from: the line (a memory, or one
turn of a digest) whose text says the expression, the one that best matches the answer, its quote
and the question when several do; when no line says it, the best-matching dated line.

The rewritten form is the one LoCoMo's gold answers use for such times: a day ("13 March 2025"),
"the week before 14 March 2025", "the weekend before 14 March 2025", "the Friday before 14 March 2025",
a month ("February 2025"), a year ("2024"). Days, months, years and "N … ago" are the offline
extractor's rules (memory/offline_extract.py), so memories and answers resolve a phrase alike;
the week-level forms are this module's.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Sequence

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.data.dates import WEEKDAY_NAMES, format_day
from evolvemem.memory.offline_extract import month_name, resolve_relative_dates
from evolvemem.data.date_mentions import find_dates
from evolvemem.roles.reader_support import MemoryView, view_of
from evolvemem.roles.verify import answer_terms

_WEEKDAY = "|".join(WEEKDAY_NAMES)
_NUMBER = r"\d{1,2}|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten"
# Every phrase this module rewrites, longest first (so "the day before yesterday" is one phrase).
_PHRASE = re.compile(
    r"\b(?:the day before yesterday|yesterday|last night|tomorrow|today|tonight|this morning|this afternoon"
    r"|this evening|(?:last|next|this) (?:weekend|week|month|year)"
    rf"|(?:last|next|this past|this coming) (?:{_WEEKDAY})|(?:{_NUMBER}) (?:day|week|month|year)s? ago)\b"
    r"(?!\s+of\b)",  # "the last week of May 2025" names its own time
    re.I,
)
_BARE_WEEKDAY = re.compile(rf"^\s*(?:on\s+)?({_WEEKDAY})\s*\.?\s*$", re.I)
_SAME_DAY = ("today", "tonight", "this morning", "this afternoon", "this evening")


def _week_form(phrase: str, day: date) -> str | None:
    """The forms the extractor's notes write otherwise (weekends, weekdays, this week/month)."""
    said = format_day(day)
    words = phrase.split()
    if phrase in _SAME_DAY:
        return said
    if words[-1] == "weekend":
        return {"last": f"the weekend before {said}", "next": f"the weekend after {said}"}.get(
            words[0], f"the weekend of {said}"
        )
    if phrase == "this week":
        return f"the week of {said}"
    if phrase == "this month":
        return month_name(day.year, day.month)
    if words[-1] in WEEKDAY_NAMES:
        after = words[0] == "next" or phrase.startswith("this coming")
        return f"the {words[-1].capitalize()} {'after' if after else 'before'} {said}"
    return None


def resolve_phrase(phrase: str, day: date) -> str | None:
    """The date or period a relative `phrase` said on `day` means (None: not one this knows)."""
    lowered = " ".join(phrase.lower().split())
    form = _week_form(lowered, day)
    if form is not None:
        return form
    for note in resolve_relative_dates(lowered, datetime(day.year, day.month, day.day)):
        said, _, meant = note.partition(" = ")
        if said == lowered:
            return meant
    return None


def _lines(context: Sequence[MemoryUnit]) -> list[tuple[str, date, frozenset[str]]]:
    """Every dated line of the context in its order: (text, day, stems); a digest's turns apart."""
    out = []
    for unit in context:
        view: MemoryView = view_of(unit)
        for part in view.parts:
            if part.day is not None:
                text = " ".join(s.text for s in part.sentences)
                out.append((text.lower(), part.day, part.stems))
    return out


def anchor_day(phrase: str, hint: str, context: Sequence[MemoryUnit]) -> date | None:
    """The day of the line `phrase` comes from: among the lines that say it (else all dated
    lines), the one sharing most content words with `hint` (the answer, its quote, the question);
    the earlier in the context on a tie (it ranked higher)."""
    lines = _lines(context)
    saying = [line for line in lines if phrase.lower() in line[0]]
    pool = saying or lines
    if not pool:
        return None
    wanted = answer_terms(hint)
    best = max(range(len(pool)), key=lambda i: (len(wanted & pool[i][2]), -i))
    return pool[best][1]


def time_spans(text: str) -> list[tuple[int, int]]:
    """Where `text` names a time: its relative expressions and explicit dates (a cut must not
    split one: "last | week" would lose what it means)."""
    spans = [m.span() for m in _PHRASE.finditer(text)]
    return spans + [(d.start, d.start + len(d.text)) for d in find_dates(text)]


def resolve_answer_dates(answer: str, hint: str, context: Sequence[MemoryUnit]) -> str:
    """`answer` with each relative time rewritten as the date it means from its line's date (see
    the module docstring); an answer that is only a weekday name ("Friday") is the last such day
    before its line's date. Unchanged when it holds none or no line is dated."""
    bare = _BARE_WEEKDAY.match(answer)
    if bare:
        day = anchor_day(bare.group(1), hint, context)
        if day is None:
            return answer
        return _week_form(f"last {bare.group(1).lower()}", day) or answer

    def rewrite(match: re.Match[str]) -> str:
        day = anchor_day(match.group(0), hint, context)
        meant = resolve_phrase(match.group(0), day) if day is not None else None
        return meant or match.group(0)

    return _PHRASE.sub(rewrite, answer)
