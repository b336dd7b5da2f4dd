"""Answer verification: a second pass that keeps, replaces or withdraws an answer.

Two styles (action_space/5_answering.toml): `strict` keeps an answer only when the context
supports it, else abstains; `multi_candidate` builds several candidate answers and keeps the
best-supported one. `OfflineVerifier` does both by lexical grounding; `LLMVerifier` asks the
model with prompts/verify_<style>.md and a JSON reply.

The returned `AnswerResult.cost` is the verification's own cost only: the evaluator adds it to
the answer's cost, so the answer's cost must not be counted again here.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Sequence

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.roles import AnswerResult
from evolvemem.data.models import Question
from evolvemem.llm.budget import ask_fitted, fit_ranked
from evolvemem.llm.client import LLMCallFailed, LLMClient, LLMJSONError
from evolvemem.prompts import load_prompt
from evolvemem.roles.answer_offline import (
    OfflineAnswerer,
    count_answer,
    relative_date,
    well_formed,
)
from evolvemem.roles.context_format import (
    ABSTENTION,
    MONTHS,
    format_context,
    format_question_date,
)
from evolvemem.roles.reader_lexicon import FILLERS, STOPWORDS, stem, word_tokens
from evolvemem.roles.reader_support import MemoryView, Support, rank_support
from evolvemem.scoring.metrics import is_abstention
from evolvemem.space.action_space import files_space

VERIFICATION_STYLES: tuple[str, ...] = files_space().enum("verification_style").choices
_CANDIDATE_MEMORIES = 3
_VERIFY_REPLY_TOKENS = 400


def _check_style(style: str) -> None:
    if style not in VERIFICATION_STYLES:
        raise ValueError(f"unknown verification style {style!r} (known: {', '.join(VERIFICATION_STYLES)})")


@functools.lru_cache(maxsize=8192)
def answer_terms(answer: str) -> frozenset[str]:
    """Stems of an answer's content words (month names count: "May" in a date is content)."""
    return frozenset(
        stem(lower)
        for surface, lower in word_tokens(answer)
        if surface[0].isalnum() and ((lower not in STOPWORDS and lower not in FILLERS) or lower in MONTHS)
    )


def _evidence_terms(support: Support) -> frozenset[str]:
    return evidence_terms(support.view)


def evidence_terms(view: MemoryView) -> frozenset[str]:
    """Everything a memory can vouch for: its words, its date, resolved relative times."""
    extra = [view.date_text, *(value for _, value in view.notes)]
    extra += [relative_date(s.text, view.day) for s in view.sentences]
    terms = set(view.stems)
    for text in extra:
        terms |= {stem(lower) for _, lower in word_tokens(text) if lower[0].isalnum()}
    return frozenset(terms)


def grounding(answer: str, support: Support, kind: str = "") -> float:
    """Share of the answer's content words that the memory contains. Answers with no content
    words (Yes/No) and bare numbers to "how many" questions (often a tally of memories, not a
    word in one) rest on the question's support alone: 1.0."""
    terms = answer_terms(answer)
    if not terms or (kind == "count" and answer.strip().isdigit()):
        return 1.0
    return len(terms & _evidence_terms(support)) / len(terms)


class OfflineVerifier:
    """Verifier without a model: grounds the answer's words in the supporting memories."""

    name = "offline"

    def __init__(
        self, answerer: OfflineAnswerer | None = None, *, support_margin: float = 0.1, min_grounding: float = 0.5
    ) -> None:
        self.answerer = answerer or OfflineAnswerer()
        self.support_margin = support_margin  # strict asks for this much more support than answering
        self.min_grounding = min_grounding

    def verify(
        self, question: Question, context: Sequence[MemoryUnit], answer: AnswerResult, style: str
    ) -> AnswerResult:
        _check_style(style)
        if answer.failed or is_abstention(answer.text):
            return AnswerResult(answer.text, notes={**answer.notes, "verified": "kept"})
        form, persons, supports = rank_support(question.text, context)
        eligible = [s for s in supports if s.person_ok]
        floor = self.answerer.threshold_for("concise", form)
        if style == "strict":
            return self._strict(answer, form.kind, eligible, floor + self.support_margin)
        return self._multi_candidate(answer, form, persons, eligible, floor)

    def _strict(self, answer: AnswerResult, kind: str, eligible: Sequence[Support], floor: float) -> AnswerResult:
        backed = [s for s in eligible if s.coverage >= floor and grounding(answer.text, s, kind) >= self.min_grounding]
        if backed:
            return AnswerResult(
                answer.text, notes={**answer.notes, "verified": "kept", "verified_by": backed[0].unit.memory_id}
            )
        return AnswerResult(ABSTENTION, notes={**answer.notes, "verified": "abstained", "original": answer.text})

    def _multi_candidate(
        self, answer: AnswerResult, form: Any, persons: tuple[str, ...], eligible: Sequence[Support], floor: float
    ) -> AnswerResult:
        """Candidates: the original answer and the reader's answer from each of the top three
        supporting memories. Each is scored by its best (question support × grounding) over
        the supporting memories (part by part for a list, less when it is not of the shape the
        question asks for), plus a little for every other candidate that agrees."""
        candidates = [answer.text]
        for support in eligible[:_CANDIDATE_MEMORIES]:
            if form.kind == "count" and not count_answer(support, form):
                continue  # one memory without a number would only offer a tally of itself: "1"
            text = self.answerer.answer_from(form, persons, [support], "concise").text
            if not is_abstention(text):
                candidates.append(text)
        normalised = [" ".join(sorted(answer_terms(c))) or c.lower() for c in candidates]
        scored = []
        for index, candidate in enumerate(candidates):
            backing = _candidate_support(candidate, form.kind, eligible)
            agreement = 0.15 * (normalised.count(normalised[index]) - 1)
            scored.append((backing + agreement, -index, candidate))
        best_score, _, best = max(scored)
        if best_score < floor:
            return AnswerResult(ABSTENTION, notes={**answer.notes, "verified": "abstained", "original": answer.text})
        verdict = "kept" if best == answer.text else "replaced"
        return AnswerResult(
            best, notes={**answer.notes, "verified": verdict, "original": answer.text, "candidates": candidates}
        )


def _candidate_support(candidate: str, kind: str, eligible: Sequence[Support]) -> float:
    """Best (question support × grounding) over the memories, times 0.6 when the answer is not
    of the asked-for shape; a comma-separated list scores the mean of its parts, so a list
    gathered from several memories is not penalised for being spread over them."""
    parts = [p.strip() for p in candidate.split(",") if p.strip()] or [candidate]
    scores = [max((s.coverage * grounding(part, s, kind) for s in eligible), default=0.0) for part in parts]
    return sum(scores) / len(scores) * (1.0 if well_formed(candidate, kind) else 0.6)


class LLMVerifier:
    """Verifier over an `LLMClient`: JSON verdicts from prompts/verify_<style>.md.

    A failed or unusable verification keeps the original answer (with the error in `notes`):
    the answer was fine as far as anyone knows, and a broken check must not erase it."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client
        self.name = f"llm:{client.model}"

    def verify(
        self, question: Question, context: Sequence[MemoryUnit], answer: AnswerResult, style: str
    ) -> AnswerResult:
        _check_style(style)
        if answer.failed:
            return answer

        def render(kept: Sequence[MemoryUnit]) -> str:
            return load_prompt(f"verify_{style}").render(
                question=question.text.strip(),
                question_date=format_question_date(question.question_date),
                context=format_context(kept),
                answer=answer.text.strip() or "(empty)",
            )

        try:
            fitted, parsed, reply = ask_fitted(
                self.client,
                lambda: fit_ranked(self.client, render, context, _VERIFY_REPLY_TOKENS)[0],
                role="verify",
                json_reply=True,
            )
        except LLMJSONError as exc:
            return AnswerResult(
                answer.text,
                cost=exc.reply.as_cost(),
                notes={**answer.notes, "verified": "error", "verify_error": str(exc)},
            )
        except LLMCallFailed as exc:
            return AnswerResult(
                answer.text, cost=exc.cost, notes={**answer.notes, "verified": "error", "verify_error": str(exc)}
            )
        if fitted.trimmed:
            answer = AnswerResult(
                answer.text,
                answer.cost,
                answer.failed,
                answer.error,
                {**answer.notes, "trimmed": [*answer.trimmed(), *(f"verification: {t}" for t in fitted.trimmed)]},
            )
        chosen = _chosen_answer(parsed, style, answer.text)
        cost = reply.as_cost()
        if chosen is None:
            return AnswerResult(
                answer.text,
                cost=cost,
                notes={**answer.notes, "verified": "error", "verify_error": "reply has no usable answer"},
            )
        if is_abstention(chosen):
            chosen = ABSTENTION
        verdict = (
            "kept"
            if chosen.strip().lower() == answer.text.strip().lower()
            else ("abstained" if chosen == ABSTENTION else "replaced")
        )
        notes = {**answer.notes, "verified": verdict, "original": answer.text}
        if style == "multi_candidate" and isinstance(parsed, dict):
            notes["candidates"] = parsed.get("candidates")
        return AnswerResult(chosen, cost=cost, notes=notes)


def _chosen_answer(parsed: Any, style: str, original: str) -> str | None:
    """The answer a verification reply settles on, or None when the reply is unusable."""
    if not isinstance(parsed, dict):
        return None
    if style == "strict" and parsed.get("supported") is True and not str(parsed.get("answer") or "").strip():
        return original
    chosen = parsed.get("answer")
    if isinstance(chosen, (int, float)) and not isinstance(chosen, bool):
        chosen = str(chosen)
    if isinstance(chosen, str) and chosen.strip():
        return re.sub(r"\s+", " ", chosen).strip()
    if style == "strict" and parsed.get("supported") is False:
        return ABSTENTION
    return None
