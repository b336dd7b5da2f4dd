"""`LLMAnswerer`: answers from the retrieved context with one of the six answer-style prompts.

Each style is a prompt file `prompts/answer_<style>.md` with `$question`, `$question_date` and
`$context` placeholders, so a style is changed by editing text, not code. The answer-side levers
that speak to the reader (`PromptLevers`) add the instruction of their own prompt file
(`prompts/lever_*.md`) before the style's "Now the real case."; `quote_then_answer` also ends the
prompt with "Quote:" and keeps only the answer part of the reply. A call that fails
after the client's retries becomes `AnswerResult(failed=True)`: the evaluator records it as
failed instead of scoring it as wrong, and one bad call never stops a run.
"""

from __future__ import annotations

import re
from typing import Sequence

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.roles import NO_PROMPT_LEVERS, AnswerResult, PromptLevers
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
_QUOTE_TOKENS = 80  # room for the quoted line before the answer
_FINAL_ANSWER = re.compile(r"^\s*\**\s*(?:final\s+)?answer\s*\**\s*:\s*\**\s*(.*)$", re.I | re.M)
_ANSWER_LABEL = re.compile(r"\**\s*(?:final\s+)?answer\s*\**\s*:\s*\**", re.I)
_QUOTE_LABEL = re.compile(r"^\s*\**\s*quote\s*\**\s*:\s*", re.I)
_REAL_CASE = "Now the real case."  # every style prompt's line between its instructions and the case
_ANSWER_CUE, _QUOTE_CUE = "\nAnswer:", "\nQuote:"


def render_answer_prompt(
    style: str,
    question: Question,
    context: Sequence[MemoryUnit],
    layout: str = "list",
    levers: PromptLevers = NO_PROMPT_LEVERS,
) -> str:
    """The full prompt text for one question (also used by tests and `--dry-run` style tools)."""
    if style not in ANSWER_STYLES:
        raise ValueError(f"unknown answer style {style!r} (known: {', '.join(ANSWER_STYLES)})")
    prompt = load_prompt(f"answer_{style}").render(
        question=question.text.strip(),
        question_date=format_question_date(question.question_date),
        context=format_context(context, layout),
    )
    return with_levers(prompt, levers)


def with_levers(prompt: str, levers: PromptLevers) -> str:
    """`prompt` with the instructions of the levers that are on, before its "Now the real case."
    (at the top when it has none); with `quote_first`, a closing "Answer:" cue becomes "Quote:"
    (a style that reasons first keeps its cue: its reply ends with an "Answer:" line anyway)."""
    wanted = (("lever_answer_anyway", levers.answer_anyway), ("lever_quote_first", levers.quote_first))
    blocks = [load_prompt(name).text.strip() for name, on in wanted if on]
    if not blocks:
        return prompt
    added = "\n\n".join(blocks) + "\n\n"
    head, anchor, tail = prompt.partition(_REAL_CASE)
    prompt = f"{head}{added}{anchor}{tail}" if anchor else added + prompt
    body = prompt.rstrip()
    if levers.quote_first and body.endswith(_ANSWER_CUE):
        prompt = body[: -len(_ANSWER_CUE)] + _QUOTE_CUE + prompt[len(body) :]
    return prompt


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


def split_quote(text: str) -> tuple[str, str]:
    """A quote-then-answer reply as (quote, answer part): the text before and after its last
    "Answer:" label; without one, the first line is the quote and the other lines the answer (a
    reply of one line is both). A leading "Quote:" label is dropped."""
    labels = list(_ANSWER_LABEL.finditer(text))
    if labels:
        quote, answer = text[: labels[-1].start()], text[labels[-1].end() :]
    else:
        lines = [line for line in text.strip().splitlines() if line.strip()]
        quote, answer = (lines[0], "\n".join(lines[1:])) if len(lines) > 1 else (text, text)
    quote = _QUOTE_LABEL.sub("", quote.strip()).strip().strip('"').strip()
    answer = _QUOTE_LABEL.sub("", answer.strip().splitlines()[0] if answer.strip() else "")
    return quote, answer


def quoted_line(text: str) -> str:
    """The line a reasoning reply labels "Quote:" ("" without one): its "Answer:" line is the answer."""
    lines = [_QUOTE_LABEL.sub("", line).strip() for line in text.splitlines() if _QUOTE_LABEL.match(line)]
    return lines[0].strip('"').strip() if lines else ""


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
        self,
        question: Question,
        context: Sequence[MemoryUnit],
        style: str,
        layout: str = "list",
        levers: PromptLevers = NO_PROMPT_LEVERS,
    ) -> AnswerResult:
        reply_tokens = _MAX_TOKENS.get(style, _DEFAULT_MAX_TOKENS) + (_QUOTE_TOKENS if levers.quote_first else 0)

        def fit() -> FittedPrompt:
            return fit_ranked(
                self.client,
                lambda kept: render_answer_prompt(style, question, kept, layout, levers),
                context,
                reply_tokens,
            )[0]

        try:
            fitted, _, reply = ask_fitted(self.client, fit, role="answer", temperature=self.temperature)
        except LLMCallFailed as exc:
            return AnswerResult("", cost=exc.cost, failed=True, error=str(exc))
        notes: dict[str, object] = {"raw": reply.text} if style == "step_by_step" else {}
        text = reply.text
        if levers.quote_first:
            notes["quote"], text = split_quote(text) if style != "step_by_step" else (quoted_line(text), text)
        if fitted.trimmed:
            notes["trimmed"] = list(fitted.trimmed)
        return AnswerResult(parse_answer(text, style), cost=reply.as_cost(), notes=notes)
