"""The text metrics of one prediction against gold answers, shared by every benchmark's scorer."""

from __future__ import annotations

from evolvemem.data.models import Question
from evolvemem.errors import DataError
from evolvemem.scoring.metrics import bleu1, exact_match, is_abstention, mc_accuracy, token_f1


def abstention_scores(prediction: str) -> dict[str, float]:
    """An adversarial question's only right answer is to decline, so every text metric agrees."""
    value = 1.0 if is_abstention(prediction) else 0.0
    return {"f1": value, "bleu1": value, "exact_match": value}


def text_scores(prediction: str, golds: list[str], f1: float | None = None) -> dict[str, float]:
    return {
        "f1": max(token_f1(prediction, g) for g in golds) if f1 is None else f1,
        "bleu1": bleu1(prediction, golds),
        "exact_match": exact_match(prediction, golds),
    }


def with_choices(question: Question, prediction: str, scores: dict[str, float]) -> dict[str, float]:
    """Add multiple-choice accuracy when the question has choices (any benchmark)."""
    if question.choices:
        correct = question.correct_choice if question.correct_choice is not None else question.answer
        try:
            scores["mc_accuracy"] = mc_accuracy(prediction, question.choices, str(correct))
        except DataError as exc:
            raise DataError(f"question {question.question_id}: {exc}") from None
    return scores
