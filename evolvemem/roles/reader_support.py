"""What the offline reader knows before it answers: the question's form, each memory's
sentences and persons, and how well each memory supports the question.

Each memory sentence is scored for support of the question (stemmed content words weighted by
how rare they are within the context, whether the question's person is the speaker or
mentioned, a small rank prior). A digest quoting several turns (an episode, a recurring topic)
is read turn by turn: each turn is viewed like a one-turn memory of its speaker, so "is this
about the person asked?" is answered for the turn that holds the sentence, not for everybody
the digest names. Memory views are cached by content: the same memories recur across questions
and rounds.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from datetime import date
from typing import Sequence

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.data.date_mentions import DateMention, find_dates
from evolvemem.roles.context_format import (
    MONTHS,
    MemoryText,
    date_label_text,
    memory_date_text,
    parse_memory_text,
    quoted_turns,
)
from evolvemem.roles.reader_lexicon import (
    ALIKE_WEIGHT,
    AUXILIARIES,
    CAPTION_WORDS,
    DURATION,
    FIRST_PERSON,
    FREQUENCY,
    NUMBER_WORDS,
    QUESTION_FILLERS,
    SECOND_PERSON,
    STOPWORDS,
    WEEKDAYS,
    alike,
    stem,
    word_tokens,
)

RANK_WEIGHT = 0.04


# ---------------------------------------------------------------------------------------------
# Question analysis
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QuestionForm:
    """What kind of answer a question wants, and the words it is about.

    `terms` are stemmed content words; `names` are capitalised words that may be persons (the
    reader decides which are, from the persons it sees in the context); `target` is the stem of
    the noun a "how many" question counts."""

    kind: str  # date | year | month | count | duration | frequency | yesno | who | name | where | why | phrase
    terms: tuple[str, ...]
    names: tuple[str, ...]
    target: str = ""
    dates: tuple[DateMention, ...] = ()  # dates the question pins the event to ("in May 2023")


_FORM_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bhow long ago\b|\bhow long\b", re.I), "duration"),
    (re.compile(r"\b(what|which|in what|in which) year\b", re.I), "year"),
    (re.compile(r"\b(what|which|in what|in which) month\b", re.I), "month"),
    (re.compile(r"^\s*when\b|\b(what|which) (date|day|week|weekend)\b|^\s*\w+ when\b", re.I), "date"),
    (re.compile(r"\bhow (often|frequently)\b", re.I), "frequency"),
    (re.compile(r"\bhow (many|much|old)\b|\bnumber of\b", re.I), "count"),
    (re.compile(r"^\s*(who|whom|whose)\b|\b(with|by|from|for) whom\b", re.I), "who"),
    (re.compile(r"\bname(s|d)?\b|\bcalled\b", re.I), "name"),
    (
        re.compile(r"^\s*where\b|\b(what|which) (city|country|state|town|place|location|restaurant|park)\b", re.I),
        "where",
    ),
    (re.compile(r"^\s*why\b", re.I), "why"),
    (re.compile(rf"^\s*({'|'.join(AUXILIARIES)})\b", re.I), "yesno"),
)


@functools.lru_cache(maxsize=16384)
def analyse_question(text: str) -> QuestionForm:
    """The answer form and the content words of a question (cached: questions repeat per round)."""
    kind = next((k for pattern, k in _FORM_RULES if pattern.search(text)), "phrase")
    dates = tuple(find_dates(text))
    for mention in reversed(dates):
        text = text[: mention.start] + " " + text[mention.start + len(mention.text) :]
    terms: list[str] = []
    names: list[str] = []
    for index, (surface, lower) in enumerate(word_tokens(text)):
        bare = re.sub(r"['’]s$", "", surface)
        if (
            index > 0
            and bare[:1].isupper()
            and lower not in STOPWORDS
            and bare.lower() not in MONTHS
            and bare.lower() not in WEEKDAYS
        ):
            names.append(bare)
            continue
        if not lower[0].isalnum() or lower in STOPWORDS or lower in QUESTION_FILLERS:
            continue
        terms.append(stem(bare.lower()))
    target = ""
    match = re.search(r"\bhow many\s+(\w+)", text, re.I)
    if match:
        target = stem(match.group(1).lower())
    return QuestionForm(kind, tuple(dict.fromkeys(terms)), tuple(dict.fromkeys(names)), target, dates)


# ---------------------------------------------------------------------------------------------
# Memory views (cached by content: the same memories recur across questions and rounds)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sentence:
    text: str
    tokens: tuple[tuple[str, str], ...]  # (surface, stem)
    stems: frozenset[str]
    named: frozenset[str]  # lowercased capitalised words, except names used to address someone
    addressed: frozenset[str]  # names used to address someone ("Thanks, Ana!")
    second_person: bool  # says "you"/"your": about the person addressed
    first_person: bool
    caption: bool  # a shared photo's caption ("shares a photo of ...")


@dataclass(frozen=True)
class MemoryView:
    speaker: str | None
    sentences: tuple[Sentence, ...]
    stems: frozenset[str]
    people: frozenset[str]  # lowercased speaker, annotated persons and capitalised words
    addressed: frozenset[str]
    proper: frozenset[str]  # lowercased words known to be names: annotated, speaker, capitalised mid-sentence
    notes: tuple[tuple[str, str], ...]
    date_text: str
    locations: tuple[str, ...]
    day: date | None  # the memory's own date, for questions that name one
    turns: tuple[MemoryView, ...] = ()  # a digest's quoted turns, each viewed like a one-turn memory

    @property
    def parts(self) -> tuple[MemoryView, ...]:
        """What is read for support and person checks: a digest's turns, else the memory itself."""
        return self.turns or (self,)


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'A-Z0-9\[])|\s*\[(?=shares )|\]\s*")
_VOCATIVE = re.compile(
    r"(?:^|[,.!?;:]\s*|\b(?:hey|hi|hello|thanks|thank you|congrats|congratulations|wow|yeah|oh|sorry|dear|bye|yes|no)\s*,?\s+)"
    r"([A-Z][\w'-]*)\s*(?=[,!.?;:]|$)",
    re.I,
)


def sentence_of(text: str) -> Sentence:
    """One sentence's tokens, stems and who it names or speaks to."""
    words = word_tokens(text)
    tokens = tuple((surface, stem(lower)) for surface, lower in words)
    addressed = frozenset(m.group(1).lower() for m in _VOCATIVE.finditer(text) if m.group(1)[:1].isupper())
    named = frozenset(re.sub(r"['’]s$", "", w).lower() for w, _ in words if w[:1].isupper()) - addressed
    lowers = {lower for _, lower in words}
    caption = text.lower().startswith("shares a photo")
    stems = frozenset(s for _, s in tokens) | (CAPTION_WORDS if caption else frozenset())
    return Sentence(
        text, tokens, stems, named, addressed, bool(lowers & SECOND_PERSON), bool(lowers & FIRST_PERSON), caption
    )


def _day_of(date_text: str) -> date | None:
    mentions = find_dates(date_text)
    if mentions and mentions[0].year and mentions[0].month:
        return date(mentions[0].year, mentions[0].month, mentions[0].day or 1)
    return None


def _turn_view(parsed: MemoryText, persons: tuple[str, ...], locations: tuple[str, ...], date_text: str) -> MemoryView:
    """The view of one spoken turn (or of a memory read whole)."""
    pieces = [p.strip(" []") for p in _SENTENCE_SPLIT.split(parsed.body) if p and p.strip(" []")]
    sentences = tuple(sentence_of(p) for p in pieces) or (sentence_of(parsed.body),)
    stems = frozenset().union(*(s.stems for s in sentences))
    people = {p.lower() for p in persons}.union(*(s.named | s.addressed for s in sentences))
    if parsed.speaker:
        people |= {part.lower() for part in parsed.speaker.split()}
    addressed = frozenset().union(*(s.addressed for s in sentences))
    proper = {p.lower() for p in persons} | {p.lower() for p in locations}
    proper |= {
        re.sub(r"['’]s$", "", w).lower()
        for s in sentences
        for w, _ in s.tokens[1:]
        if w[:1].isupper() and w.lower() not in STOPWORDS
    }
    if parsed.speaker:
        proper |= {part.lower() for part in parsed.speaker.split()}
    return MemoryView(
        parsed.speaker,
        sentences,
        stems,
        frozenset(people),
        addressed,
        frozenset(proper),
        parsed.notes,
        date_text,
        locations,
        _day_of(date_text),
    )


@functools.lru_cache(maxsize=65536)
def _memory_view(
    content: str, persons: tuple[str, ...], locations: tuple[str, ...], date_text: str, one_turn: bool
) -> MemoryView:
    """A memory's view. A memory from one turn has one speaker and is read whole; a digest of
    several turns gets one view per quoted turn (dated by its own label, else the memory's
    date) and, as a whole, no speaker and everything its turns hold."""
    turns = () if one_turn else quoted_turns(content, persons)
    if not turns:
        return _turn_view(parse_memory_text(content), persons, locations, date_text)
    parts = tuple(
        _turn_view(t, persons, locations, date_label_text(t.date_label) if t.date_label else date_text) for t in turns
    )
    return MemoryView(
        None,
        tuple(s for part in parts for s in part.sentences),
        frozenset().union(*(v.stems for v in parts)),
        frozenset().union(*(v.people for v in parts)),
        frozenset().union(*(v.addressed for v in parts)),
        frozenset().union(*(v.proper for v in parts)),
        tuple(n for part in parts for n in part.notes),
        date_text,
        locations,
        _day_of(date_text),
        parts,
    )


def _about(view: MemoryView, sentence: Sentence, persons: Sequence[str]) -> bool:
    """Whether a sentence is about one of the question's persons.

    In a spoken turn the speaker is "I"; a name used to address someone ("Thanks, Ana!")
    makes the sentence about Ana only when it speaks to her ("you", "your"). Third-person
    memories (no speaker) are about whoever they name or are annotated with."""
    if not persons:
        return True
    lowered = [p.lower() for p in persons]
    if view.speaker is None:
        return any(p in view.people for p in lowered)
    speaker = view.speaker.lower().split()
    for p in lowered:
        if p in speaker or p in sentence.named:
            return True
        if sentence.second_person and (p in sentence.addressed or (p in view.addressed and not sentence.first_person)):
            return True
    return False


def view_of(unit: MemoryUnit) -> MemoryView:
    return _memory_view(
        unit.content, unit.persons, unit.locations, memory_date_text(unit), len(unit.source_turn_ids) == 1
    )


# ---------------------------------------------------------------------------------------------
# Support scoring
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Support:
    """How well one memory (through its best sentence) supports the question."""

    rank: int
    unit: MemoryUnit
    view: MemoryView  # the memory's view, or for a digest the view of the turn holding `sentence`
    sentence: Sentence
    coverage: float  # weighted share of the question's content words found (0..1)
    person_ok: bool
    score: float  # coverage + person bonus + form fit + rank prior: orders the candidates


def _form_fit(kind: str, sentence: Sentence, view: MemoryView) -> float:
    text = sentence.text
    if kind in ("date", "year", "month"):
        return 1.0 if find_dates(text) or any(expr.lower() in text.lower() for expr, _ in view.notes) else 0.0
    if kind == "count":
        return 1.0 if any(w.isdigit() or w.lower() in NUMBER_WORDS for w, _ in sentence.tokens) else 0.0
    if kind == "duration":
        return 1.0 if DURATION.search(text) else 0.0
    if kind == "frequency":
        return 1.0 if FREQUENCY.search(text) else 0.0
    if kind == "where":
        return 1.0 if any(loc.lower() in text.lower() for loc in view.locations) else 0.0
    return 0.0


def _date_matches(day: date | None, mentions: Sequence[DateMention]) -> bool:
    """Whether a memory dated `day` could be about the date a question names: within ten days
    of a full date, in the named month, or in the named year."""
    if day is None:
        return False
    for m in mentions:
        if m.day and m.month:
            year = m.year or day.year
            try:
                if abs((day - date(year, m.month, m.day)).days) <= 10:
                    return True
            except ValueError:
                continue
        elif m.month:
            if day.month == m.month and (m.year is None or day.year == m.year):
                return True
        elif m.year and day.year == m.year:
            return True
    return False


_DATE_TERM = "@date"


def rank_support(
    question_text: str, context: Sequence[MemoryUnit], *, prefer_time: bool = False, rank_weight: float = RANK_WEIGHT
) -> tuple[QuestionForm, tuple[str, ...], list[Support]]:
    """Score every memory in the context; returns the question form, the question's persons
    and one `Support` per memory, best first. A digest's sentences are scored within their
    turns (`MemoryView.parts`), each turn checked for the person like a one-turn memory.

    A memory must be about one of the question's persons: the names known as persons in the
    context, and names no memory mentions at all (the context cannot be about them).

    Coverage is the idf-weighted share of the question's words found in the best sentence
    (75%) and anywhere in the memory (25%; in a digest, anywhere in the sentence's turn, so
    one speaker's words do not lend support to what another said). A date the question names
    acts as one more word, found when the memory's (the turn's) date matches it. A sentence that is itself a question counts half:
    asking about something is not evidence of it. A sentence holding the kind of value the
    question wants (a date, a number, a place) ranks a little higher; `prefer_time` (the
    temporal style) makes that pull stronger for date questions."""
    form = analyse_question(question_text)
    views = [view_of(unit) for unit in context]
    known_people = frozenset().union(*(v.people for v in views)) if views else frozenset()
    persons = tuple(
        n
        for n in form.names
        if (n.lower() in known_people and _is_person_somewhere(n, context, views))
        or not any(stem(n.lower()) in v.stems for v in views)
    )
    other_names = [stem(n.lower()) for n in form.names if n not in persons]
    terms = tuple(dict.fromkeys(form.terms + tuple(other_names)))
    dated = [[_date_matches(part.day, form.dates) if form.dates else False for part in v.parts] for v in views]
    n_docs = len(views)
    weights = {t: math.log(1.0 + (n_docs + 1) / (sum(t in v.stems for v in views) + 0.5)) for t in terms}
    if form.dates:
        weights[_DATE_TERM] = math.log(1.0 + (n_docs + 1) / (sum(any(d) for d in dated) + 0.5))
    total = sum(weights.values())
    related = {t: alike(t) for t in weights}  # once per question, not per sentence
    fit_weight = 0.2 if prefer_time and form.kind in ("date", "year", "month") else 0.05
    supports = []
    for rank, (unit, view) in enumerate(zip(context, views)):
        best: tuple[float, float, Sentence, bool, MemoryView] | None = None
        for part, part_dated in zip(view.parts, dated[rank]):
            date_weight = weights[_DATE_TERM] if part_dated else 0.0
            part_words = sum(w * _found(t, part.stems, related) for t, w in weights.items())
            memory_cover = (part_words + date_weight) / total if total else 0.0
            for sentence in part.sentences:
                about = _about(part, sentence, persons)
                if total:
                    cover = (
                        sum(w * _found(t, sentence.stems, related) for t, w in weights.items()) + date_weight
                    ) / total
                    coverage = 0.75 * cover + 0.25 * memory_cover
                else:
                    coverage = float(about)
                if sentence.text.rstrip().endswith("?"):
                    coverage *= 0.5
                score = coverage + fit_weight * _form_fit(form.kind, sentence, part)
                score += 0.1 if persons and about else 0.0
                if best is None or (about, score) > (best[3], best[0]):
                    best = (score, coverage, sentence, about, part)
        assert best is not None
        score = best[0] + rank_weight * (1.0 - rank / max(n_docs, 1))
        supports.append(Support(rank, unit, best[4], best[2], best[1], best[3], score))
    supports.sort(key=lambda s: -s.score)
    return form, persons, supports


def _found(term: str, stems: frozenset[str], related: dict[str, frozenset[str]]) -> float:
    """1 when the words hold the question's word, `ALIKE_WEIGHT` when they say it in other words
    (`related`: each question word's `alike` stems, looked up once per question)."""
    if term in stems:
        return 1.0
    return ALIKE_WEIGHT if not related.get(term, frozenset()).isdisjoint(stems) else 0.0


def _is_person_somewhere(name: str, context: Sequence[MemoryUnit], views: list[MemoryView]) -> bool:
    """A capitalised question word counts as a person when some memory (or a turn a digest
    quotes) has it as speaker or annotated person, or when no memory annotates it as a
    location/entity (unannotated text)."""
    lower = name.lower()
    for unit, view in zip(context, views):
        if any(part.speaker and lower in part.speaker.lower().split() for part in view.parts) or any(
            lower == p.lower() for p in unit.persons
        ):
            return True
    return not any(lower in (x.lower() for x in unit.locations + unit.entities) for unit in context)
