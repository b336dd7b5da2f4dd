"""The offline extractor: one memory per turn, no model.

Each memory is the turn as said, made self-contained: the absolute session date and the speaker
in front, a shared photo as its caption, and simple relative dates ("yesterday", "last week")
resolved to absolute ones in a trailing note, because temporal questions are asked about dates
the conversation only implies. Type, importance and annotations come from surface rules.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from pathlib import Path

from evolvemem.data.dates import NUMBER_WORDS, WEEKDAY_NAMES, format_day
from evolvemem.data.models import Conversation, Turn
from evolvemem.memory import nlp
from evolvemem.contracts.memory import MemoryUnit, make_memory_id
from evolvemem.contracts.usage import Usage

WEEKDAYS = WEEKDAY_NAMES

_AGO_RE = re.compile(
    r"\b(\d{1,2}|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten)\s+"
    r"(day|week|month|year)s?\s+ago\b",
    re.I,
)
_LAST_WEEKDAY_RE = re.compile(rf"\b(last|next|this past|this coming)\s+({'|'.join(WEEKDAYS)})\b", re.I)
_RELATIVE_RE = re.compile(
    r"\b(the day before yesterday|yesterday|last night|tomorrow|last weekend|next weekend|last week|next week|"
    r"last month|next month|last year|next year|this year)\b",
    re.I,
)

_PREFERENCE_WORDS = frozenset(
    "love loves loved adore adores favorite favourite favorites favourites prefer prefers "
    "preferred enjoy enjoys enjoyed".split()
)
_LIKE_SUBJECTS = frozenset("i we he she they".split())
_FIRST_PERSON = frozenset("i we my our i'm i've i'll we're we've we'll".split())
_EVENT_WORDS = frozenset(
    "went got made took began bought saw met won ran gave found felt started joined finished "
    "decided adopted moved visited going gonna planning plan will".split()
)
_TEXT_WORD_RE = re.compile(r"[a-z']+")
# every relative-date pattern contains one of these; texts without any skip the regexes
_RELATIVE_HINTS = ("yesterday", "tomorrow", "last", "next", "ago", "this year", "past", "coming")
_GREETING_RE = re.compile(
    r"^\W*(hey|hi|hello|thanks|thank you|bye|goodbye|see you|take care|good (morning|night|evening)|"
    r"wow|cool|nice|awesome|great|congrats|congratulations|yeah|yes|no|ok|okay|sure|lol|haha)\b",
    re.I,
)


def _rules_version() -> str:
    """Hash of the rule sources, so the memory cache refreshes itself when a rule changes."""
    here = Path(__file__).resolve()
    digest = hashlib.sha256()
    for path in (here, here.parent / "nlp.py"):
        digest.update(path.read_bytes())
    return "rules-" + digest.hexdigest()[:12]


def month_name(year: int, month: int) -> str:
    """ "June 2023" (the day dropped from `format_day`, so both spell months the same way)."""
    return format_day(datetime(year, month, 1)).split(" ", 1)[1]


def _shift_months(day: datetime, months: int) -> tuple[int, int]:
    index = day.year * 12 + (day.month - 1) + months
    return index // 12, index % 12 + 1


def _weekend_before(day: datetime) -> tuple[datetime, datetime]:
    """The Saturday and Sunday of the most recent weekend that ended before `day`."""
    sunday = day - timedelta(days=(day.weekday() - 6) % 7 or 7)
    return sunday - timedelta(days=1), sunday


def resolve_relative_dates(text: str, day: datetime) -> list[str]:
    """Notes like "yesterday = 7 May 2023" for the relative dates in `text` said on `day`."""
    lowered = text.lower()
    if not any(hint in lowered for hint in _RELATIVE_HINTS):
        return []
    notes: dict[str, str] = {}
    for m in _RELATIVE_RE.finditer(text):
        phrase = m.group(1).lower()
        if phrase in notes:
            continue
        if phrase in ("yesterday", "last night"):
            notes[phrase] = format_day(day - timedelta(days=1))
        elif phrase == "the day before yesterday":
            notes[phrase] = format_day(day - timedelta(days=2))
        elif phrase == "tomorrow":
            notes[phrase] = format_day(day + timedelta(days=1))
        elif phrase == "last weekend":
            saturday, sunday = _weekend_before(day)
            notes[phrase] = f"{format_day(saturday)} to {format_day(sunday)}"
        elif phrase == "next weekend":
            saturday = day + timedelta(days=(5 - day.weekday()) % 7 or 7)
            notes[phrase] = f"{format_day(saturday)} to {format_day(saturday + timedelta(days=1))}"
        elif phrase == "last week":
            notes[phrase] = f"the week before {format_day(day)}"
        elif phrase == "next week":
            notes[phrase] = f"the week after {format_day(day)}"
        elif phrase in ("last month", "next month"):
            notes[phrase] = month_name(*_shift_months(day, -1 if phrase.startswith("last") else 1))
        elif phrase == "last year":
            notes[phrase] = str(day.year - 1)
        elif phrase == "next year":
            notes[phrase] = str(day.year + 1)
        elif phrase == "this year":
            notes[phrase] = str(day.year)
    for m in _LAST_WEEKDAY_RE.finditer(text):
        which, weekday = m.group(1).lower(), m.group(2).lower()
        target = WEEKDAYS.index(weekday)
        if which in ("last", "this past"):
            offset = -((day.weekday() - target) % 7 or 7)
        else:
            offset = (target - day.weekday()) % 7 or 7
        notes[m.group(0).lower()] = format_day(day + timedelta(days=offset))
    for m in _AGO_RE.finditer(text):
        count = int(m.group(1)) if m.group(1).isdigit() else NUMBER_WORDS[m.group(1).lower()]
        unit = m.group(2).lower()
        if unit == "day":
            value = format_day(day - timedelta(days=count))
        elif unit == "week":
            value = f"the week of {format_day(day - timedelta(weeks=count))}"
        elif unit == "month":
            value = month_name(*_shift_months(day, -count))
        else:
            value = str(day.year - count)
        notes[m.group(0).lower()] = value
    return [f"{phrase} = {value}" for phrase, value in notes.items()]


def memory_type_of(words: list[str]) -> str:
    """ "preference" for turns that state a liking (love, favorite, prefer, enjoy, "I like"), else episodic."""
    if _PREFERENCE_WORDS.intersection(words):
        return "preference"
    for i, word in enumerate(words[1:], start=1):
        if word in ("like", "likes") and words[i - 1] in _LIKE_SUBJECTS | {"really", "also", "just"}:
            return "preference"
    return "episodic"


def importance_of(text: str, words: list[str], annotations: nlp.Annotations, speaker: str, has_dates: bool) -> float:
    """Rule-based importance in [0.05, 1]: long, named, first-person, dated turns rank high;
    greetings and questions low."""
    score = 0.3 + min(0.2, len(words) / 100)
    named = [p for p in annotations.persons if p != speaker] + list(annotations.locations) + list(annotations.entities)
    score += min(0.2, 0.07 * len(named))
    if _FIRST_PERSON.intersection(words) and any(w in _EVENT_WORDS or (len(w) > 4 and w.endswith("ed")) for w in words):
        score += 0.15
    if has_dates:
        score += 0.1
    if text.rstrip().endswith("?"):
        score *= 0.6
    if len(words) <= 8 and _GREETING_RE.match(text):
        score = min(score, 0.15)
    return round(max(0.05, min(1.0, score)), 3)


class OfflineExtractor:
    """Extractor protocol without a model: one memory per turn."""

    name = "offline"

    def __init__(self) -> None:
        self.version = _rules_version()

    def extract(self, conversation: Conversation, turn_ids: set[str] | None = None) -> tuple[list[MemoryUnit], Usage]:
        speakers = tuple(conversation.speakers)
        units = [
            self.memory_for_turn(conversation.conversation_id, turn, speakers)
            for turn in conversation.turns()
            if turn_ids is None or turn.turn_id in turn_ids
        ]
        return units, Usage()

    @staticmethod
    def memory_for_turn(conversation_id: str, turn: Turn, speakers: tuple[str, ...]) -> MemoryUnit:
        said = turn.full_text
        notes = resolve_relative_dates(said, turn.timestamp) if turn.timestamp else []
        prefix = f"[{format_day(turn.timestamp)}] " if turn.timestamp else ""
        content = f"{prefix}{turn.speaker}: {said}"
        if notes:
            content += f" ({'; '.join(notes)})"
        found = nlp.annotate(said + (" " + " ".join(notes) if notes else ""), known_persons=speakers)
        speaker = turn.speaker.lower()
        words = _TEXT_WORD_RE.findall(turn.text.lower().replace("’", "'"))
        persons = found.persons if speaker in found.persons else (speaker, *found.persons)
        return MemoryUnit(
            memory_id=make_memory_id(conversation_id, content, salt=turn.turn_id),
            conversation_id=conversation_id,
            content=content,
            memory_type=memory_type_of(words),
            session_id=turn.session_id,
            source_turn_ids=(turn.turn_id,),
            timestamp=turn.timestamp,
            importance=importance_of(turn.text, words, found, speaker, bool(notes)),
            persons=persons,
            locations=found.locations,
            entities=found.entities,
            topics=found.topics,
            keywords=found.keywords,
        )
