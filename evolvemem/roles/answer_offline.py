"""`OfflineAnswerer`: an extractive reader that needs no model.

It makes offline runs give meaningful, config-sensitive scores: the answer depends on which
memories retrieval put in the context, in what order, and on the answer style. The memories
are scored by `reader_support.rank_support`; this module shapes the best-supported sentence by
the question's form: a date for "when", a number for "how many", Yes/No, a name for "who", a
place for "where", else the sentence compressed to the words that answer. It abstains when
support is weak or when the supporting memory is about somebody else.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Sequence

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.roles import NO_PROMPT_LEVERS, AnswerResult, PromptLevers
from evolvemem.data.models import Question
from evolvemem.data.date_mentions import find_dates
from evolvemem.roles.context_format import ABSTENTION, MONTHS
from evolvemem.roles.reader_lexicon import (
    CAPTION_WORDS,
    CLAUSE_WORDS,
    DURATION,
    FILLERS,
    FREQUENCY,
    GLUE,
    NEGATIONS,
    NUMBER_WORDS,
    RELATIONS,
    STOPWORDS,
    TIME_WORDS,
    WEEKDAYS,
    stem,
    word_tokens,
)
from evolvemem.roles.reader_support import (
    QuestionForm,
    Sentence,
    Support,
    analyse_question,
    rank_support,
    sentence_of,
)
from evolvemem.space.action_space import files_space

__all__ = [
    "STYLES",
    "OfflineAnswerer",
    "analyse_question",
    "compress",
    "count_answer",
    "rank_support",
    "relative_date",
    "shape_answer",
    "well_formed",
]

STYLES: tuple[str, ...] = files_space().enum("answer_style").choices
_CONCISE_WORDS = 4
_PHRASE_WORDS = 8


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
    keep = [
        i
        for i in clause
        if tokens[i][1] not in skip
        and tokens[i][0].lower() not in STOPWORDS
        and tokens[i][0].lower() not in FILLERS
        and tokens[i][0].lower() not in TIME_WORDS
        and tokens[i][0].lower() not in WEEKDAYS
        and tokens[i][0].lower() not in MONTHS
    ]
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
            window = words[a : a + max_words]
            distance = sum(min(abs(i - h) for h in hits) for i in window) if hits else a
            return distance - 2.0 * sum(_named(tokens[i][0], i, proper) for i in window)

        start = min(range(len(words) - max_words + 1), key=closeness)
        words = words[start : start + max_words]
        while words and tokens[words[-1]][0].lower() in GLUE:
            words.pop()
    # A capital that only marks the start of the sentence is not part of the answer.
    return " ".join(
        tokens[i][0].lower() if i == 0 and tokens[i][0].lower() not in proper else tokens[i][0] for i in words
    )


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
    names = [
        w
        for i, (w, _) in enumerate(tokens)
        if w[:1].isupper()
        and w.lower() not in STOPWORDS
        and w.lower() not in excluded
        and (i > 0 or w.lower() in support.view.proper)
        and w.lower() not in MONTHS
        and w.lower() not in WEEKDAYS
    ]
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


_NAMED = re.compile(
    r"\b(?:named|called|name is|name's|names are)\s+((?:[\"'“]?[A-Z][\w'-]*[\"'”]?)(?:\s+(?:and\s+)?[A-Z][\w'-]*)*)"
)


def _name_answer(support: Support, skip: frozenset[str]) -> str:
    """What something is called: the capitalised words after "named"/"called", else the
    first name-like word the question does not already hold."""
    found = _NAMED.search(support.sentence.text)
    if found:
        return found.group(1).strip("\"'“”")
    tokens = support.sentence.tokens
    names = [
        w
        for i, (w, s) in enumerate(tokens)
        if i > 0
        and w[:1].isupper()
        and s not in skip
        and w.lower() not in STOPWORDS
        and w.lower() not in MONTHS
        and w.lower() not in WEEKDAYS
    ]
    return names[0] if names else ""


_PLACE = re.compile(
    r"\b(?:in|at|to|from|near|visited|around|into)\s+((?:the\s+)?[A-Z][\w'-]*(?:\s+(?:of\s+)?[A-Z][\w'-]*)*)"
)
_COMMON_PLACE = re.compile(
    r"\b(?:in|at|to|near|into)\s+((?:the|a|an|my|our|his|her|their)\s+[a-z][\w'-]*(?:\s+[a-z][\w'-]*)?)"
)


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
        clause = sentence_of(match.group(2).strip(" ,.!"))
        return " ".join(w for w, _ in clause.tokens[: _PHRASE_WORDS + 4] if w[0].isalnum())
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
        return name_like or (
            len(words) <= 5
            and answer.lower().startswith(("the ", "a ", "an ", "my ", "our ", "his ", "her ", "their "))
        )
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

    def answer(
        self,
        question: Question,
        context: Sequence[MemoryUnit],
        style: str,
        layout: str = "list",
        levers: PromptLevers = NO_PROMPT_LEVERS,
    ) -> AnswerResult:
        """The extractive answer (`layout` and the prompt `levers` speak to a model: ignored)."""
        if style not in STYLES:
            raise ValueError(f"unknown answer style {style!r} (known: {', '.join(STYLES)})")
        form, persons, supports = rank_support(question.text, context, prefer_time=style == "temporal")
        return self.answer_from(form, persons, supports, style)

    def answer_from(
        self, form: QuestionForm, persons: tuple[str, ...], supports: Sequence[Support], style: str
    ) -> AnswerResult:
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

    def _combine(
        self, form: QuestionForm, persons: tuple[str, ...], eligible: Sequence[Support], threshold: float
    ) -> str:
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
