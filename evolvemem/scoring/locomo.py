"""The LoCoMo answer F1, category by category, as the benchmark's reference evaluation defines it.

Category ids are LoCoMo's own ("1".."5"):

- "2" temporal, "4" single-hop: token F1 of prediction against the gold answer.
- "3" open-domain: the same, against the gold cut at its first ';' (the rest is a rationale).
- "1" multi-hop: gold and prediction are split on ','; each gold part takes its best F1 over the
  prediction parts; the parts' scores are averaged. Listing the right items in any order scores 1.
- "5" adversarial, protocol "official" (the default): 1.0 when the prediction abstains
  (`is_abstention`: "not mentioned" / "no information available"), else 0.0.
- "5" adversarial, protocol "paper" (opt-in, reported under that label): token F1 against the
  item's `adversarial_answer`, as the EvolveMem paper scored it. Note that this answer is the trap
  (the reply that fits the *other* speaker), so the protocol rewards falling for it; it exists
  only to reproduce the paper's figures.
"""

from __future__ import annotations

from evolvemem.data.models import Question
from evolvemem.errors import ConfigError, DataError
from evolvemem.scoring.metrics import is_abstention, token_f1
from evolvemem.scoring.text_scores import abstention_scores, text_scores, with_choices

PROTOCOLS: tuple[str, ...] = ("official", "paper")

MULTI_HOP, TEMPORAL, OPEN_DOMAIN, SINGLE_HOP, ADVERSARIAL = "1", "2", "3", "4", "5"
CATEGORIES: tuple[str, ...] = (MULTI_HOP, TEMPORAL, OPEN_DOMAIN, SINGLE_HOP, ADVERSARIAL)


def check_protocol(protocol: str) -> str:
    """Return `protocol` if known, else raise a one-line ConfigError listing the known ones."""
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown scoring protocol {protocol!r}; choose one of: {', '.join(PROTOCOLS)}")
    return protocol


def multi_hop_f1(prediction: str, gold: str) -> float:
    """Mean over the gold's comma-separated parts of the best F1 against any prediction part."""
    predicted_parts = [part.strip() for part in str(prediction).split(",")]
    gold_parts = [part.strip() for part in str(gold).split(",")]
    best = [max(token_f1(p, g) for p in predicted_parts) for g in gold_parts]
    return sum(best) / len(best)


def scoring_gold(category: str, gold: str) -> str:
    """The gold string a category is scored against (category 3 drops everything after ';')."""
    gold = str(gold)
    return gold.split(";")[0].strip() if category == OPEN_DOMAIN else gold


def locomo_f1(
    prediction: str,
    gold: str | None,
    category: str,
    *,
    adversarial_answer: str | None = None,
    protocol: str = "official",
) -> float:
    """The reference F1 of one LoCoMo prediction. `gold` is str()-ed (the JSON holds a few
    integer answers such as years). Raises ValueError for a category outside "1".."5" or a
    missing gold; callers that know the question id turn that into a DataError."""
    check_protocol(protocol)
    category = str(category)
    if category == ADVERSARIAL:
        if protocol == "official":
            return 1.0 if is_abstention(prediction) else 0.0
        if adversarial_answer is None:
            raise ValueError("the 'paper' protocol needs an adversarial_answer for category 5")
        return token_f1(prediction, str(adversarial_answer))
    if category not in CATEGORIES:
        raise ValueError(f"category {category!r} is not a LoCoMo category ({', '.join(CATEGORIES)})")
    if gold is None:
        raise ValueError(f"category {category} needs a gold answer")
    if category == MULTI_HOP:
        return multi_hop_f1(prediction, str(gold))
    return token_f1(prediction, scoring_gold(category, gold))


def _category_scores(question: Question, prediction: str, protocol: str) -> dict[str, float]:
    category = str(question.category)
    if category == ADVERSARIAL:
        if protocol == "official":
            return abstention_scores(prediction)
        if question.adversarial_answer is None:
            raise DataError(f"question {question.question_id}: the 'paper' protocol needs 'adversarial_answer'")
        return text_scores(prediction, [str(question.adversarial_answer)])
    if not question.answers:
        raise DataError(f"question {question.question_id} (category {category}) has no gold answer")
    try:
        f1 = locomo_f1(prediction, question.answers[0], category, protocol=protocol)
    except ValueError as exc:
        raise DataError(f"question {question.question_id}: {exc}") from None
    gold = str(question.answers[0]) if category == MULTI_HOP else scoring_gold(category, question.answers[0])
    return text_scores(prediction, [gold], f1=f1)


def score_locomo(question: Question, prediction: str, protocol: str = "official") -> dict[str, float]:
    """LoCoMo's scorer: the reference evaluation category by category (multiple choice added
    when a question has choices)."""
    check_protocol(protocol)
    prediction = "" if prediction is None else str(prediction)
    return with_choices(question, prediction, _category_scores(question, prediction, protocol))
