"""The answer judge (after AMA): Pass, Retry or Refresh, before an answer is final.

Why: the reader answers from whatever context retrieval gave it. When that context was the
wrong granularity (a fact where the exchange was needed, an episode where the exact turn was)
the answer is an abstention or a guess; another store often holds what was missing. And for
questions about the current state, a context that holds an old and a new value needs its old
memory marked as superseded before anyone can answer reliably.

Offline rules, in order:

- the answer abstains, and the context answers the question for another
  person (a memory about someone else supports it well): the question may
  be a trap, and another store would offer the same memory          → pass
- the answer abstains otherwise                                           → retry
- the question asks for the current state and the context holds an
  unresolved conflict (two dated memories, same subject, different value) → refresh
- a date / count question got an answer without a date / number           → retry
- fewer than half of the answer's content words occur in the context      → retry
- otherwise                                                               → pass

With a model (the answer role's client) prompts/answer_judge.md decides; a failed or unusable
reply falls back to the rules. The judge does not know the gold answer: it reads only the
question, the context and the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from evolvemem.contracts.vocab import StoreKind
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.usage import Usage
from evolvemem.data.models import Question
from evolvemem.llm.ask import ask_json, parse_choice
from evolvemem.prompts import load_prompt
from evolvemem.roles.answer_offline import relative_date, well_formed
from evolvemem.roles.context_format import format_context, format_question_date
from evolvemem.roles.reader_lexicon import stem, word_tokens
from evolvemem.roles.reader_support import analyse_question, rank_support, view_of
from evolvemem.roles.verify import answer_terms
from evolvemem.scoring.metrics import is_abstention

if TYPE_CHECKING:
    from evolvemem.llm.client import LLMClient
    from evolvemem.space.config import RetrievalConfig

OWNS = ("judge_retries",)
PASS, RETRY, REFRESH = "pass", "retry", "refresh"
VERDICTS = (PASS, RETRY, REFRESH)
MIN_SUPPORT = 0.5  # share of the answer's content words the context must hold
OTHER_PERSON_SUPPORT = 0.3  # question support (the offline reader's answer threshold) of a memory about someone else
JUDGE_MAX_TOKENS = 120
_CHECKED_FORMS = ("date", "year", "month", "count")  # forms whose shape is unambiguous


def _context_terms(context: Sequence[MemoryUnit]) -> frozenset[str]:
    """Stems of every word the context holds, with each memory's date, its resolved notes and
    the dates its relative times ("yesterday") stand for."""

    terms: set[str] = set()
    for unit in context:
        view = view_of(unit)
        terms |= view.stems
        dates = [
            view.date_text,
            *(value for _, value in view.notes),
            *(relative_date(s.text, view.day) for s in view.sentences),
        ]
        for text in dates:
            terms |= {stem(lower) for _, lower in word_tokens(text) if lower[0].isalnum()}
    return frozenset(terms)


def judge_by_rules(
    question: Question, context: Sequence[MemoryUnit], answer: str, unresolved_conflict: bool = False
) -> tuple[str, str]:
    """(verdict, reason) by the offline rules of the module docstring."""

    if not answer.strip() or is_abstention(answer, lenient=True):
        _, persons, supports = rank_support(question.text, context)
        if persons and any(not s.person_ok and s.coverage >= OTHER_PERSON_SUPPORT for s in supports):
            return PASS, "abstained: the context answers it for another person"
        return RETRY, "abstained"
    if unresolved_conflict:
        return REFRESH, "conflicting dated memories about the asked-for state"
    kind = analyse_question(question.text).kind
    if kind in _CHECKED_FORMS and not well_formed(answer, kind):
        return RETRY, f"a {kind} question without a {kind} in the answer"
    terms = answer_terms(answer)
    if terms and not (kind == "count" and answer.strip().isdigit()):
        held = len(terms & _context_terms(context)) / len(terms)
        if held < MIN_SUPPORT:
            return RETRY, f"only {held:.0%} of the answer's words are in the context"
    return PASS, "supported"


def parse_verdict(parsed: Any) -> str:
    """The verdict in {"verdict": "pass" | "retry" | "refresh", ...}."""

    return parse_choice(parsed, "verdict", VERDICTS)


def judge(
    question: Question,
    context: Sequence[MemoryUnit],
    answer: str,
    client: LLMClient | None = None,
    unresolved_conflict: bool = False,
) -> tuple[str, str, Usage]:
    """(verdict, how it was reached: "rules" | "llm" | "rules-fallback", cost)."""
    rules, _ = judge_by_rules(question, context, answer, unresolved_conflict)
    if client is None:
        return rules, "rules", Usage()

    prompt = load_prompt("answer_judge").render(
        question=question.text.strip(),
        question_date=format_question_date(question.question_date),
        context=format_context(context),
        answer=answer.strip() or "(empty)",
    )
    verdict, cost = ask_json(client, prompt, role="answer_judge", max_tokens=JUDGE_MAX_TOKENS, parse=parse_verdict)
    return (verdict, "llm", cost) if verdict is not None else (rules, "rules-fallback", cost)


def stores_for(effective: RetrievalConfig) -> set[str]:
    """Retries may widen to the raw turns and the episodes."""
    return {StoreKind.RAW, StoreKind.EPISODE} if effective.judge_retries > 0 else set()


class RetryJudge:
    """The answer path's judge: Pass, Retry or Refresh after each answer (rules offline, the
    answer model with one)."""

    def __init__(self, client: LLMClient | None):
        self.client = client

    def verdict(
        self, question: Question, context: Sequence[MemoryUnit], answer: str, unresolved_conflict: bool
    ) -> tuple[str, Usage]:
        verdict, _, cost = judge(question, context, answer, self.client, unresolved_conflict)
        return verdict, cost
