"""Foresight items with validity intervals (after EverMemOS), a candidate source.

Why: some memories only matter for a while. "Priya is going to Lisbon next week" answers
"what is Priya up to?" during that week and misleads a month later; "Tomasz is staying with
his parents until June" stops being true in July. A foresight item is such a plan, intention,
expectation or temporary state, with the interval in which it holds: from the day it was said
until the end of the period it names ("tomorrow", "next week", "in three days", "until 12
June", "this summer"), or, when it names none, `foresight_horizon_days` later. At question
time only the items whose interval contains the question date are candidates, ranked by rank
fusion of their own dense and BM25 scores; the view `foresight` returns their source memories.
A question without a date filters nothing; an item from an undated memory is never filtered.

Items are found once per index state, lazily, in the source's cache:
- rules (offline): sentences with a plan or temporary-state cue (`PLAN_CUE`) or a future time
  expression, questions excepted; one item per memory (its speaker and those sentences);
- LLM (`foresight_llm` and the retriever has a model): prompts/foresight.md reads the memories
  in batches of LLM_BATCH and returns items with ISO dates; a batch whose reply is unusable
  falls back to the rules. The cost is reported by the first question that uses the items.

On LoCoMo every question is dated at the conversation's last session, so only the plans of
the last weeks survive the filter: there the mechanism is mostly a "what is current" view.
"""

from __future__ import annotations

import calendar
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from evolvemem.data.dates import MONTHS
from evolvemem.data.dates import NUMBER_WORDS
from evolvemem.memory.offline_extract import WEEKDAYS
from evolvemem.retrieval.fusion import ViewHits, merge_max, rank_order
from evolvemem.contracts.usage import Usage
from evolvemem.retrieval.source_cache import SourceCache, cached

if TYPE_CHECKING:
    from evolvemem.retrieval.extensions import ViewRequest
    from evolvemem.space.config import RetrievalConfig

LABEL = "foresight"
LLM_BATCH = 20  # memories per foresight prompt
LLM_WORKERS = 8  # concurrent foresight calls while an index state's items are written
LLM_MAX_TOKENS = 800

# the month and weekday names and the small number words are the date parsers' own tables
_COUNTS = {**NUMBER_WORDS, "a few": 3, "few": 3, "several": 3}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 31, "year": 365}
# (first month, last month) of each season, northern hemisphere; winter runs into the next year
_SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11), "winter": (12, 2)}

_MONTH = (
    r"(Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?|"
    r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)  # capitalised, so the verb "may" is no month
_COUNT = r"(\d{1,3}|a couple of|couple of|a few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
_UNIT = r"(day|week|month|year)s?"
PLAN_CUE = re.compile(
    r"\b(?:will|won't|shall|(?<!was )(?<!were )going to|gonna|plan(?:s|ning|ned)? (?:to|on)|intend(?:s|ing)? to|"
    r"hop(?:e|es|ing) to|aim(?:s|ing)? to|about to|expect(?:s|ing)? to|looking forward to|can't wait to|"
    r"scheduled|upcoming|until|till|for now|temporarily|currently|at the moment|these days)\b|'ll\b",
    re.I,
)
_SPEAKER = re.compile(r"^\s*(?:\[[^\]]{1,40}\]\s*)?(?:([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3}):\s+)?")
_NOTES = re.compile(r"\s*\([^()]*=[^()]*\)\s*$")  # a trailing "(next week = ...)" note of the offline extractor
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class ForesightItem:
    """A plan or temporary state of one memory (`row`) and when it holds. `valid_until` None
    means "the default horizon after `valid_from`"; `valid_from` None means undated."""

    text: str
    row: int
    valid_from: date | None
    valid_until: date | None = None


# ------------------------------------------------------------------------------------ dates
def _end_of_month(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _month_after(day: date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


def _nearest(day: date, month: int, number: int | None, year: str | None) -> date | None:
    """`number` `month` in `year`, or without a year the occurrence nearest to `day` (so a
    date a few weeks back stays in the past); a month without a day means its last day."""

    def build(y: int) -> date | None:
        try:
            return _end_of_month(y, month) if number is None else date(y, month, number)
        except ValueError:
            return None  # 31 February and the like

    if year:
        return build(int(year))
    options = [d for d in (build(day.year - 1), build(day.year), build(day.year + 1)) if d is not None]
    return min(options, key=lambda d: abs((d - day).days)) if options else None


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _COUNTS[word.lower()]


def _this_or_next(m: re.Match[str], day: date) -> date:
    """End of the week, weekend, month or year named ("this", "next", "this coming", "later this")."""
    which, period = m.group(1).lower(), m.group(2).lower()
    ahead = 1 if which == "next" else 0
    if period in ("week", "weekend"):
        return day + timedelta(days=6 - day.weekday() + 7 * ahead)
    if period == "month":
        return _end_of_month(*_month_after(day, ahead))
    return date(day.year + ahead, 12, 31)


def _season(m: re.Match[str], day: date) -> date:
    """Last day of the season named; "next" (said in or after that season this year) skips a year."""
    which, (first, last) = m.group(1).lower(), _SEASONS[m.group(2).lower()]
    year = day.year + (1 if last < first and day.month >= first else 0)
    end = _end_of_month(year, last)
    if end < day:
        end = _end_of_month(year + 1, last)
    start = date(end.year - (1 if last < first else 0), first, 1)
    return _end_of_month(end.year + 1, last) if which == "next" and start <= day else end


def _weekday(m: re.Match[str], day: date) -> date:
    ahead = (WEEKDAYS.index(m.group(2).lower()) - day.weekday()) % 7 or 7
    return day + timedelta(days=ahead + (7 if m.group(1).lower() == "next" else 0))  # "next": the later reading


def _span(m: re.Match[str], day: date) -> date:
    return day + timedelta(days=_count(m.group(1)) * _UNIT_DAYS[m.group(2).lower()])


_FIXED = {"tonight": 0, "later today": 0, "tomorrow": 1, "the day after tomorrow": 2}
# (pattern, resolver, ambiguous): an ambiguous expression ("this week", "on Friday", "for two
# years") also reads as the past, so it sets the end of a plan but does not make one by itself.
# A time expression's match and the day it was said -> the last day it names (None: no such day).
_Resolver = Callable[[re.Match[str], date], date | None]
_EXPRESSIONS: tuple[tuple[re.Pattern[str], _Resolver, bool], ...] = (
    (
        re.compile(r"\b(the day after tomorrow|tomorrow|tonight|later today)\b", re.I),
        lambda m, day: day + timedelta(days=_FIXED[m.group(1).lower()]),
        False,
    ),
    (re.compile(r"\b(next|this coming|later this) (weekend|week|month|year)\b", re.I), _this_or_next, False),
    (re.compile(r"\b(this) (weekend|week|month|year)\b", re.I), _this_or_next, True),
    (re.compile(r"\b(next|coming) (spring|summer|autumn|fall|winter)\b", re.I), _season, False),
    (re.compile(r"\b(this) (spring|summer|autumn|fall|winter)\b", re.I), _season, True),
    (re.compile(rf"\b(next|this coming|until|till|by) ({'|'.join(WEEKDAYS)})\b", re.I), _weekday, False),
    (re.compile(rf"\b(on|this) ({'|'.join(WEEKDAYS)})\b", re.I), _weekday, True),
    (re.compile(rf"\b(?:in|within|for the next|over the next|in the next) {_COUNT} {_UNIT}\b", re.I), _span, False),
    (re.compile(rf"\b{_COUNT} {_UNIT} from now\b", re.I), _span, False),
    (re.compile(rf"\bfor {_COUNT} {_UNIT}\b", re.I), _span, True),
    (
        re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?: of)? {_MONTH}\.?(?:,? (\d{{4}}))?\b"),
        lambda m, day: _nearest(day, MONTHS[m.group(2).lower()], int(m.group(1)), m.group(3)),
        False,
    ),
    (
        re.compile(rf"\b{_MONTH}\.? (\d{{1,2}})(?:st|nd|rd|th)?\b(?:,? (\d{{4}}))?"),
        lambda m, day: _nearest(day, MONTHS[m.group(1).lower()], int(m.group(2)), m.group(3)),
        False,
    ),
    (
        re.compile(rf"\b(?i:in|by|until|till|through|before) {_MONTH}\b(?! \d)"),
        lambda m, day: _nearest(day, MONTHS[m.group(1).lower()], None, None),
        False,
    ),
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), lambda m, day: _iso_parts(m), False),
)


def _iso_parts(m: re.Match[str]) -> date | None:
    try:
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None


def horizon_end(text: str, day: date, ambiguous: bool = True) -> date | None:
    """The latest day on or after `day` that a time expression in `text` names (None: none).
    `ambiguous=False` ignores expressions that may as well point back in time."""
    ends = [
        resolve(m, day)
        for pattern, resolve, vague in _EXPRESSIONS
        if ambiguous or not vague
        for m in pattern.finditer(text)
    ]
    future = [e for e in ends if e is not None and e >= day]
    return max(future) if future else None


# ------------------------------------------------------------------------------------ rules
def rule_item(content: str, row: int, when: datetime | None) -> ForesightItem | None:
    """The foresight item of one memory by the rules, or None when it states no plan."""
    text = content.replace("’", "'")
    head = _SPEAKER.match(text)  # every part is optional: it always matches
    speaker, start = (head.group(1), head.end()) if head else (None, 0)
    body = _NOTES.sub("", text[start:])
    day = when.date() if when is not None else None
    picked: list[str] = []
    for sentence in _SENTENCE.split(body):
        sentence = sentence.strip()
        if not sentence or sentence.endswith("?"):
            continue
        if PLAN_CUE.search(sentence) or (day is not None and horizon_end(sentence, day, ambiguous=False)):
            picked.append(sentence)
    if not picked:
        return None
    joined = " ".join(picked)
    return ForesightItem(
        f"{speaker}: {joined}" if speaker else joined, row, day, horizon_end(joined, day) if day is not None else None
    )


def rule_items(memories: Sequence[Any], rows: Sequence[int] | None = None) -> list[ForesightItem]:
    """The rules' items of every memory (or of the memories at `rows`)."""
    return [
        item
        for row in (range(len(memories)) if rows is None else rows)
        if (item := rule_item(memories[row].content, row, memories[row].timestamp)) is not None
    ]


# ------------------------------------------------------------------------------------ LLM
def _iso_day(value: Any) -> date | None:
    if not isinstance(value, str) or not value.strip():
        return None
    from evolvemem.data.dates import parse_iso_datetime

    try:
        return parse_iso_datetime(value).date()
    except ValueError:
        return None


def parse_foresight(parsed: Any, rows: Sequence[int], days: Sequence[date | None]) -> list[ForesightItem]:
    """Items of a {"items": [{"memory": n, "text", "valid_from", "valid_until"}]} reply for the
    batch `rows` (n counts from 1). Items naming no memory of the batch, without text, or with
    an interval that ends before it starts are dropped; a reply with no item list is unusable."""
    entries = parsed.get("items") if isinstance(parsed, dict) else parsed
    if not isinstance(entries, list):
        raise ValueError("the reply has no list of items")
    items = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("text"), str) or not entry["text"].strip():
            continue
        number = entry.get("memory")
        if isinstance(number, str) and number.strip().isdigit():
            number = int(number)
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= len(rows):
            continue
        start = _iso_day(entry.get("valid_from")) or days[number - 1]
        until = _iso_day(entry.get("valid_until"))
        if until is not None and start is not None and until < start:
            continue
        items.append(ForesightItem(" ".join(entry["text"].split()), rows[number - 1], start, until))
    return items


def llm_items(memories: Sequence[Any], client: Any) -> tuple[list[ForesightItem], Usage, int]:
    """Items written by the model, batch by batch (concurrently); (items, cost, batches that fell back to rules)."""
    from evolvemem.llm.ask import ask_json
    from evolvemem.prompts import load_prompt

    prompt = load_prompt("foresight")
    batches = [list(range(i, min(i + LLM_BATCH, len(memories)))) for i in range(0, len(memories), LLM_BATCH)]

    def one(rows: list[int]) -> tuple[list[ForesightItem], Usage, bool]:
        days = [memories[r].timestamp.date() if memories[r].timestamp else None for r in rows]
        listed = "\n".join(
            f"[{n}] ({d.isoformat() if d else 'undated'}) {memories[r].content}"
            for n, (r, d) in enumerate(zip(rows, days), start=1)
        )
        items, cost = ask_json(
            client,
            prompt.render(memories=listed),
            role="foresight",
            max_tokens=LLM_MAX_TOKENS,
            parse=lambda parsed: parse_foresight(parsed, rows, days),
        )
        if items is None:
            return rule_items(memories, rows), cost, True
        return items, cost, False

    with ThreadPoolExecutor(max_workers=LLM_WORKERS) as pool:
        done = list(pool.map(one, batches))
    items = [item for found, _, _ in done for item in found]
    return items, sum((c for _, c, _ in done), Usage()), sum(fell for _, _, fell in done)


# ------------------------------------------------------------------------------------ index
def _day_number(value: date | None) -> float:
    return float(value.toordinal()) if value is not None else np.nan


@dataclass
class ForesightIndex:
    """The items of one index state as arrays: day numbers are proleptic ordinals (NaN: unknown)."""

    items: tuple[ForesightItem, ...]
    rows: np.ndarray
    starts: np.ndarray
    ends: np.ndarray  # NaN: the default horizon after the start
    vectors: np.ndarray
    keyword: Any  # evolvemem.retrieval.index keyword index over the item texts
    cost: Usage = field(default_factory=Usage)
    fallbacks: int = 0  # LLM batches that fell back to the rules
    reported: bool = False
    one_per_row: bool = True  # no two items share a memory row (always so for the rules)
    _valid: dict[tuple[date | None, float], np.ndarray] = field(
        default_factory=dict, repr=False
    )  # (question day, horizon) -> item positions

    def __len__(self) -> int:
        return len(self.items)

    def valid_items(self, question: datetime | None, horizon_days: float) -> np.ndarray:
        """Positions of the items that hold on the question's day, memoised (a conversation's
        questions share few dates)."""
        key = (question.date() if question is not None else None, float(horizon_days))
        found = self._valid.get(key)
        if found is None:
            found = self._valid.setdefault(key, np.flatnonzero(self.valid_at(question, horizon_days)))
        return found

    def valid_at(self, question: datetime | None, horizon_days: float) -> np.ndarray:
        """Which items hold on the question's day (all of them for an undated question)."""
        if question is None:
            return np.ones(len(self.items), dtype=bool)
        today = float(question.date().toordinal())
        ends = np.where(np.isnan(self.ends), self.starts + float(horizon_days), self.ends)
        return ~(self.starts > today) & ~(ends < today)  # NaN bounds never exclude


def build_index(
    items: Sequence[ForesightItem], embed: Any, cost: Usage = Usage(), fallbacks: int = 0
) -> ForesightIndex:
    from evolvemem.memory.nlp import tokenize
    from evolvemem.retrieval.index import KeywordIndex

    texts = [item.text for item in items]
    rows = np.array([i.row for i in items], dtype=np.int64)
    vectors = np.asarray(embed(texts), dtype=np.float32) if texts else np.zeros((0, 0), np.float32)
    return ForesightIndex(
        tuple(items),
        rows,
        np.array([_day_number(i.valid_from) for i in items], dtype=np.float64),
        np.array([_day_number(i.valid_until) for i in items], dtype=np.float64),
        vectors,
        KeywordIndex.build([tokenize(t) for t in texts]),
        cost,
        fallbacks,
        one_per_row=len(np.unique(rows)) == len(rows),
    )


# ------------------------------------------------------------------------------------ source
class ForesightSource:
    name = "foresight"

    def enabled(self, config: RetrievalConfig) -> bool:
        return config.foresight_top_k > 0

    def hits(self, request: ViewRequest, cache: SourceCache) -> tuple[list[ViewHits], Usage]:
        from evolvemem.mechanisms.scenes import rank_fusion

        config = request.config
        index, cost = self.index(request, cache)
        valid = index.valid_items(request.question.question_date, config.foresight_horizon_days)
        if not len(valid):
            return [], cost
        dense = index.vectors[valid] @ request.query_vector
        token_ids = index.keyword.token_ids(request.tokens)
        keyword = index.keyword.scores(token_ids, len(index))[valid] if token_ids else np.zeros(len(valid))
        scores = rank_fusion(dense, keyword, config)
        rows, k = index.rows[valid], config.foresight_top_k
        if index.one_per_row:  # the rules' items: no two share a memory, nothing to merge
            keep = rank_order(scores, rows)[:k]
            return [ViewHits(LABEL, rows[keep], scores[keep])], cost
        merged = merge_max(LABEL, [(rows, scores)])
        return [ViewHits(LABEL, merged.rows[:k], merged.scores[:k])], cost

    @staticmethod
    def index(request: ViewRequest, cache: SourceCache) -> tuple[ForesightIndex, Usage]:
        """The state's items (rules, or the model's when asked and available), built once under
        a lock; the build's cost goes to the first caller."""
        client = request.llm if request.config.foresight_llm else None
        key = ("items", getattr(client, "model", None), getattr(client, "api_base", None))

        def build() -> ForesightIndex:
            memories = request.state.memories
            if client is None:
                return build_index(rule_items(memories), request.embed)
            items, paid, fallbacks = llm_items(memories, client)
            return build_index(items, request.embed, paid, fallbacks)

        with cached(cache, "lock", threading.Lock):
            index = cached(cache, key, build)
            cost, index.reported = (Usage() if index.reported else index.cost), True
        return index, cost


SOURCE = ForesightSource()
