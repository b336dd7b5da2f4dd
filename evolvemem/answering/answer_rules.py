"""The answer-side levers as they reach the reader and its answer (their ranges and choices are the
action space's, `action_space/5_answering.toml`).

Two speak to the reader, through its prompt (`PromptLevers`): `quote_then_answer` and
`abstain_when = never`. Three act on its answer once given (and checked), by rules, in this
order: `abstain_when = unsupported` turns an answer none of whose content words the context
holds into an abstention; `answer_max_words` cuts a long answer to its head; and
`resolve_relative_dates` rewrites a relative time in it as the date it means
(answering/relative_dates.py). An abstention is never rewritten. The reader's own answer stays in
the answer's notes (`reader_answer`) whenever a rule changed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

from evolvemem.answering.relative_dates import resolve_answer_dates, time_spans
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.roles import ABSTENTION_TEXT, AnswerResult, PromptLevers
from evolvemem.data.models import Question
from evolvemem.roles.reader_support import view_of
from evolvemem.roles.verify import answer_terms, evidence_terms
from evolvemem.scoring.metrics import is_abstention

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig

# Where a reply's first clause ends: a sentence end, a semicolon, a dash between words, "because".
_CLAUSE_END = re.compile(r"(?<=[.!?;])\s+|\s+[-\u2013\u2014]\s+|,?\s+because\b", re.I)
_TRAILING = ",;:.-\u2013\u2014 "


@dataclass(frozen=True)
class AnswerRules:
    """The rules a config applies to its reader's answers (all off: the answer as given)."""

    abstain_unsupported: bool = False
    max_words: int = 0  # 0 = no cap
    resolve_dates: bool = False

    @property
    def active(self) -> bool:
        return self.abstain_unsupported or self.max_words > 0 or self.resolve_dates


def prompt_levers(effective: RetrievalConfig) -> PromptLevers:
    """What the config's answer-side levers add to the reader's prompt."""
    return PromptLevers(quote_first=effective.quote_then_answer, answer_anyway=effective.abstain_when == "never")


def answer_rules(effective: RetrievalConfig) -> AnswerRules:
    """The rules the config's answer-side levers apply to the reader's answer."""
    return AnswerRules(
        abstain_unsupported=effective.abstain_when == "unsupported",
        max_words=effective.answer_max_words,
        resolve_dates=effective.resolve_relative_dates,
    )


def supported(answer: str, context: Sequence[MemoryUnit]) -> bool:
    """Some content word of `answer` (a bare number aside: a count is a tally, not a word) is in
    the context: its words, dates or resolved relative times. An answer with none (yes / no) is."""
    terms = {t for t in answer_terms(answer) if not t.isdigit()}
    if not terms:
        return True
    return any(terms & evidence_terms(view_of(unit)) for unit in context)


def cap_words(answer: str, max_words: int) -> str:
    """`answer` when it has at most `max_words` words; else its first clause, cut after its first
    `max_words` words — or after the time expression that word starts or is inside ("last week",
    "14 March 2025" are kept whole) — with trailing punctuation dropped."""
    if max_words <= 0 or len(answer.split()) <= max_words:
        return answer
    head = _CLAUSE_END.split(answer.strip(), maxsplit=1)[0]
    words = list(re.finditer(r"\S+", head))
    if len(words) <= max_words:
        return head.rstrip(_TRAILING)
    end = words[max_words - 1].end()
    end = max([end, *(stop for start, stop in time_spans(head) if start < end < stop)])
    return head[:end].rstrip(_TRAILING)


def apply_answer_rules(
    answer: AnswerResult, rules: AnswerRules, question: Question, context: Sequence[MemoryUnit]
) -> AnswerResult:
    """`answer` after `rules` (see the module docstring); a failed answer or an abstention as is."""
    if not rules.active or answer.failed or is_abstention(answer.text):
        return answer
    text, notes = answer.text, dict(answer.notes)
    if rules.abstain_unsupported and not supported(text, context):
        text = ABSTENTION_TEXT
        notes["abstained"] = "unsupported"
    else:
        text = cap_words(text, rules.max_words)
        if rules.resolve_dates:
            hint = " ".join((answer.text, str(notes.get("quote", "")), question.text))
            text = resolve_answer_dates(text, hint, context)
    if text == answer.text:
        return answer
    notes["reader_answer"] = answer.text
    return replace(answer, text=text, notes=notes)
