"""`LLMAnswerer`: answers from the retrieved context with one of the six answer-style prompts.

Each style is a prompt file `prompts/answer_<style>.md` with `$question`, `$question_date` and
`$context` placeholders, so a style is changed by editing text, not code. A call that fails
after the client's retries becomes `AnswerResult(failed=True)`: the evaluator records it as
failed instead of scoring it as wrong, and one bad call never stops a run.
"""

from __future__ import annotations

import re
from typing import Sequence

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.roles import AnswerResult
from evolvemem.data.models import Question
from evolvemem.llm.budget import FittedPrompt, ask_fitted, fit_ranked
from evolvemem.llm.client import LLMCallFailed, LLMClient
from evolvemem.llm.context_window import estimate_tokens
from evolvemem.prompts import load_prompt
from evolvemem.roles.context_format import (
    ABSTENTION,
    format_context,
    format_question_date,
)
from evolvemem.scoring.metrics import is_abstention
from evolvemem.space.action_space import files_space

ANSWER_STYLES: tuple[str, ...] = files_space().enum("answer_style").choices
# Reasoning needs room; the other styles want a phrase or two.
_MAX_TOKENS = {"step_by_step": 700, "detailed": 200}
_DEFAULT_MAX_TOKENS = 120
_FINAL_ANSWER = re.compile(r"^\s*\**\s*(?:final\s+)?answer\s*\**\s*:\s*\**\s*(.*)$", re.I | re.M)


def render_answer_prompt(style: str, question: Question, context: Sequence[MemoryUnit], layout: str = "list") -> str:
    """The full prompt text for one question (also used by tests and `--dry-run` style tools)."""
    if style not in ANSWER_STYLES:
        raise ValueError(f"unknown answer style {style!r} (known: {', '.join(ANSWER_STYLES)})")
    return load_prompt(f"answer_{style}").render(
        question=question.text.strip(),
        question_date=format_question_date(question.question_date),
        context=format_context(context, layout),
    )


ASSUMED_WINDOW = 4096  # llama.cpp's default window: what a reader is assumed to have when none is known


def context_token_share(client: LLMClient | None) -> int:
    """Tokens of an answer model's window left for the context: the window (the model's when it
    is known, else ASSUMED_WINDOW) minus the longest answer prompt's own text (every style's
    template with an empty context; the question itself is short) and the default reply budget."""
    window = (client.context_window() if client is not None else None) or ASSUMED_WINDOW
    template = max(
        estimate_tokens(
            [
                {
                    "role": "user",
                    "content": load_prompt(f"answer_{style}").render(question="", question_date="unknown", context=""),
                }
            ]
        )
        for style in ANSWER_STYLES
    )
    return max(1, window - template - _DEFAULT_MAX_TOKENS)


def parse_answer(text: str, style: str = "concise") -> str:
    """The final answer in a reply: the text after the last "Answer:" line when there is one
    (step_by_step reasons first, and its last line is the answer if the label is missing),
    on one line, without quotes or markdown; an abstention in any wording becomes the one
    abstention text."""
    finals: list[str] = _FINAL_ANSWER.findall(text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if finals:
        answer = finals[-1]
    elif style == "step_by_step" and lines:
        answer = lines[-1]
    else:
        answer = " ".join(lines)
    answer = answer.strip().strip("*").strip().strip('"').strip("'").strip()
    if is_abstention(answer, lenient=True) and len(answer.split()) <= 12:
        return ABSTENTION
    return answer


class LLMAnswerer:
    """Answerer over an `LLMClient` (evolvemem.llm.client); never raises on a failed call.

    The prompt is sized to the model's window: when the context does not fit, the lowest-ranked
    memories are left out and `notes["trimmed"]` says how many (recorded as `prompt_trimmed`)."""

    def __init__(self, client: LLMClient, *, temperature: float = 0.0) -> None:
        self.client = client
        self.temperature = temperature
        self.name = f"llm:{client.model}"

    def answer(
        self, question: Question, context: Sequence[MemoryUnit], style: str, layout: str = "list"
    ) -> AnswerResult:
        def fit() -> FittedPrompt:
            return fit_ranked(
                self.client,
                lambda kept: render_answer_prompt(style, question, kept, layout),
                context,
                _MAX_TOKENS.get(style, _DEFAULT_MAX_TOKENS),
            )[0]

        try:
            fitted, _, reply = ask_fitted(self.client, fit, role="answer", temperature=self.temperature)
        except LLMCallFailed as exc:
            return AnswerResult("", cost=exc.cost, failed=True, error=str(exc))
        notes: dict[str, object] = {"raw": reply.text} if style == "step_by_step" else {}
        if fitted.trimmed:
            notes["trimmed"] = list(fitted.trimmed)
        return AnswerResult(parse_answer(reply.text, style), cost=reply.as_cost(), notes=notes)
