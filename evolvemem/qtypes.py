"""Domain-agnostic question types, and a rule classifier for questions that come without one.

Per-type overrides in a config are keyed by these names, so a config evolved on one benchmark
transfers to another: each benchmark maps its own categories onto them.
"""

from __future__ import annotations

import re

QUESTION_TYPES = (
    "single_fact",
    "multi_hop",
    "temporal",
    "inference",
    "adversarial",
    "counting",
    "knowledge_update",
    "preference",
)

# Types whose label already tells the answer ("this question is unanswerable"): per-type
# overrides for them are never proposed or applied by the loop, since tuning on them would
# exploit the benchmark's label rather than the question.
LABEL_ONLY_TYPES = ("adversarial",)

# The one rule for which questions are adversarial (unanswerable): their type says so. Scores keep
# them out of the main average (scoring/aggregate.py), paired decisions judge them as their own
# group (loop/paired.py), the failure view calls a wrong answer to one a hallucination
# (store/schema.py: `ADVERSARIAL_SQL`). Every loader maps its own label onto this type (LoCoMo's
# category 5, LongMemEval's "_abs" questions, a custom file's question_type), so the rule reads
# the record alone, with no benchmark at hand.
ADVERSARIAL = "adversarial"
ADVERSARIAL_SQL = f"question_type = '{ADVERSARIAL}'"  # the same rule over `question_records`


def is_adversarial(question_type: str | None) -> bool:
    """Whether a question of this type is adversarial (unanswerable from the conversation)."""
    return question_type == ADVERSARIAL


_TEMPORAL = re.compile(
    r"^\s*(when|what (year|month|day|date|time)|how long (ago|before|after)|since when)\b"
    r"|\b(before|after|during|first|last|earlier|later|how long|which (year|month|day))\b",
    re.I,
)
_COUNTING = re.compile(r"^\s*how (many|much|often)\b|\bnumber of\b|\bhow many times\b", re.I)
_INFERENCE = re.compile(
    r"^\s*(would|could|might|is it likely|what might|why)\b|\b(likely|probably|might|would .* if)\b", re.I
)
_UPDATE = re.compile(r"\b(now|currently|current|latest|most recent(ly)?|still|anymore|these days)\b", re.I)
_PREFERENCE = re.compile(r"\b(favou?rite|prefer|like(s|d)? (to|best)|recommend|suggest)\b", re.I)
_MULTI = re.compile(r"\b(and|both|all|each|what are|which .* (and|or))\b", re.I)


# The surface rules in the order they are tried: most specific first.
_RULES = (
    (_COUNTING, "counting"),
    (_TEMPORAL, "temporal"),
    (_UPDATE, "knowledge_update"),
    (_PREFERENCE, "preference"),
    (_INFERENCE, "inference"),
    (_MULTI, "multi_hop"),
)


def classify_question(question: str) -> str:
    """Assign a question type by surface rules (no model): the first rule that matches, else single_fact."""
    text = question.strip()
    return next((qtype for pattern, qtype in _RULES if pattern.search(text)), "single_fact")
