"""Date parsing for the benchmark formats, independent of the machine's locale.

`datetime.strptime` reads month names and am/pm through the C locale, so a loader that uses it
can fail on a machine set to another language. These parsers use their own month table instead.
Each raises ValueError on text it cannot read; the loaders turn that into a DataError that
names the file and field. All results are naive datetimes (the benchmarks carry no time zone).
"""

from __future__ import annotations

import re
from datetime import date, datetime

MONTH_NAMES = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
TIME_NAMES = frozenset(MONTH_NAMES) | frozenset(WEEKDAY_NAMES)  # words that name a time, not a thing
# counts said in words ("two weeks ago", "a couple of days")
NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "couple of": 2,
    "a couple of": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
# month name or abbreviation -> month number
MONTHS = {
    **{name: number for number, name in enumerate(MONTH_NAMES, start=1)},
    **{name[:3]: number for number, name in enumerate(MONTH_NAMES, start=1)},
    "sept": 9,
}

# "1:56 pm on 8 May, 2023" (LoCoMo session_N_date_time)
_LOCOMO = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*$", re.I
)
# "2023/05/20 (Sat) 02:21" (LongMemEval haystack_dates / question_date); time part optional
_LONGMEMEVAL = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\([A-Za-z]+\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$")
# "'2024-10-01 08:00' Tuesday" or "2024-10-01" anywhere in a MemBench time string
_YMD_HM = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T]+(\d{1,2}):?(\d{2}))?")


def parse_locomo_datetime(text: str) -> datetime:
    """Parse LoCoMo's "1:56 pm on 8 May, 2023"."""
    match = _LOCOMO.match(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"{text!r} is not a date like '1:56 pm on 8 May, 2023'")
    hour, minute, half, day, month_name, year = match.groups()
    month = MONTHS.get(month_name.lower())
    if month is None:
        raise ValueError(f"{text!r} has an unknown month {month_name!r}")
    hour_24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    return datetime(int(year), month, int(day), hour_24, int(minute))


def parse_longmemeval_date(text: str) -> datetime:
    """Parse LongMemEval's "2023/05/20 (Sat) 02:21" (the weekday and time are optional)."""
    match = _LONGMEMEVAL.match(text) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"{text!r} is not a date like '2023/05/20 (Sat) 02:21'")
    year, month, day, hour, minute = match.groups()
    return datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0))


def parse_iso_datetime(text: str) -> datetime:
    """Parse an ISO 8601 date or date-time ("2024-03-05", "2024-03-05T14:30", "...Z").

    A time-zone offset is converted to UTC and dropped so that every timestamp in a dataset
    compares with every other."""
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not an ISO date string")
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO date like '2024-03-05' or '2024-03-05T14:30'") from None
    offset = value.utcoffset()
    if offset is not None:
        value = (value - offset).replace(tzinfo=None)
    return value


def find_ymd_datetime(text: str) -> datetime | None:
    """The first "YYYY-MM-DD[ HH:MM]" inside free text, or None (MemBench times are irregular)."""
    if not isinstance(text, str):
        return None
    match = _YMD_HM.search(text)
    if not match:
        return None
    year, month, day, hour, minute = match.groups()
    try:
        return datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0))
    except ValueError:
        return None


def format_day(value: date) -> str:
    """ "8 May 2023": how synthetic conversations and answers write an absolute date."""
    return f"{value.day} {_MONTH_NAMES[value.month - 1]} {value.year}"


_MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
