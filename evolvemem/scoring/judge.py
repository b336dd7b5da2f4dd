"""LLM-as-judge metric: does a prediction state the same fact as the gold answer?

An opt-in scoring protocol (the official LoCoMo scorer stays the default): the binary
CORRECT/WRONG LoCoMo judge of Mem0's evaluation (arXiv:2504.19413), written for us in
prompts/judge.md, generous on wording and date formats, strict on the fact itself. A reply that
is not JSON is asked again once (the client), then read for a lone label word; a call that fails
yields `None`, so the caller can record "not judged" instead of scoring it wrong.
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
_VERDICT_KEYS = ("label", "verdict")  # the key the prompt asks for first


# the preflight's case: invented, and asked exactly as a judgement is (so its reply is cached alike)
_PROBE = {"question": "What colour is Ilse Varga's kayak?", "gold": "green", "prediction": "green"}


def judge_version(model: str, prompt_name: str = "judge") -> str:
    """What labels a judge's verdicts (the manifest keeps it): its model and its prompt's version."""
    return f"{model}:{load_prompt(prompt_name).version}"


@dataclass(frozen=True)
class Judgement:
    score: int | None  # 1 correct, 0 wrong, None when the judge could not decide
    cost: Usage
    error: str = ""


def verdict_score(value: Any) -> int | None:
    """1/0 for a parsed judge reply (`{"label": "CORRECT"}`, `{"verdict": "wrong"}`, `"WRONG"`, ...),
    else None."""
    if isinstance(value, dict):
        lowered = {str(k).strip().lower(): v for k, v in value.items()}
        key = next((k for k in _VERDICT_KEYS if k in lowered), None)
        if key is not None:
            value = lowered[key]
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
        return judge_version(self.client.model, self.prompt.name)

    def unreachable(self) -> str | None:
        """Why the judge's model cannot be asked at all (one invented case, through the reply
        cache), None when it answers: the preflight that fails before any answer is paid for. An
        unusable reply is not a preflight failure: per answer it is a NULL verdict."""
        content = self.prompt.render(**_PROBE)
        try:
            self.client.complete(
                [{"role": "user", "content": content}],
                role=JUDGE_ROLE,
                max_tokens=self.max_tokens,
                json_mode=self.client.json_mode,
            )
        except LLMCallFailed as exc:
            return str(exc)
        return None

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
