"""The reader failure split's rules, each on a fixed invented case (scoring/failure_split.py)."""

from __future__ import annotations

import pytest

from evolvemem.contracts.records import RIGHT_F1
from evolvemem.contracts.vocab import EvidenceInContext, ReaderFailure
from evolvemem.scoring.failure_split import answer_right, evidence_in_context, failure_class, reader_split
from evolvemem.scoring.metrics import token_f1

# (prediction, gold, abstained, expected class): each a wrong answer with the whole evidence in context
CASES = [
    ("Not mentioned in the conversation", "a rented trailer in Penryn", True, ReaderFailure.ABSTAINED),
    ("She started it last week", "the week before 9 June 2023", False, ReaderFailure.DATE_FORM),
    ("on Feb 12", "12 February 2024", False, ReaderFailure.DATE_FORM),
    (
        "Dev told Maren the loaf came out dense and a little sour but he was proud of it anyway",
        "dense and a little sour",
        False,
        ReaderFailure.TOO_LONG,
    ),
    ("the bakery", "the bakery, the pier and the old chapel", False, ReaderFailure.INCOMPLETE),
    ("3 March 2021", "June 2019", False, ReaderFailure.WRONG_DATE),
    ("Bertha", "Clementine", False, ReaderFailure.ENTITY),
    ("a blue tarpaulin", "green", False, ReaderFailure.OTHER),
]


@pytest.mark.parametrize(("prediction", "gold", "abstained", "expected"), CASES)
def test_each_failure_class_on_a_fixed_case(prediction, gold, abstained, expected):
    assert token_f1(prediction, gold) < RIGHT_F1  # every case is a wrong answer by F1
    assert failure_class(prediction, gold, abstained) is expected
    split = reader_split(
        evidence_recall=1.0,
        f1=token_f1(prediction, gold),
        judge=None,
        abstained=abstained,
        prediction=prediction,
        gold=gold,
    )
    assert split == type(split)(EvidenceInContext.FULL, False, expected)


def test_a_wrong_date_is_no_date_form_and_a_date_free_gold_never_is():
    assert failure_class("14 February 2024", "12 February 2024", False) is ReaderFailure.WRONG_DATE
    assert failure_class("yesterday", "a sailboat", False) is not ReaderFailure.DATE_FORM


def test_a_short_answer_with_the_gold_is_not_too_long():
    assert failure_class("a little sour", "dense and a little sour", False) is ReaderFailure.OTHER


def test_names_ignore_months_pronouns_and_sentence_openers():
    assert failure_class("The boat went to Mylor", "Mylor", False) is not ReaderFailure.ENTITY
    assert failure_class("In March", "Flushing", False) is ReaderFailure.OTHER


def test_evidence_buckets_and_rightness():
    assert [evidence_in_context(r) for r in (1.0, 0.5, 0.0, None)] == [
        EvidenceInContext.FULL,
        EvidenceInContext.PARTIAL,
        EvidenceInContext.NONE,
        None,
    ]
    assert answer_right(RIGHT_F1, None) and not answer_right(RIGHT_F1 - 0.01, None)
    assert not answer_right(1.0, 0.0) and answer_right(0.0, 1.0)  # a judge's verdict wins over F1
    assert not answer_right(None, None)


def test_only_full_evidence_and_a_wrong_answer_get_a_class():
    partial = reader_split(evidence_recall=0.5, f1=0.0, judge=None, abstained=True, prediction="x", gold="y")
    right = reader_split(evidence_recall=1.0, f1=1.0, judge=None, abstained=False, prediction="y", gold="y")
    unscored = reader_split(evidence_recall=None, f1=0.0, judge=None, abstained=False, prediction="x", gold="y")
    assert partial.failure is None and right.failure is None and unscored.failure is None
    assert unscored.evidence is None and not unscored.right
