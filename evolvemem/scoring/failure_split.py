"""The reader failure split: was the gold evidence in the context, was the answer right, and if the
whole evidence was there and the answer is wrong, what kind of wrong.

It separates what retrieval lost from what the reader lost: a question whose evidence was fully
in context and still answered wrong is the reader's. The class of such an answer comes from rules
that read the gold only as scoring already does (its tokens, its dates, its capitalised names),
checked in this order: abstained → date_form → wrong_date → too_long → incomplete → entity → other. Pure functions of a
record's own fields; the answer path calls `reader_split` once per question a model answered."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from evolvemem.contracts.records import RIGHT_F1
from evolvemem.contracts.vocab import EvidenceInContext, ReaderFailure
from evolvemem.data.dates import TIME_NAMES
from evolvemem.memory.offline_extract import resolve_relative_dates
from evolvemem.data.date_mentions import DateMention, find_dates
from evolvemem.scoring.metrics import answer_tokens

# An answer is too long when it has at least this many times the gold's tokens ...
LONG_FACTOR = 3
# ... and holds at least this share of the gold's tokens (as token F1 counts them).
GOLD_INSIDE = 0.6
# An answer is incomplete when at least this share of its tokens are the gold's ...
PART_OF_GOLD = 0.6
# ... and it holds less than this share of the gold's tokens (a list answered with one item).
GOLD_COVERED = 0.5
# Any day serves to ask the relative-date rules whether a text holds a relative date: only
# whether they find one is read, never the day they resolve it to.
_ANY_DAY = datetime(2000, 1, 1)
_CAPITALISED = re.compile(r"\b[A-Z][a-zA-Z'-]+")
# capitalised words that name nobody: sentence openers and pronouns
_NOT_NAMES = frozenset(
    "a an the i it he she they we you his her their our my your its this that these those there "
    "yes no not on in at of for to by with from and but or so if when after before during "
    "about around maybe probably".split()
)


@dataclass(frozen=True)
class ReaderSplit:
    """One answered question's place in the split (None where a part does not apply)."""

    evidence: EvidenceInContext | None  # None: the question has no gold evidence ids
    right: bool
    failure: ReaderFailure | None  # only for full evidence and a wrong answer


def evidence_in_context(evidence_recall: float | None) -> EvidenceInContext | None:
    """Full (recall 1), partial (between 0 and 1) or none (0); None without gold evidence."""
    if evidence_recall is None:
        return None
    if evidence_recall >= 1.0:
        return EvidenceInContext.FULL
    return EvidenceInContext.PARTIAL if evidence_recall > 0.0 else EvidenceInContext.NONE


def answer_right(f1: float | None, judge: float | None) -> bool:
    """The judge's verdict where one exists, else token F1 at or above RIGHT_F1."""
    if judge is not None:
        return judge >= 1.0
    return f1 is not None and f1 >= RIGHT_F1


def reader_split(
    *,
    evidence_recall: float | None,
    f1: float | None,
    judge: float | None,
    abstained: bool,
    prediction: str,
    gold: str,
) -> ReaderSplit:
    """Where one answered question falls, and for full evidence with a wrong answer, why."""
    evidence = evidence_in_context(evidence_recall)
    right = answer_right(f1, judge)
    failure = None
    if evidence is EvidenceInContext.FULL and not right:
        failure = failure_class(prediction, gold, abstained)
    return ReaderSplit(evidence, right, failure)


def failure_class(prediction: str, gold: str, abstained: bool) -> ReaderFailure:
    """The first rule that holds, in the module's order."""
    if abstained:
        return ReaderFailure.ABSTAINED
    if date_form(prediction, gold):
        return ReaderFailure.DATE_FORM
    if find_dates(gold) and find_dates(prediction):
        return ReaderFailure.WRONG_DATE  # both name a date and none agrees (else date_form held)
    if too_long(prediction, gold):
        return ReaderFailure.TOO_LONG
    if incomplete(prediction, gold):
        return ReaderFailure.INCOMPLETE
    if other_entity(prediction, gold):
        return ReaderFailure.ENTITY
    return ReaderFailure.OTHER


def too_long(prediction: str, gold: str) -> bool:
    """The answer has LONG_FACTOR times the gold's tokens and holds GOLD_INSIDE of them."""
    predicted, expected = answer_tokens(prediction), answer_tokens(gold)
    if not expected or len(predicted) < LONG_FACTOR * len(expected):
        return False
    inside = sum((Counter(predicted) & Counter(expected)).values())
    return inside / len(expected) >= GOLD_INSIDE


def incomplete(prediction: str, gold: str) -> bool:
    """PART_OF_GOLD of the answer's tokens are the gold's, and it covers less than GOLD_COVERED of
    the gold: one item of a list, or a bare "yes" to a gold that says why."""
    predicted, expected = answer_tokens(prediction), answer_tokens(gold)
    if not predicted or not expected:
        return False
    inside = sum((Counter(predicted) & Counter(expected)).values())
    return inside / len(predicted) >= PART_OF_GOLD and inside / len(expected) < GOLD_COVERED


def date_form(prediction: str, gold: str) -> bool:
    """The gold names a date and the answer gives one relatively ("last week") or names the
    same date in another form (no part the two both name differs: "May 7" for "7 May 2023").
    An answer naming another date is a wrong date, not a form."""
    gold_dates = find_dates(gold)
    if not gold_dates:
        return False
    if resolve_relative_dates(prediction, _ANY_DAY):
        return True
    said = find_dates(prediction)
    return bool(said) and all(any(_agree(s, g) for g in gold_dates) for s in said)


def _agree(a: DateMention, b: DateMention) -> bool:
    """No part both dates name differs."""
    return all(x is None or y is None or x == y for x, y in ((a.day, b.day), (a.month, b.month), (a.year, b.year)))


def names(text: str) -> set[str]:
    """Capitalised words of `text` that may name a person, place or thing (lowercased; not
    months, weekdays, pronouns or sentence openers)."""
    found = {w.lower().removesuffix("'s") for w in _CAPITALISED.findall(text)}
    return found - _NOT_NAMES - TIME_NAMES


def other_entity(prediction: str, gold: str) -> bool:
    """The gold names someone or something and the answer names another."""
    expected = names(gold)
    return bool(expected) and bool(names(prediction) - expected)
