"""Question-type classification for questions that come without a type.

Rules (`evolvemem.qtypes.classify_question`) run offline at load time; with `--classify-model`
an LLM re-classifies exactly those rule-typed questions (never a benchmark's own labels), so
per-type overrides transfer to a new domain. A failed or invalid reply keeps the rule's type."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from evolvemem.contracts.usage import Usage
from evolvemem.data.models import Dataset
from evolvemem.llm.client import LLMCallFailed
from evolvemem.prompts import load_prompt
from evolvemem.qtypes import QUESTION_TYPES


class LLMQuestionClassifier:
    name = "llm"

    def __init__(self, client: Any):
        self.client = client

    def classify(self, text: str) -> tuple[str | None, Usage]:
        messages = [{"role": "user", "content": load_prompt("classify").render(question=text)}]
        try:
            parsed, reply = self.client.complete_json(messages, role="classify", max_tokens=30)
        except LLMCallFailed:
            return None, Usage()
        value = parsed.get("question_type") if isinstance(parsed, dict) else None
        value = str(value).strip().lower() if value else None
        return (value if value in QUESTION_TYPES else None), reply.as_cost()


def reclassify(dataset: Dataset, classifier: Any) -> tuple[Dataset, int, Usage]:
    """The dataset with every rule-typed question re-typed by `classifier`; returns how many changed."""
    cost, changed, questions = Usage(), 0, []
    for q in dataset.questions:
        if q.type_source != "rules":
            questions.append(q)
            continue
        qtype, c = classifier.classify(q.text)
        cost = cost + c
        if qtype is None:
            questions.append(q)
            continue
        changed += int(qtype != q.question_type)
        category = qtype if q.category == q.question_type else q.category  # a defaulted category follows
        questions.append(replace(q, question_type=qtype, category=category, type_source="llm"))
    out = Dataset(
        dataset.name,
        dataset.conversations,
        questions,
        dataset.category_names,
        dataset.adversarial_categories,
        dataset.source,
        dataset.content_hash,
    )
    return out, changed, cost
