"""Scoring: turn (question, prediction) into metric values, and per-question values into summaries.

`score_prediction` is the one entry point the engine calls per question. LoCoMo questions follow
the reference evaluation category by category (`scoring.locomo`); every other benchmark gets
token F1 against its best-matching gold answer, and abstention scoring for adversarial questions.
The official protocol is the default; "paper" is opt-in and must be reported under its name.
"""
from __future__ import annotations

from evolvemem.data.models import Question
from evolvemem.errors import DataError
from evolvemem.scoring.aggregate import group_scores, summarise
from evolvemem.scoring.locomo import ADVERSARIAL, MULTI_HOP, PROTOCOLS, check_protocol, locomo_f1, scoring_gold
from evolvemem.scoring.metrics import ABSTENTION_PHRASES, answer_tokens, bleu1, choice_index, evidence_recall, exact_match, is_abstention, mc_accuracy, normalize_answer, token_f1

__all__ = [
    "ABSTENTION_PHRASES",
    "PROTOCOLS",
    "answer_tokens",
    "bleu1",
    "choice_index",
    "evidence_recall",
    "exact_match",
    "group_scores",
    "is_abstention",
    "mc_accuracy",
    "normalize_answer",
    "score_prediction",
    "summarise",
    "token_f1",
]


def _abstention_scores(prediction: str) -> dict[str, float]:
    """An adversarial question's only right answer is to decline, so every text metric agrees."""
    value = 1.0 if is_abstention(prediction) else 0.0
    return {"f1": value, "bleu1": value, "exact_match": value}


def _text_scores(prediction: str, golds: list[str], f1: float | None = None) -> dict[str, float]:
    return {
        "f1": max(token_f1(prediction, g) for g in golds) if f1 is None else f1,
        "bleu1": bleu1(prediction, golds),
        "exact_match": exact_match(prediction, golds),
    }


def _locomo_scores(question: Question, prediction: str, protocol: str) -> dict[str, float]:
    category = str(question.category)
    if category == ADVERSARIAL:
        if protocol == "official":
            return _abstention_scores(prediction)
        if question.adversarial_answer is None:
            raise DataError(f"question {question.question_id}: the 'paper' protocol needs 'adversarial_answer'")
        return _text_scores(prediction, [str(question.adversarial_answer)])
    if not question.answers:
        raise DataError(f"question {question.question_id} (category {category}) has no gold answer")
    try:
        f1 = locomo_f1(prediction, question.answers[0], category, protocol=protocol)
    except ValueError as exc:
        raise DataError(f"question {question.question_id}: {exc}") from None
    gold = str(question.answers[0]) if category == MULTI_HOP else scoring_gold(category, question.answers[0])
    return _text_scores(prediction, [gold], f1=f1)


def _generic_scores(question: Question, prediction: str, protocol: str) -> dict[str, float]:
    if question.question_type == "adversarial":
        if protocol == "paper" and question.adversarial_answer is not None:
            return _text_scores(prediction, [str(question.adversarial_answer)])
        return _abstention_scores(prediction)
    if not question.answers:
        raise DataError(f"question {question.question_id} has no gold answer")
    return _text_scores(prediction, [str(a) for a in question.answers])


def score_prediction(
    question: Question, prediction: str, protocol: str = "official", *, benchmark: str = "locomo"
) -> dict[str, float]:
    """Scores of one prediction: {"f1", "bleu1", "exact_match"}, plus "mc_accuracy" when the
    question has choices. `benchmark` decides whether LoCoMo's category rules apply (categories
    "1".."5" mean LoCoMo's only there). Bad question data raises a one-line DataError naming the
    question; an unknown protocol raises ConfigError."""
    check_protocol(protocol)
    prediction = "" if prediction is None else str(prediction)
    if benchmark == "locomo":
        scores = _locomo_scores(question, prediction, protocol)
    else:
        scores = _generic_scores(question, prediction, protocol)
    if question.choices:
        correct = question.correct_choice if question.correct_choice is not None else question.answer
        try:
            scores["mc_accuracy"] = mc_accuracy(prediction, question.choices, str(correct))
        except DataError as exc:
            raise DataError(f"question {question.question_id}: {exc}") from None
    return scores
