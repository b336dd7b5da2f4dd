"""Scoring: every rule of the LoCoMo reference F1, the other metrics, and the summaries.

Examples are invented; expected values are worked by hand in the comments."""

from __future__ import annotations

import json
import math
import time

import pytest

from typing import Any

from evolvemem.contracts.records import QuestionRecord
from evolvemem.data.locomo import CATEGORY_TO_TYPE
from evolvemem.data.models import Question
from evolvemem.errors import ConfigError, DataError
from evolvemem.contracts.roles import ABSTENTION_TEXT
from evolvemem.benchmarks import score_prediction
from evolvemem.scoring import summarise
from evolvemem.scoring.locomo import locomo_f1, multi_hop_f1
from evolvemem.scoring.metrics import (
    answer_tokens,
    bleu1,
    choice_index,
    evidence_recall,
    exact_match,
    is_abstention,
    mc_accuracy,
    normalize_answer,
    token_f1,
)


def q(category: str = "4", answers: tuple = ("Lisbon",), **kw) -> Question:
    defaults = dict(
        question_id="conv-x:q0", conversation_id="conv-x", text="Where did Priya move?", question_type="single_fact"
    )
    defaults.update(kw)
    return Question(category=category, answers=answers, **defaults)


# --- normalisation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Lisbon, Portugal", "lisbon portugal"),  # commas dropped
        ("PRIYA Raman", "priya raman"),  # lowercased
        ("Priya's re-use of (old) jars!", "priyas reuse of old jars"),  # punctuation stripped
        ("The cat and a dog ate an apple", "cat dog ate apple"),  # a/an/the/and removed
        ("Theatre band android", "theatre band android"),  # only whole words are removed
        ("an-apple", "anapple"),  # punctuation goes first, so no filler word is left to remove
        ("  Tomasz \t went\n home  ", "tomasz went home"),  # whitespace collapsed
        ("", ""),
    ],
)
def test_normalize_answer_steps(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


def test_porter_stemming_in_tokens() -> None:
    assert answer_tokens("running") == answer_tokens("runs") == ("run",)
    assert answer_tokens("She hiked; he hikes") == ("she", "hike", "he", "hike")
    assert token_f1("running", "runs") == 1.0
    assert answer_tokens(2022) == ("2022",)  # integers are str()-ed


def test_token_f1_worked_example() -> None:
    # pred [priya, went, hike, in, lisbon], gold [hike, in, lisbon]: P = 3/5, R = 1, F1 = 0.75
    assert token_f1("Priya went hiking in Lisbon", "hiking in Lisbon") == pytest.approx(0.75)
    # multiset overlap: pred has "lisbon" twice, gold once -> overlap 1, P = 1/2, R = 1
    assert token_f1("Lisbon Lisbon", "Lisbon") == pytest.approx(2 / 3)
    assert token_f1("Porto", "Lisbon") == 0.0
    assert token_f1("", "Lisbon") == 0.0
    assert token_f1("the", "a") == 0.0  # both normalise to nothing


# --- LoCoMo categories --------------------------------------------------------------------------


def test_multi_hop_partial_f1_worked_number() -> None:
    # gold parts: "glassblowing course" -> best vs "glassblowing" = 2/3; "hiking" -> best vs "hiking trips" = 2/3;
    # "fencing" -> 0. Mean = (2/3 + 2/3 + 0) / 3 = 4/9.
    assert multi_hop_f1("glassblowing, hiking trips", "glassblowing course, hiking, fencing") == pytest.approx(4 / 9)
    assert locomo_f1("glassblowing, hiking trips", "glassblowing course, hiking, fencing", "1") == pytest.approx(4 / 9)
    # plain F1 on the same text differs (4/7), so the category rule really is applied
    assert token_f1("glassblowing, hiking trips", "glassblowing course, hiking, fencing") == pytest.approx(4 / 7)
    # order of the listed items does not matter
    assert multi_hop_f1("fencing, hiking, glassblowing course", "glassblowing course, hiking, fencing") == 1.0


def test_category_3_gold_cut_at_first_semicolon() -> None:
    gold = "Probably yes; he talked about enjoying outdoor sports"
    assert locomo_f1("probably yes", gold, "3") == 1.0
    assert locomo_f1("probably yes", gold, "4") < 0.5  # other categories keep the whole gold
    scores = score_prediction(q("3", (gold,)), "Probably yes")
    assert scores["f1"] == scores["exact_match"] == scores["bleu1"] == 1.0


def test_categories_2_and_4_are_plain_f1() -> None:
    for category in ("2", "4"):
        assert locomo_f1("Priya went hiking in Lisbon", "hiking in Lisbon", category) == pytest.approx(0.75)
    # a comma in a single-hop gold is not a list separator: commas are simply dropped
    assert locomo_f1("Porto", "Lisbon, Porto", "4") == pytest.approx(2 / 3)
    assert locomo_f1("Porto", "Lisbon, Porto", "1") == pytest.approx(0.5)


@pytest.mark.parametrize(
    "prediction, expected",
    [
        (ABSTENTION_TEXT, 1.0),
        ("That is NOT MENTIONED anywhere.", 1.0),
        ("No information available.", 1.0),
        ("I don't know", 0.0),  # not an official phrase
        ("a ceramics workshop", 0.0),
        ("", 0.0),
    ],
)
def test_adversarial_official_protocol(prediction: str, expected: float) -> None:
    question = q("5", (), adversarial_answer="a ceramics workshop", question_type="adversarial")
    assert locomo_f1(prediction, None, "5") == expected
    assert score_prediction(question, prediction) == {"f1": expected, "bleu1": expected, "exact_match": expected}


def test_adversarial_paper_protocol_scores_against_adversarial_answer() -> None:
    question = q("5", (), adversarial_answer="a ceramics workshop", question_type="adversarial")
    assert score_prediction(question, "ceramics workshop", protocol="paper")["f1"] == 1.0
    assert score_prediction(question, ABSTENTION_TEXT, protocol="paper")["f1"] == 0.0
    # pred [ceram, class], gold [ceram, workshop]: P = R = 1/2
    assert score_prediction(question, "ceramics class", protocol="paper")["f1"] == pytest.approx(0.5)
    assert locomo_f1("ceramics workshop", None, "5", adversarial_answer="a ceramics workshop", protocol="paper") == 1.0
    with pytest.raises(DataError, match="conv-x:q0.*adversarial_answer"):
        score_prediction(q("5", ()), "x", protocol="paper")
    # the paper protocol changes nothing outside category 5
    assert score_prediction(q("4"), "Lisbon", protocol="paper")["f1"] == 1.0


def test_integer_gold_is_stringified() -> None:
    assert score_prediction(q("2", (2022,)), "In 2022")["f1"] == pytest.approx(2 / 3)
    assert score_prediction(q("2", (2022,)), "2022")["exact_match"] == 1.0


def test_bad_inputs_raise_one_line_errors() -> None:
    with pytest.raises(ConfigError, match="unknown scoring protocol 'lenient'"):
        score_prediction(q(), "Lisbon", protocol="lenient")
    with pytest.raises(DataError, match="conv-x:q0.*category '7'"):
        score_prediction(q("7"), "Lisbon")
    with pytest.raises(DataError, match="conv-x:q0.*no gold answer"):
        score_prediction(q("4", ()), "Lisbon")


# --- other metrics ------------------------------------------------------------------------------


def test_bleu1_with_brevity_penalty() -> None:
    # pred [hike, in, lisbon] (c=3) vs ref of 5 tokens: precision 1, BP = exp(1 - 5/3)
    assert bleu1("hiking in Lisbon", "went hiking in Lisbon yesterday") == pytest.approx(math.exp(-2 / 3))
    # longer prediction: no penalty, precision 3/5
    assert bleu1("Priya went hiking in Lisbon", "hiking in Lisbon") == pytest.approx(0.6)
    # clipping: "lisbon" counted at most once
    assert bleu1("Lisbon Lisbon Lisbon", "Lisbon") == pytest.approx(1 / 3)
    assert bleu1("", "Lisbon") == 0.0
    # several references: the best single-reference score
    assert bleu1("Porto", ["Lisbon", "Porto"]) == 1.0


def test_exact_match() -> None:
    assert exact_match("The Lisbon!", "lisbon") == 1.0
    assert exact_match("Lisbons", "Lisbon") == 0.0  # no stemming in EM
    assert exact_match("Porto", ["Lisbon", "porto"]) == 1.0
    assert exact_match("Lisbon Portugal", "Lisbon") == 0.0


CHOICES = ("Lisbon", "Porto", "Madrid", "Seville")


@pytest.mark.parametrize(
    "prediction, index",
    [
        ("B", 1),
        ("(B)", 1),
        ("b", 1),
        ("B. Porto", 1),
        ("B) Porto", 1),
        ("The answer is B", 1),
        ("Answer: (c)", 2),
        ("Porto", 1),
        ("porto.", 1),
        ("She moved to Porto", 1),
        ("A", 0),
        ("D", 3),
        ("E", None),  # no fifth choice
        ("Lisbon or Porto", None),  # names two choices
        ("the answer is a dog", None),  # lowercase "a" is an article here, not a letter
        ("A city by the sea", None),
    ],
)
def test_choice_index_letters_and_text(prediction: str, index: int | None) -> None:
    assert choice_index(prediction, CHOICES) == index


def test_mc_accuracy_letter_or_text_gold() -> None:
    assert mc_accuracy("B", CHOICES, "B") == 1.0
    assert mc_accuracy("Porto", CHOICES, "B") == 1.0
    assert mc_accuracy("Porto", CHOICES, "Porto") == 1.0
    assert mc_accuracy("A", CHOICES, "B") == 0.0
    with pytest.raises(DataError, match="'Faro'"):
        mc_accuracy("A", CHOICES, "Faro")
    question = q("porto", ("Porto",), choices=CHOICES, correct_choice="B")
    scores = score_prediction(question, "(B)", benchmark_name="membench")
    assert scores["mc_accuracy"] == 1.0 and scores["f1"] == 0.0
    assert "mc_accuracy" not in score_prediction(q(), "Lisbon")


def test_evidence_recall() -> None:
    gold = ("D1:3", "D2:5")
    assert evidence_recall(gold, [("D1:3", "D1:4"), ("D7:1",)]) == 0.5
    assert evidence_recall(gold, [("D2:5",), ("D1:3",)]) == 1.0
    assert evidence_recall(gold, ["D1:3", " D2:5"]) == 1.0  # one id per memory, as plain strings
    assert evidence_recall(gold, []) == 0.0
    assert evidence_recall((), [("D1:3",)]) is None  # no gold evidence: not measured


def test_is_abstention_strict_and_lenient() -> None:
    assert is_abstention(ABSTENTION_TEXT)
    assert is_abstention("no information available about Tomasz")
    assert not is_abstention("I don't know")
    assert is_abstention("I don't know", lenient=True)
    assert is_abstention("It cannot be determined from the chat", lenient=True)
    assert not is_abstention("Lisbon", lenient=True)


def test_other_benchmarks_plain_f1_and_abstention() -> None:
    question = q("knowledge_update", ("Porto", "the city of Porto"), question_type="knowledge_update")
    # best over gold answers: "Porto" vs "Porto" = 1.0
    assert score_prediction(question, "Porto", benchmark_name="synth")["f1"] == 1.0
    # category "1" means nothing outside LoCoMo: no comma splitting
    multi = q("1", ("glassblowing course, hiking, fencing",), question_type="multi_hop")
    assert score_prediction(multi, "glassblowing, hiking trips", benchmark_name="custom")["f1"] == pytest.approx(4 / 7)
    unanswerable = q("adversarial", ("not mentioned",), question_type="adversarial")
    assert score_prediction(unanswerable, ABSTENTION_TEXT, benchmark_name="synth")["f1"] == 1.0
    assert score_prediction(unanswerable, "Porto", benchmark_name="synth")["f1"] == 0.0


# --- aggregation --------------------------------------------------------------------------------


def _row(category: str, question_type: str, **figures: Any) -> QuestionRecord:
    """A scored record of an invented question: only what a summary reads."""
    return QuestionRecord(0, "dev", "q", "c", category, question_type, "?", "", "", **figures)


def test_summarise_headlines_categories_and_failures() -> None:
    rows = [
        _row("1", "multi_hop", f1=0.5, bleu1=0.4, evidence_recall=1.0),
        _row("1", "multi_hop", f1=1.0, bleu1=0.8, evidence_recall=0.5),
        _row("4", "single_fact", f1=0.0, bleu1=0.0, evidence_recall=None),
        _row("5", "adversarial", f1=1.0, bleu1=1.0, evidence_recall=0.0),
        _row("4", "single_fact", f1=None, failed=True),
        _row("10", "temporal", f1=0.3, bleu1=0.3),
    ]
    summary = summarise(rows, category_names={"1": "multi-hop"})
    by_category = summary.by_category
    assert list(by_category) == ["1", "4", "5", "10"]  # numeric order
    assert by_category["1"].n == 2 and by_category["1"].f1 == pytest.approx(0.75)
    assert by_category["1"].evidence_recall == pytest.approx(0.75)
    assert by_category["1"].name == "multi-hop" and by_category["4"].name == ""
    four = by_category["4"]
    assert (four.n, four.n_failed, four.f1, four.evidence_recall, four.n_evidence) == (1, 1, 0.0, None, 0)
    # main: F1 (0.5 + 1.0 + 0.0 + 0.3) / 4 = 0.45; the failed row is excluded and counted
    assert summary.main_f1 == pytest.approx(0.45) and summary.n_main == 4
    main = summary.groups["main"]
    assert main.n_failed == 1 and main.bleu1 == pytest.approx(1.5 / 4)
    assert main.evidence_recall == pytest.approx(0.75) and main.n_evidence == 2
    assert summary.adversarial_f1 == 1.0 and summary.n_adversarial == 1
    # all: F1 2.8 / 5, BLEU-1 2.5 / 5, evidence recall (1 + 0.5 + 0) / 3
    assert summary.all_f1 == pytest.approx(2.8 / 5) and summary.n_questions == 5 and summary.n_failed == 1
    assert summary.bleu1 == pytest.approx(0.5) and summary.evidence_recall == pytest.approx(0.5)
    # macro over main categories: (0.75 + 0.0 + 0.3) / 3
    assert summary.main_macro_f1 == pytest.approx(0.35)
    assert summary.by_question_type["multi_hop"].bleu1 == pytest.approx(0.6)
    assert summary.exact_match is None  # no row measured it
    assert summary.adversarial_categories == ("5",)
    shown = summary.as_json()  # the `evolve eval --json` spelling
    assert (shown["main"], shown["all"], shown["n"]) == (summary.main_f1, summary.all_f1, 5)
    assert shown["by_category"]["1"] == {
        "n": 2,
        "n_failed": 0,
        "f1": pytest.approx(0.75),
        "bleu1": pytest.approx(0.6),
        "exact_match": None,
        "mc_accuracy": None,
        "evidence_recall": pytest.approx(0.75),
        "n_evidence": 2,
        "context_tokens": None,
        "name": "multi-hop",
    }
    assert json.loads(json.dumps(shown)) == shown  # JSON-ready as it is


def test_summarise_adversarial_by_question_type_and_empty() -> None:
    """The adversarial group is the questions typed adversarial, whatever a benchmark calls their category."""
    rows = [_row("temporal", "", f1=0.2), _row("abstention", "adversarial", f1=1.0)]
    summary = summarise(rows)
    assert summary.main_f1 == 0.2 and summary.adversarial_f1 == 1.0 and summary.all_f1 == pytest.approx(0.6)
    assert summary.adversarial_categories == ("abstention",)
    assert summary.by_question_type["unknown"].n == 1
    empty = summarise([])
    assert empty.n_questions == 0 and empty.all_f1 is None and empty.main_macro_f1 is None


# --- real data ----------------------------------------------------------------------------------


def _locomo_questions() -> list[Question]:
    from tests.conftest import require_dev_data

    questions = []
    for sample in json.loads(require_dev_data().read_text()):
        for i, item in enumerate(sample["qa"]):
            questions.append(
                Question(
                    question_id=f"{sample['sample_id']}:q{i}",
                    conversation_id=sample["sample_id"],
                    text=item["question"],
                    category=str(item["category"]),
                    question_type="",
                    answers=(item["answer"],) if "answer" in item else (),
                    evidence=tuple(item.get("evidence", ())),
                    adversarial_answer=item.get("adversarial_answer"),
                )
            )
    return questions


def test_real_locomo_gold_scores_itself_and_is_fast() -> None:
    questions = _locomo_questions()
    start = time.perf_counter()
    rows, below_one = [], []
    for question in questions:
        prediction = ABSTENTION_TEXT if question.category == "5" else question.answer
        scores = score_prediction(question, prediction)
        if scores["f1"] < 1.0:
            below_one.append(question)
        rows.append(
            _row(
                question.category,
                CATEGORY_TO_TYPE[question.category],
                **scores,
                evidence_recall=evidence_recall(question.evidence, [question.evidence]),
            )
        )
    elapsed = time.perf_counter() - start
    summary = summarise(rows)
    assert summary.n_questions == len(questions) == 1586
    assert summary.by_category["5"].n == 360 and summary.adversarial_f1 == 1.0
    assert summary.n_adversarial == 360 and summary.adversarial_categories == (
        "5",
    )  # category 5 is the adversarial type
    assert summary.by_category["1"].f1 == summary.by_category["4"].f1 == 1.0
    assert summary.evidence_recall == 1.0
    # only category-3 golds with a ';' rationale fall short when the whole gold is the prediction
    assert below_one and all(x.category == "3" and ";" in str(x.answer) for x in below_one)
    assert len(below_one) == sum(x.category == "3" and ";" in str(x.answer) for x in questions)
    for question in below_one:
        assert score_prediction(question, str(question.answer).split(";")[0])["f1"] == 1.0
    # paper protocol: the abstention text shares no token with the trap answers
    paper = [score_prediction(x, ABSTENTION_TEXT, "paper")["f1"] for x in questions if x.category == "5"]
    assert sum(paper) < 0.05 * len(paper)
    assert elapsed < 5.0
