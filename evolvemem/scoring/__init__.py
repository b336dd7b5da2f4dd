"""Scoring: turn (question, prediction) into metric values, and per-question values into summaries.

Each benchmark names its scorer in the benchmark table (evolvemem/benchmarks.py): LoCoMo follows
the reference evaluation category by category (`scoring.locomo.score_locomo`); the others use
`score_generic` — token F1 against the best-matching gold answer, and abstention scoring for
adversarial questions. The official protocol is the default; "paper" is opt-in and must be
reported under its name.
"""

from __future__ import annotations

from evolvemem.data.models import Question
from evolvemem.errors import DataError
from evolvemem.scoring.aggregate import group_scores, summarise
from evolvemem.scoring.locomo import PROTOCOLS, check_protocol
from evolvemem.scoring.text_scores import abstention_scores, text_scores, with_choices
from evolvemem.scoring.metrics import (
    ABSTENTION_PHRASES,
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
    "score_generic",
    "with_choices",
    "summarise",
    "token_f1",
]


def _generic_scores(question: Question, prediction: str, protocol: str) -> dict[str, float]:
    if question.question_type == "adversarial":
        if protocol == "paper" and question.adversarial_answer is not None:
            return text_scores(prediction, [str(question.adversarial_answer)])
        return abstention_scores(prediction)
    if not question.answers:
        raise DataError(f"question {question.question_id} has no gold answer")
    return text_scores(prediction, [str(a) for a in question.answers])


def score_generic(question: Question, prediction: str, protocol: str = "official") -> dict[str, float]:
    """Token F1 against the best-matching gold answer; abstention scoring for adversarial questions."""
    check_protocol(protocol)
    prediction = "" if prediction is None else str(prediction)
    return with_choices(question, prediction, _generic_scores(question, prediction, protocol))
