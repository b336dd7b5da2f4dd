"""Explicit dates written in text ("7 May 2023", "May 2023", "2023-05-07"), found left to right.

Data-level vocabulary shared by the readers (roles/), the answer rules (answering/) and the reader
failure split (scoring/), so none of them reaches into another for it."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from evolvemem.data.dates import MONTH_NAMES
from evolvemem.data.dates import MONTHS as MONTH_NUMBERS  # names and abbreviations -> number

MONTHS = MONTH_NAMES  # full names only
_MONTH_RE = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"

# Explicit date expressions, most specific first. Each yields (day, month, year) parts.
_DATE_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), ("year", "month_num", "day")),
    (
        re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\.?,?\s+(\d{{4}})\b", re.I),
        ("day", "month", "year"),
    ),
    (re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), ("month", "day", "year")),
    (re.compile(rf"\b({_MONTH_RE})\.?,?\s+(?:of\s+)?(\d{{4}})\b", re.I), ("month", "year")),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\b", re.I), ("day", "month")),
    (re.compile(rf"\b({_MONTH_RE})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b", re.I), ("month", "day")),
    (re.compile(r"\b((?:19|20)\d{2})\b"), ("year",)),
)


@dataclass(frozen=True)
class DateMention:
    """A date written in text: the parts it names, where it was, and a canonical rendering."""

    text: str
    start: int
    day: int | None
    month: int | None
    year: int | None

    @property
    def canonical(self) -> str:
        """ "7 May 2023", "May 2023", "2023" — the LoCoMo gold style, no zero padding."""
        parts = []
        if self.day and self.month:
            parts.append(str(self.day))
        if self.month:
            parts.append(MONTHS[self.month - 1].capitalize())
        if self.year:
            parts.append(str(self.year))
        return " ".join(parts) if parts else self.text


@functools.lru_cache(maxsize=65536)
def find_dates(text: str) -> tuple[DateMention, ...]:
    """Explicit date expressions in `text`, left to right, without overlaps (cached: memory
    sentences are scanned again for every question they are retrieved for)."""
    found: list[DateMention] = []
    taken: list[tuple[int, int]] = []
    for pattern, roles in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            span = match.span()
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            parts = dict(zip(roles, match.groups()))
            month = MONTH_NUMBERS.get(parts["month"].lower().rstrip(".")) if "month" in parts else None
            if "month_num" in parts:
                month = int(parts["month_num"])
            day = int(parts["day"]) if "day" in parts else None
            if (month is not None and not 1 <= month <= 12) or (day is not None and not 1 <= day <= 31):
                continue
            year = int(parts["year"]) if "year" in parts else None
            found.append(DateMention(match.group(0), span[0], day, month, year))
            taken.append(span)
    return tuple(sorted(found, key=lambda d: d.start))
