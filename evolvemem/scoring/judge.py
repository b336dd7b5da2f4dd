"""LLM-as-judge metric: does a prediction state the same fact as the gold answer?

An opt-in scoring protocol (the official LoCoMo scorer stays the default). The judge is lenient
on wording and date formats and strict on the fact itself; see prompts/judge.md. A judge call
that fails yields `None`, so the caller can record "not judged" instead of scoring it wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from evolvemem.llm.client import LLMCallFailed, LLMClient, LLMJSONError
from evolvemem.prompts import load_prompt
from evolvemem.contracts.usage import Usage

JUDGE_ROLE = "judge"
_LABELS = {"correct": 1, "right": 1, "wrong": 0, "incorrect": 0}
_LABEL_WORD = re.compile(r"\b(correct|incorrect|wrong)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Judgement:
    score: int | None  # 1 correct, 0 wrong, None when the judge could not decide
    cost: Usage
    error: str = ""


def verdict_score(value: Any) -> int | None:
    """1/0 for a parsed judge reply (`{"verdict": "correct"}`, `"WRONG"`, ...), else None."""
    if isinstance(value, dict):
        lowered = {str(k).strip().lower(): v for k, v in value.items()}
        if "verdict" in lowered:
            value = lowered["verdict"]
        elif len(lowered) == 1:
            value = next(iter(lowered.values()))
        else:
            return None
    if not isinstance(value, str):
        return None
    return _LABELS.get(value.strip().strip(".!\"'").lower())


def verdict_from_text(text: str) -> int | None:
    """Last resort for a reply that is not JSON: a verdict only if every label word in it agrees."""
    scores = {_LABELS[word.lower()] for word in _LABEL_WORD.findall(text or "")}
    return scores.pop() if len(scores) == 1 else None


class LLMJudge:
    """Scores (question, gold, prediction) with one JSON-mode call at temperature 0."""

    name = "llm-judge"

    def __init__(self, client: LLMClient, prompt_name: str = "judge", max_tokens: int = 64):
        self.client = client
        self.prompt = load_prompt(prompt_name)
        self.max_tokens = max_tokens

    @property
    def version(self) -> str:
        """Changes with the prompt text or the judge model (label judged records with it)."""
        return f"{self.client.model}:{self.prompt.version}"

    def judge(self, question_text: str, gold: str, prediction: str) -> tuple[int | None, Usage]:
        result = self.judge_detailed(question_text, gold, prediction)
        return result.score, result.cost

    def judge_detailed(self, question_text: str, gold: str, prediction: str) -> Judgement:
        if not str(prediction).strip():
            return Judgement(0, Usage())  # nothing was predicted: wrong without asking
        content = self.prompt.render(question=question_text, gold=gold, prediction=prediction)
        messages = [{"role": "user", "content": content}]
        try:
            value, reply = self.client.complete_json(messages, role=JUDGE_ROLE, max_tokens=self.max_tokens)
        except LLMJSONError as exc:
            score = verdict_from_text(exc.raw_text)
            return Judgement(score, exc.reply.as_cost(), "" if score is not None else str(exc))
        except LLMCallFailed as exc:
            return Judgement(None, Usage(), str(exc))
        score = verdict_score(value)
        error = "" if score is not None else f"judge reply has no verdict: {reply.text[:120]!r}"
        return Judgement(score, reply.as_cost(), error)
