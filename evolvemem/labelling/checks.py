"""The checks a candidate passes before it is kept.

Deterministic, first (they cost nothing):
- verbatim: the question repeats `VERBATIM_WORDS` consecutive words of an evidence turn, or the
  answer copies more than `VERBATIM_ANSWER_WORDS` words of one — a question that quotes its
  evidence tests string matching, not memory;
- duplicate: the question's stemmed words overlap a question already kept for the conversation
  by `DUPLICATE_JACCARD` or more.
Then independent model calls, each a fresh prompt that sees only what the check allows:
- answerable questions: answered from the evidence turns alone, the answer must match the gold
  (token F1 >= `match_f1` under the project's scorer, and no abstention; a bare relative date in
  the answer is first resolved as the gold's was, see relative_answers); answered from the best
  retrieved context with the evidence turns removed, it must not;
- unanswerable questions: answered from the conversation's best retrieved context, the reply must
  decline. A reply made only of the question's own words ("the local artist" to "What is the
  name of the local artist ...?") gives no fact from the context and counts as declining; the
  1.5B checker answers that way instead of abstaining. Not for a question that offers choices
  ("... Paris or Rome?"), where a word of the question is a real answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from evolvemem.data.models import Conversation
from evolvemem.labelling.contexts import Retrieval, evidence_context
from evolvemem.labelling.kinds import (
    DEFAULT_MATCH_F1,
    Candidate,
    CheckResult,
    RejectReason,
)
from evolvemem.labelling.model_calls import JournaledModel, reply_field
from evolvemem.labelling.relative_answers import resolve_answer
from evolvemem.prompts import load_prompt
from evolvemem.scoring.metrics import (
    answer_tokens,
    is_abstention,
    normalize_answer,
    token_f1,
)

VERBATIM_WORDS = 7
VERBATIM_ANSWER_WORDS = 10
DUPLICATE_JACCARD = 0.7
CHECK_PROMPT = "label_check"
CHECK_MAX_TOKENS = 48

ANSWERABLE = "answerable_from_evidence"
LEAK = "not_answerable_without_evidence"
STAYS_UNANSWERABLE = "unanswerable_in_best_context"


def _ngrams(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def verbatim_check(candidate: Candidate, conversation: Conversation) -> CheckResult:
    turns = {
        t.turn_id: normalize_answer(t.text).split() for t in conversation.turns() if t.turn_id in candidate.evidence
    }
    question = normalize_answer(candidate.question).split()
    answer = normalize_answer(candidate.answer).split()
    for turn_id, words in turns.items():
        if _ngrams(question, VERBATIM_WORDS) & _ngrams(words, VERBATIM_WORDS):
            return CheckResult("verbatim", False, f"the question repeats {VERBATIM_WORDS}+ words of turn {turn_id}")
        if len(answer) > VERBATIM_ANSWER_WORDS and _ngrams(answer, VERBATIM_ANSWER_WORDS + 1) & _ngrams(
            words, VERBATIM_ANSWER_WORDS + 1
        ):
            return CheckResult(
                "verbatim", False, f"the answer copies more than {VERBATIM_ANSWER_WORDS} words of turn {turn_id}"
            )
    return CheckResult("verbatim", True)


def duplicate_check(candidate: Candidate, kept: Iterable[str]) -> CheckResult:
    words = set(answer_tokens(candidate.question))
    for other in kept:
        theirs = set(answer_tokens(other))
        union = words | theirs
        if union and len(words & theirs) / len(union) >= DUPLICATE_JACCARD:
            return CheckResult("duplicate", False, f"near-duplicate of {other!r}")
    return CheckResult("duplicate", True)


def restates_question(answer: str, question: str) -> bool:
    """True when every word of `answer` is already in `question` (stemmed), and the question
    offers no choice between them."""
    words, asked = set(answer_tokens(answer)), set(answer_tokens(question))
    return bool(words) and words <= asked and "or" not in asked


def matches_gold(prediction: str, gold: str, match_f1: float) -> tuple[bool, float]:
    if is_abstention(prediction, lenient=True):
        return False, 0.0
    f1 = token_f1(prediction, gold)
    return f1 >= match_f1, f1


class AnswerChecks:
    """The model checks of one labelling run (one checker model, one retrieval)."""

    def __init__(self, model: JournaledModel, retrieval: Retrieval, match_f1: float = DEFAULT_MATCH_F1):
        self.model = model
        self.retrieval = retrieval
        self.match_f1 = match_f1

    def _answer(self, context: str, question: str, purpose: str) -> str | None:
        prompt = load_prompt(CHECK_PROMPT).render(context=context, question=question)
        reply = self.model.ask(prompt, purpose=purpose, max_tokens=CHECK_MAX_TOKENS)
        return reply_field(reply.parsed, "answer")

    def run(self, candidate: Candidate, conversation: Conversation) -> tuple[list[CheckResult], RejectReason | None]:
        """The model checks in order, stopping at the first that fails."""
        qtype = candidate.label_kind.question_type
        if candidate.label_kind.unanswerable:
            context = self.retrieval.context(conversation, candidate.question, qtype)
            answer = self._answer(context, candidate.question, STAYS_UNANSWERABLE)
            if answer is None:
                return [
                    CheckResult(STAYS_UNANSWERABLE, False, "the reply held no answer")
                ], RejectReason.CHECK_MALFORMED
            echoed = restates_question(answer, candidate.question)
            declined = echoed or is_abstention(answer, lenient=True)
            detail = "the reply only restates the question" if echoed else ""
            result = CheckResult(
                STAYS_UNANSWERABLE, declined, detail if declined else "answered from the best context", answer=answer
            )
            return [result], None if declined else RejectReason.ANSWERED
        results = []
        answer = self._answer(evidence_context(conversation, candidate.evidence), candidate.question, ANSWERABLE)
        if answer is None:
            return [CheckResult(ANSWERABLE, False, "the reply held no answer")], RejectReason.CHECK_MALFORMED
        ok, f1 = matches_gold(resolve_answer(answer, conversation, candidate.evidence), candidate.answer, self.match_f1)
        results.append(
            CheckResult(ANSWERABLE, ok, "" if ok else "the evidence alone does not give the gold", answer=answer, f1=f1)
        )
        if not ok:
            return results, RejectReason.NOT_ANSWERABLE
        context = self.retrieval.context(conversation, candidate.question, qtype, without=candidate.evidence)
        answer = self._answer(context, candidate.question, LEAK)
        if answer is None:
            return [*results, CheckResult(LEAK, False, "the reply held no answer")], RejectReason.CHECK_MALFORMED
        leaked, f1 = matches_gold(answer, candidate.answer, self.match_f1)
        results.append(
            CheckResult(
                LEAK, not leaked, "the gold is found without the evidence turns" if leaked else "", answer=answer, f1=f1
            )
        )
        return results, RejectReason.LEAK if leaked else None
