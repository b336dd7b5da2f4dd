"""Temporal grounding: the time span a question points at, from the dates it names.

"What did she bake in June?", "Who did he meet on 3 May, 2023?", "Where did they go last year?":
a question that names a time says which sessions can hold its answer. `question_span` turns
those phrases into an interval of days, counted as `retrieval/index.to_days` counts memory
timestamps; the retriever lifts memories dated inside it (`temporal_grounding_weight`).

An event is often told some time after it happened ("we went camping last week"), so a span
reaches TELL_LATER_DAYS past its end. Phrases read, in this order of precedence:
- a full date ("3 May, 2023", "May 3, 2023"): that day;
- a month and a year ("June 2023", "in June, 2023"): that month;
- a month alone ("in June"): the last such month on or before the question's date;
- a year ("in 2022"): that year;
- relative to the question's date: "yesterday", "last week / weekend / month / year",
  "N days / weeks / months / years ago" (a unit's width around that point).
A question without a date phrase, or without a date of its own where one is needed, has no span.
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta

from evolvemem.data.dates import MONTHS, NUMBER_WORDS
from evolvemem.retrieval.index import to_days

TELL_LATER_DAYS = 31.0  # a span reaches this far past its end: events are told after they happen

_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH}\.?,?\s+(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\.?,?\s+(?:of\s+)?(\d{{4}})\b", re.I)
_MONTH_ALONE = re.compile(rf"\b(?:in|during|since|by|of|last|early|late|mid)[\s-]+{_MONTH}\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of|since)\s+((?:19|20)\d{2})\b", re.I)
_AGO = re.compile(
    r"\b(\d{1,2}|a|an|one|two|three|four|five|six|seven|eight|nine|ten)\s+(day|week|month|year)s?\s+ago\b", re.I
)
_LAST = re.compile(r"\b(yesterday|last\s+(?:week(?:end)?|month|year))\b", re.I)
_UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    return datetime(year, month, 1), datetime(year, month, calendar.monthrange(year, month)[1], 23, 59)


def _span(text: str, asked: datetime | None) -> tuple[datetime, datetime] | None:
    for pattern, day_first in ((_DAY_MONTH_YEAR, True), (_MONTH_DAY_YEAR, False)):
        found = pattern.search(text)
        if found:
            day, month, year = (
                (found.group(1), found.group(2), found.group(3))
                if day_first
                else (found.group(2), found.group(1), found.group(3))
            )
            try:
                start = datetime(int(year), MONTHS[month.lower()[:3]], int(day))
            except (ValueError, KeyError):
                continue
            return start, start + timedelta(hours=23, minutes=59)
    found = _MONTH_YEAR.search(text)
    if found:
        return _month_span(int(found.group(2)), MONTHS[found.group(1).lower()[:3]])
    found = _MONTH_ALONE.search(text)
    if found and asked is not None:
        month = MONTHS[found.group(1).lower()[:3]]
        year = asked.year if month <= asked.month else asked.year - 1
        return _month_span(year, month)
    found = _YEAR.search(text)
    if found:
        year = int(found.group(1))
        return datetime(year, 1, 1), datetime(year, 12, 31, 23, 59)
    if asked is None:
        return None
    found = _AGO.search(text)
    if found:
        count = int(found.group(1)) if found.group(1).isdigit() else NUMBER_WORDS[found.group(1).lower()]
        unit = _UNIT_DAYS[found.group(2).lower()]
        point = asked - timedelta(days=count * unit)
        return point - timedelta(days=unit), point + timedelta(days=unit)
    found = _LAST.search(text)
    if found:
        phrase = " ".join(found.group(1).lower().split())
        if phrase == "yesterday":
            day = asked - timedelta(days=1)
            return day.replace(hour=0, minute=0), day.replace(hour=23, minute=59)
        if phrase in ("last week", "last weekend"):
            return asked - timedelta(days=14), asked
        if phrase == "last month":
            year, month = (asked.year, asked.month - 1) if asked.month > 1 else (asked.year - 1, 12)
            return _month_span(year, month)
        return datetime(asked.year - 1, 1, 1), datetime(asked.year - 1, 12, 31, 23, 59)
    return None


def question_span(text: str, asked: datetime | None) -> tuple[float, float] | None:
    """(first day, last day) — as `to_days` counts — that the question's date phrase points at,
    the end extended by TELL_LATER_DAYS; None when it names no time."""
    span = _span(text, asked)
    if span is None:
        return None
    return to_days(span[0]), to_days(span[1]) + TELL_LATER_DAYS
