"""`OfflineAnswerer`: an extractive reader that needs no model.

It makes offline runs give meaningful, config-sensitive scores: the answer depends on which
memories retrieval put in the context, in what order, and on the answer style. Each memory
sentence is scored for support of the question (stemmed content words weighted by how rare
they are within the context, whether the question's person is the speaker or mentioned, a
small rank prior), and the best-supported sentence is shaped by the question's form: a date
for "when", a number for "how many", Yes/No, a name for "who", a place for "where", else the
sentence compressed to the words that answer. It abstains when support is weak or when the
supporting memory is about somebody else.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Sequence

from evolvemem.data.models import Question
from evolvemem.memory.unit import MemoryUnit
from evolvemem.roles.context_format import (
    ABSTENTION, MONTHS, DateMention, find_dates, memory_date_text, parse_memory_text,
)
from evolvemem.roles.protocols import AnswerResult

# ---------------------------------------------------------------------------------------------
# Lexicon: general English, nothing from any benchmark
# ---------------------------------------------------------------------------------------------
STOPWORDS = frozenset("""
a an the and or but if then than so as of at by for with about against between into through during
before after above below to from up down in out on off over under again further once here there all
any both each few more most other some such no nor not only own same too very can will just should
now i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
hers herself it its itself they them their theirs themselves what which who whom whose this that these
those am is are was were be been being have has had having do does did doing would could might must
shall may i'm i've i'd i'll you're you've it's that's there's we're they're he's she's let's
don't didn't doesn't isn't wasn't aren't weren't can't couldn't won't wouldn't haven't hasn't
when where why how also get got gets getting
""".split())
QUESTION_FILLERS = frozenset("kind type sort thing things something name specific exactly likely "
                             "probably usually ever yet one ones many much long old often ago times".split())
FILLERS = frozenset("""yeah yes wow oh hey hi hello thanks thank really so just like totally actually
pretty super lol haha awesome amazing great cool nice definitely absolutely literally basically
honestly seriously glad okay ok um uh hmm sure lot lots much many always""".split())
GLUE = frozenset("and or of &".split())
TIME_WORDS = frozenset("""yesterday today tonight tomorrow recently lately last next ago weekend week
month year day night time first""".split())
CLAUSE_WORDS = frozenset("""because since while when whenever although though unless until that which
who where whether but so if""".split())
NEGATIONS = frozenset("not never no nope neither nor".split())
AUXILIARIES = ("is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can", "could",
               "would", "will", "should", "shall", "might", "am")
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
NUMBER_WORDS = frozenset("""one two three four five six seven eight nine ten eleven twelve thirteen
fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty hundred dozen
couple several""".split())
RELATIONS = frozenset("""mother mom mum father dad parents sister brother siblings husband wife partner
spouse friend friends kids children son daughter grandma grandmother grandpa grandfather aunt uncle
cousin boss coworker colleague teacher mentor neighbor neighbour boyfriend girlfriend family""".split())
DURATION = re.compile(
    r"\b(?:for\s+|since\s+)?(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"a few|a couple of|several|many)\s+(?:years?|months?|weeks?|days?|hours?|minutes?|decades?)(?:\s+ago)?\b"
    r"|\bsince\s+(?:(?:19|20)\d{2}|[A-Z][a-z]+(?:\s+(?:19|20)\d{2})?)", re.I)
FREQUENCY = re.compile(
    r"\b(?:once|twice|thrice|(?:\d+|two|three|four|five|six|seven|a few|several) times)\s+(?:a|an|per|every|each)\s+\w+"
    r"|\b(?:every|each)\s+(?:other\s+)?(?:day|week|weekend|month|year|morning|evening|night|\w+day)\b"
    r"|\b(?:daily|weekly|monthly|yearly|annually|nightly)\b", re.I)
# Irregular verb forms mapped to their base so "made" matches "make" (the stemmer cannot).
_IRREGULAR = dict(pair.split(":") for pair in """made:make went:go gone:go took:take taken:take bought:buy
saw:see seen:see gave:give given:give got:get gotten:get ran:run came:come felt:feel found:find
left:leave met:meet read:read said:say told:tell thought:think taught:teach brought:bring built:build
began:begin begun:begin wrote:write written:write drew:draw drawn:draw sang:sing sung:sing
won:win lost:lose kept:keep held:hold heard:hear knew:know known:know spent:spend sent:send
became:become ate:eat eaten:eat drove:drive driven:drive flew:fly flown:fly swam:swim
chose:choose chosen:choose wore:wear worn:wear grew:grow grown:grow paid:pay sold:sell
caught:catch fell:fall fallen:fall forgot:forget forgotten:forget""".split())
_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?|[^\sA-Za-z0-9]")


@functools.lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem.porter import PorterStemmer  # lazy: nltk import is slow-ish

    return PorterStemmer()


@functools.lru_cache(maxsize=131072)
def stem(word: str) -> str:
    """Porter stem of a lowercase word (irregular verbs mapped to their base first)."""
    word = word.replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    return _stemmer().stem(_IRREGULAR.get(word, word))


def word_tokens(text: str) -> list[tuple[str, str]]:
    """(surface, lowercase) tokens: words, numbers and single punctuation marks."""
    return [(w, w.lower().replace("’", "'")) for w in _WORD.findall(text)]


STYLES = ("concise", "extractive", "detailed", "temporal", "step_by_step", "cautious")
RANK_WEIGHT = 0.04
_CONCISE_WORDS = 4
_PHRASE_WORDS = 8


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
    (re.compile(r"^\s*where\b|\b(what|which) (city|country|state|town|place|location|restaurant|park)\b", re.I), "where"),
    (re.compile(r"^\s*why\b", re.I), "why"),
    (re.compile(rf"^\s*({'|'.join(AUXILIARIES)})\b", re.I), "yesno"),
)


@functools.lru_cache(maxsize=16384)
def analyse_question(text: str) -> QuestionForm:
    """The answer form and the content words of a question (cached: questions repeat per round)."""
    kind = next((k for pattern, k in _FORM_RULES if pattern.search(text)), "phrase")
    dates = tuple(find_dates(text))
    for mention in reversed(dates):
        text = text[:mention.start] + " " + text[mention.start + len(mention.text):]
    terms: list[str] = []
    names: list[str] = []
    for index, (surface, lower) in enumerate(word_tokens(text)):
        bare = re.sub(r"['’]s$", "", surface)
        if index > 0 and bare[:1].isupper() and lower not in STOPWORDS and bare.lower() not in MONTHS \
                and bare.lower() not in WEEKDAYS:
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


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'A-Z0-9\[])|\s*\[(?=shares )|\]\s*")
_VOCATIVE = re.compile(
    r"(?:^|[,.!?;:]\s*|\b(?:hey|hi|hello|thanks|thank you|congrats|congratulations|wow|yeah|oh|sorry|dear|bye|yes|no)\s*,?\s+)"
    r"([A-Z][\w'-]*)\s*(?=[,!.?;:]|$)", re.I)
_SECOND_PERSON = frozenset("you your yours yourself you're you've you'd you'll".split())
# A caption answers questions about a picture, whatever word the question uses for it.
CAPTION_WORDS = frozenset({"share", "photo", "photographi", "pictur", "pic", "imag", "snapshot"})
_FIRST_PERSON = frozenset("i me my mine myself we us our ours i'm i've i'd i'll we're we've".split())


def _sentence(text: str) -> Sentence:
    words = word_tokens(text)
    tokens = tuple((surface, stem(lower)) for surface, lower in words)
    addressed = frozenset(m.group(1).lower() for m in _VOCATIVE.finditer(text) if m.group(1)[:1].isupper())
    named = frozenset(re.sub(r"['’]s$", "", w).lower() for w, _ in words if w[:1].isupper()) - addressed
    lowers = {lower for _, lower in words}
    caption = text.lower().startswith("shares a photo")
    stems = frozenset(s for _, s in tokens) | (CAPTION_WORDS if caption else frozenset())
    return Sentence(text, tokens, stems, named, addressed,
                    bool(lowers & _SECOND_PERSON), bool(lowers & _FIRST_PERSON), caption)


@functools.lru_cache(maxsize=65536)
def _memory_view(content: str, persons: tuple[str, ...], locations: tuple[str, ...], date_text: str) -> MemoryView:
    parsed = parse_memory_text(content)
    pieces = [p.strip(" []") for p in _SENTENCE_SPLIT.split(parsed.body) if p and p.strip(" []")]
    sentences = tuple(_sentence(p) for p in pieces) or (_sentence(parsed.body),)
    stems = frozenset().union(*(s.stems for s in sentences))
    people = {p.lower() for p in persons}.union(*(s.named | s.addressed for s in sentences))
    if parsed.speaker:
        people |= {part.lower() for part in parsed.speaker.split()}
    addressed = frozenset().union(*(s.addressed for s in sentences))
    proper = {p.lower() for p in persons} | {p.lower() for p in locations}
    proper |= {re.sub(r"['’]s$", "", w).lower() for s in sentences for w, _ in s.tokens[1:]
               if w[:1].isupper() and w.lower() not in STOPWORDS}
    if parsed.speaker:
        proper |= {part.lower() for part in parsed.speaker.split()}
    mentions = find_dates(date_text)
    day = None
    if mentions and mentions[0].year and mentions[0].month:
        day = date(mentions[0].year, mentions[0].month, mentions[0].day or 1)
    return MemoryView(parsed.speaker, sentences, stems, frozenset(people), addressed, frozenset(proper), parsed.notes,
                      date_text, locations, day)


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
    return _memory_view(unit.content, unit.persons, unit.locations, memory_date_text(unit))


# ---------------------------------------------------------------------------------------------
# Support scoring
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Support:
    """How well one memory (through its best sentence) supports the question."""

    rank: int
    unit: MemoryUnit
    view: MemoryView
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


def rank_support(question_text: str, context: Sequence[MemoryUnit], *, prefer_time: bool = False,
                 rank_weight: float = RANK_WEIGHT) -> tuple[QuestionForm, tuple[str, ...], list[Support]]:
    """Score every memory in the context; returns the question form, the question's persons
    and one `Support` per memory, best first.

    A memory must be about one of the question's persons: the names known as persons in the
    context, and names no memory mentions at all (the context cannot be about them).

    Coverage is the idf-weighted share of the question's words found in the best sentence
    (75%) and anywhere in the memory (25%). A date the question names acts as one more word,
    found when the memory's date matches it. A sentence that is itself a question counts half:
    asking about something is not evidence of it. A sentence holding the kind of value the
    question wants (a date, a number, a place) ranks a little higher; `prefer_time` (the
    temporal style) makes that pull stronger for date questions."""
    form = analyse_question(question_text)
    views = [view_of(unit) for unit in context]
    known_people = frozenset().union(*(v.people for v in views)) if views else frozenset()
    persons = tuple(n for n in form.names if (n.lower() in known_people and _is_person_somewhere(n, context, views))
                    or not any(stem(n.lower()) in v.stems for v in views))
    other_names = [stem(n.lower()) for n in form.names if n not in persons]
    terms = tuple(dict.fromkeys(form.terms + tuple(other_names)))
    dated = [_date_matches(v.day, form.dates) for v in views] if form.dates else [False] * len(views)
    n_docs = len(views)
    weights = {t: math.log(1.0 + (n_docs + 1) / (sum(t in v.stems for v in views) + 0.5)) for t in terms}
    if form.dates:
        weights[_DATE_TERM] = math.log(1.0 + (n_docs + 1) / (sum(dated) + 0.5))
    total = sum(weights.values())
    fit_weight = 0.2 if prefer_time and form.kind in ("date", "year", "month") else 0.05
    supports = []
    for rank, (unit, view) in enumerate(zip(context, views)):
        date_weight = weights[_DATE_TERM] if dated[rank] else 0.0
        memory_cover = (sum(w for t, w in weights.items() if t in view.stems) + date_weight) / total if total else 0.0
        best: tuple[float, float, Sentence, bool] | None = None
        for sentence in view.sentences:
            about = _about(view, sentence, persons)
            if total:
                cover = (sum(w for t, w in weights.items() if t in sentence.stems) + date_weight) / total
                coverage = 0.75 * cover + 0.25 * memory_cover
            else:
                coverage = float(about)
            if sentence.text.rstrip().endswith("?"):
                coverage *= 0.5
            score = coverage + fit_weight * _form_fit(form.kind, sentence, view) + (0.1 if persons and about else 0.0)
            if best is None or (about, score) > (best[3], best[0]):
                best = (score, coverage, sentence, about)
        assert best is not None
        score = best[0] + rank_weight * (1.0 - rank / max(n_docs, 1))
        supports.append(Support(rank, unit, view, best[2], best[1], best[3], score))
    supports.sort(key=lambda s: -s.score)
    return form, persons, supports


def _is_person_somewhere(name: str, context: Sequence[MemoryUnit], views: list[MemoryView]) -> bool:
    """A capitalised question word counts as a person when some memory has it as speaker or
    annotated person, or when no memory annotates it as a location/entity (unannotated text)."""
    lower = name.lower()
    for unit, view in zip(context, views):
        if (view.speaker and lower in view.speaker.lower().split()) or any(lower == p.lower() for p in unit.persons):
            return True
    return not any(lower in (x.lower() for x in unit.locations + unit.entities) for unit in context)


# ---------------------------------------------------------------------------------------------
# Shaping the answer
# ---------------------------------------------------------------------------------------------
def _clauses(tokens: Sequence[tuple[str, str]]) -> list[list[int]]:
    """Token indexes of the sentence's clauses (split at punctuation)."""
    clauses: list[list[int]] = [[]]
    for i, (surface, _) in enumerate(tokens):
        if surface[0].isalnum() and surface.lower() not in CLAUSE_WORDS:
            clauses[-1].append(i)
        elif clauses[-1]:
            clauses.append([])
    return [c for c in clauses if c]


def _answer_words(tokens: Sequence[tuple[str, str]], clause: list[int], skip: frozenset[str]) -> list[int]:
    """Words of a clause that could answer: not the question's words, not stopwords, fillers
    or relative-time words; a glue word ("and", "of") is kept between two kept words."""
    keep = [i for i in clause if tokens[i][1] not in skip and tokens[i][0].lower() not in STOPWORDS
            and tokens[i][0].lower() not in FILLERS and tokens[i][0].lower() not in TIME_WORDS
            and tokens[i][0].lower() not in WEEKDAYS and tokens[i][0].lower() not in MONTHS]
    kept = set(keep)
    glue = [i for i in clause if tokens[i][0].lower() in GLUE and i - 1 in kept and i + 1 in kept]
    return sorted(kept | set(glue))


def _named(token: str, index: int, proper: frozenset[str]) -> bool:
    """A name, number or title: the kind of word a short answer usually is."""
    return token[0].isdigit() or (token[:1].isupper() and (index > 0 or token.lower() in proper))


def compress(sentence: Sentence, skip: frozenset[str], max_words: int, proper: frozenset[str] = frozenset()) -> str:
    """The sentence cut down to the words that answer.

    Each clause that has words other than the question's (and stopwords, fillers) is scored by
    how many question words it holds, whether it names something (a name, number or title)
    and whether it follows a clause with question words; the best one's remaining words are
    kept in order, at most `max_words` of them, the window nearest the question's words."""
    tokens = sentence.tokens
    if sentence.caption:
        skip = skip | CAPTION_WORDS
    clauses = _clauses(tokens)
    matched = [sum(tokens[i][1] in skip for i in c) for c in clauses]
    best: tuple[float, list[int], int] | None = None
    for k, clause in enumerate(clauses):
        words = _answer_words(tokens, clause, skip)
        if not words:
            continue
        named = any(_named(tokens[i][0], i, proper) for i in words)
        score = matched[k] + 0.75 * named + (0.25 if k and matched[k - 1] else 0.0)
        if best is None or score > best[0]:
            best = (score, words, k)
    if best is None:
        return ""
    _, words, k = best
    if len(words) > max_words:
        hits = [i for i in clauses[k] if tokens[i][1] in skip]

        def closeness(a: int) -> float:
            window = words[a:a + max_words]
            distance = sum(min(abs(i - h) for h in hits) for i in window) if hits else a
            return distance - 2.0 * sum(_named(tokens[i][0], i, proper) for i in window)

        start = min(range(len(words) - max_words + 1), key=closeness)
        words = words[start:start + max_words]
        while words and tokens[words[-1]][0].lower() in GLUE:
            words.pop()
    # A capital that only marks the start of the sentence is not part of the answer.
    return " ".join(tokens[i][0].lower() if i == 0 and tokens[i][0].lower() not in proper else tokens[i][0]
                    for i in words)


def relative_date(text: str, day: date | None) -> str:
    """The absolute date of the first relative time in `text` ("yesterday", "last month") said
    on `day`, resolved the way the offline extractor writes its notes; "" when there is none."""
    if day is None:
        return ""
    from evolvemem.memory.offline_extract import resolve_relative_dates

    notes = resolve_relative_dates(text, datetime(day.year, day.month, day.day))
    return notes[0].split(" = ", 1)[1] if notes else ""


def _date_answer(support: Support, kind: str) -> str:
    """The date of the event in the supporting sentence: a resolved note the extractor left,
    an explicit date, a relative expression anchored to the memory's date, else that date."""
    text = support.sentence.text
    lowered = text.lower()
    value = next((v for expr, v in support.view.notes if expr.lower() in lowered), "")
    if not value:
        mentions = find_dates(text)
        if mentions:
            value = mentions[0].canonical
            if mentions[0].year is None and support.view.date_text:
                value = f"{value} {support.view.date_text.split()[-1]}"
    value = value or relative_date(text, support.view.day) or support.view.date_text
    if kind == "year":
        years = re.findall(r"\b(?:19|20)\d{2}\b", value)
        return years[-1] if years else value
    if kind == "month":
        mentions = find_dates(value)
        if mentions and mentions[-1].month:
            return " ".join(p for p in (MONTHS[mentions[-1].month - 1].capitalize(), str(mentions[-1].year or "")) if p)
    return value


def count_answer(support: Support, form: QuestionForm) -> str:
    tokens = support.sentence.tokens
    numbers = [i for i, (w, _) in enumerate(tokens) if w.isdigit() or w.lower() in NUMBER_WORDS]
    if not numbers:
        return ""
    target = [i for i, (_, s) in enumerate(tokens) if s == form.target]
    best = min(numbers, key=lambda i: min((abs(i - t) for t in target), default=0))
    return tokens[best][0]


def _who_answer(support: Support, form: QuestionForm) -> str:
    """A person the sentence names (not one the question names, not a place), else a relation
    word ("sister"), else the speaker when they speak of themselves."""
    excluded = {n.lower() for n in form.names} | {loc.lower() for loc in support.view.locations}
    tokens = support.sentence.tokens
    names = [w for i, (w, _) in enumerate(tokens)
             if w[:1].isupper() and w.lower() not in STOPWORDS and w.lower() not in excluded
             and (i > 0 or w.lower() in support.view.proper) and w.lower() not in MONTHS and w.lower() not in WEEKDAYS]
    names = [re.sub(r"['’]s$", "", n) for n in names]
    if names:
        return " ".join(dict.fromkeys(names))
    relations = [w for w, _ in tokens if w.lower() in RELATIONS]
    if relations:
        return relations[0].lower()
    speaker = support.view.speaker
    first_person = any(w.lower() in ("i", "i'm", "i've", "my", "me", "we", "our") for w, _ in tokens)
    if speaker and first_person and speaker.lower() not in excluded:
        return speaker
    return ""


_NAMED = re.compile(r"\b(?:named|called|name is|name's|names are)\s+((?:[\"'“]?[A-Z][\w'-]*[\"'”]?)(?:\s+(?:and\s+)?[A-Z][\w'-]*)*)")


def _name_answer(support: Support, skip: frozenset[str]) -> str:
    """What something is called: the capitalised words after "named"/"called", else the
    first name-like word the question does not already hold."""
    found = _NAMED.search(support.sentence.text)
    if found:
        return found.group(1).strip("\"'“”")
    tokens = support.sentence.tokens
    names = [w for i, (w, s) in enumerate(tokens)
             if i > 0 and w[:1].isupper() and s not in skip and w.lower() not in STOPWORDS
             and w.lower() not in MONTHS and w.lower() not in WEEKDAYS]
    return names[0] if names else ""


def _name_answer(support: Support, skip: frozenset[str]) -> str:
    """What something is called: the capitalised words after "named"/"called", else the
    first name-like word the question does not already hold."""
    found = _NAMED.search(support.sentence.text)
    if found:
        return found.group(1).strip("\"'“”")
    tokens = support.sentence.tokens
    names = [w for i, (w, s) in enumerate(tokens)
             if i > 0 and w[:1].isupper() and s not in skip and w.lower() not in STOPWORDS
             and w.lower() not in MONTHS and w.lower() not in WEEKDAYS]
    return names[0] if names else ""


_PLACE = re.compile(r"\b(?:in|at|to|from|near|visited|around|into)\s+((?:the\s+)?[A-Z][\w'-]*(?:\s+(?:of\s+)?[A-Z][\w'-]*)*)")
_COMMON_PLACE = re.compile(r"\b(?:in|at|to|near|into)\s+((?:the|a|an|my|our|his|her|their)\s+[a-z][\w'-]*(?:\s+[a-z][\w'-]*)?)")


def _where_answer(support: Support, form: QuestionForm) -> str:
    text = support.sentence.text
    for location in support.view.locations:
        found = re.search(rf"\b{re.escape(location)}\b", text, re.I)
        if found and stem(location.lower()) not in form.terms:
            return found.group(0)
    for pattern in (_PLACE, _COMMON_PLACE):
        for match in pattern.finditer(text):
            words = match.group(1).split()
            while words and (words[-1].lower() in STOPWORDS or words[-1].lower() in FILLERS):
                words.pop()
            if words and stem(words[-1].lower().strip("'")) not in form.terms:
                return " ".join(words)
    return ""


def _why_answer(support: Support, skip: frozenset[str]) -> str:
    text = support.sentence.text
    match = re.search(r"\b(because|since|so that|in order to|as a way to|to help)\b(.*)", text, re.I)
    if match:
        clause = _sentence(match.group(2).strip(" ,.!"))
        return " ".join(w for w, _ in clause.tokens[:_PHRASE_WORDS + 4] if w[0].isalnum())
    return compress(support.sentence, skip, _PHRASE_WORDS, support.view.proper)


def _yesno_answer(support: Support) -> str:
    negated = any(w.lower() in NEGATIONS or w.lower().endswith("n't") for w, _ in support.sentence.tokens)
    return "No" if negated else "Yes"


def _compress_nearby(support: Support, skip: frozenset[str], max_words: int) -> str:
    """Compress the supporting sentence; when it holds nothing but the question's own words,
    try the memory's other sentences, nearest first; the sentence itself as a last resort."""
    sentences = support.view.sentences
    here = sentences.index(support.sentence) if support.sentence in sentences else 0
    for sentence in sorted(sentences, key=lambda s: abs(sentences.index(s) - here)):
        answer = compress(sentence, skip, max_words, support.view.proper)
        if answer:
            return answer
    return support.sentence.text


def well_formed(answer: str, kind: str) -> bool:
    """Whether an answer has the shape its question asks for: a date for "when", a number for
    "how many", a name or relation for "who", a place for "where" (other forms: any)."""
    words = [w for w, _ in word_tokens(answer) if w[0].isalnum()]
    if kind in ("date", "year", "month"):
        return bool(find_dates(answer))
    if kind == "count":
        return any(w.isdigit() or w.lower() in NUMBER_WORDS for w in words)
    name_like = 0 < len(words) <= 4 and all(w[:1].isupper() for w in words) and not re.search(r"[.!?]", answer)
    if kind == "who":
        return name_like or any(w.lower() in RELATIONS for w in words)
    if kind == "where":
        return name_like or (len(words) <= 5 and answer.lower().startswith(("the ", "a ", "an ", "my ", "our ", "his ", "her ", "their ")))
    return bool(words)


def shape_answer(form: QuestionForm, persons: tuple[str, ...], support: Support, style: str) -> str:
    """The answer one supporting memory gives, shaped by question form and style."""
    asked = {p.lower() for p in persons}
    full_names = [full.lower().split() for full in support.unit.persons]
    skip = frozenset(form.terms) | {stem(n.lower()) for n in form.names + persons}
    skip |= {stem(part) for parts in full_names if asked & set(parts) for part in parts}  # "Raman" of "Priya Raman"
    max_words = _CONCISE_WORDS if style in ("concise", "cautious", "step_by_step") else _PHRASE_WORDS
    if form.kind in ("date", "year", "month"):
        answer = _date_answer(support, form.kind)
    elif form.kind == "count":
        answer = count_answer(support, form)
    elif form.kind in ("duration", "frequency"):
        match = (DURATION if form.kind == "duration" else FREQUENCY).search(support.sentence.text)
        answer = re.sub(r"^for\s+", "", match.group(0).strip(), flags=re.I) if match else ""
    elif form.kind == "yesno":
        answer = _yesno_answer(support)
    elif form.kind == "who":
        answer = _who_answer(support, form)
    elif form.kind == "name":
        answer = _name_answer(support, skip)
    elif form.kind == "where":
        answer = _where_answer(support, form)
    elif form.kind == "why":
        answer = _why_answer(support, skip)
    else:
        answer = ""
    if not answer:
        answer = _compress_nearby(support, skip, max_words)
    if style == "temporal" and form.kind not in ("date", "year", "month") and support.view.date_text:
        answer = f"{answer} ({support.view.date_text})"
    elif style == "detailed":
        clause = support.sentence.text.strip()
        if clause.lower() != answer.lower():
            answer = f"{answer} — {clause}"
    return answer


# ---------------------------------------------------------------------------------------------
# The role
# ---------------------------------------------------------------------------------------------
class OfflineAnswerer:
    """Extractive reader implementing the `Answerer` protocol (no model, well under 1 ms)."""

    name = "offline"

    def __init__(self, threshold: float = 0.3, cautious_threshold: float = 0.5, yesno_threshold: float = 0.45) -> None:
        self.threshold = threshold
        self.cautious_threshold = cautious_threshold
        self.yesno_threshold = yesno_threshold

    def threshold_for(self, style: str, form: QuestionForm) -> float:
        base = self.cautious_threshold if style == "cautious" else self.threshold
        return max(base, self.yesno_threshold) if form.kind == "yesno" else base

    def answer(self, question: Question, context: Sequence[MemoryUnit], style: str) -> AnswerResult:
        if style not in STYLES:
            raise ValueError(f"unknown answer style {style!r} (known: {', '.join(STYLES)})")
        form, persons, supports = rank_support(question.text, context, prefer_time=style == "temporal")
        return self.answer_from(form, persons, supports, style)

    def answer_from(self, form: QuestionForm, persons: tuple[str, ...], supports: Sequence[Support], style: str) -> AnswerResult:
        """Shape an answer from already-scored supports (the verifier reuses this)."""
        threshold = self.threshold_for(style, form)
        eligible = [s for s in supports if s.person_ok]
        if not eligible or eligible[0].coverage < threshold:
            reason = "person mismatch" if supports and not eligible else "weak support"
            best = eligible[0].coverage if eligible else (supports[0].coverage if supports else 0.0)
            return AnswerResult(ABSTENTION, notes={"abstained": reason, "support": round(best, 3), "form": form.kind})
        top = eligible[0]
        notes = {"support": round(top.coverage, 3), "form": form.kind, "memory_id": top.unit.memory_id}
        if style == "extractive":
            text = top.sentence.text.strip()
            if form.kind in ("date", "year", "month"):
                text = f"{_date_answer(top, form.kind)}: {text}"
            return AnswerResult(text, notes=notes)
        if style == "step_by_step":
            return AnswerResult(self._combine(form, persons, eligible, threshold), notes=notes)
        text = shape_answer(form, persons, top, style)
        if form.kind == "count" and not count_answer(top, form):
            text = str(sum(1 for s in eligible if s.coverage >= threshold))
        return AnswerResult(text, notes=notes)

    def _combine(self, form: QuestionForm, persons: tuple[str, ...], eligible: Sequence[Support], threshold: float) -> str:
        """step_by_step: join the answers of the top 2-3 supporting memories (multi-hop, lists)."""
        floor = max(threshold, 0.6 * eligible[0].coverage)
        strong = [s for s in eligible[:3] if s.coverage >= floor]
        if form.kind == "count":
            counted = count_answer(strong[0], form)
            return counted or str(sum(1 for s in eligible if s.coverage >= floor))
        if form.kind in ("yesno", "date", "year", "month", "duration", "frequency"):
            return shape_answer(form, persons, strong[0], "step_by_step")
        parts: list[str] = []
        for support in strong:
            part = shape_answer(form, persons, support, "step_by_step")
            if parts and not well_formed(part, form.kind):
                continue  # a second memory adds to a list only with the asked-for kind of answer
            if part and part.lower() not in (p.lower() for p in parts):
                parts.append(part)
        return ", ".join(parts)
