"""A temporal answer written as "yesterday" or "last Friday" means a date only beside the day it
was said; a gold answer must say the date itself.

The 1.5B labeller wrote bare relative phrases as gold answers for a third of its temporal
questions (its checker, shown the same dated lines, answered with the same phrase, so the checks
passed). A reader that answers "7 May 2023" to such a question would score zero against
"yesterday". So a bare relative phrase is resolved against the session date of the evidence turn
that says it (the offline extractor's rules), both in a candidate's gold and in a check's answer
before the two are compared. An answer that is not a bare relative phrase is left as written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from evolvemem.data.models import Conversation
from evolvemem.labelling.kinds import Candidate
from evolvemem.memory.offline_extract import resolve_relative_dates

_FILLER = ("it was ", "it happened ", "on ", "about ", "around ")


def _bare(answer: str) -> str:
    text = " ".join(answer.lower().strip().rstrip(".!").split())
    for filler in _FILLER:
        if text.startswith(filler):
            text = text[len(filler) :]
    return text


def _said_on(conversation: Conversation, evidence: Sequence[str], phrase: str) -> datetime | None:
    """The day of the evidence turn that says `phrase`, else of the first dated evidence turn."""
    wanted = set(evidence)
    cited = [t for t in conversation.turns() if t.turn_id in wanted and t.timestamp is not None]
    saying = [t for t in cited if phrase in t.full_text.lower()]
    chosen = (saying or cited)[:1]
    return chosen[0].timestamp if chosen else None


def resolve_answer(answer: str, conversation: Conversation, evidence: Sequence[str]) -> str:
    """`answer` as a date when it is a bare relative phrase the evidence's date resolves, else as is."""
    phrase = _bare(answer)
    day = _said_on(conversation, evidence, phrase)
    if not phrase or day is None:
        return answer
    for note in resolve_relative_dates(phrase, day):
        said, _, meant = note.partition(" = ")
        if said == phrase:
            return meant
    return answer


def with_resolved_answer(candidate: Candidate, conversation: Conversation) -> Candidate:
    """The candidate with its gold resolved; the answer as the generator wrote it stays in provenance."""
    resolved = resolve_answer(candidate.answer, conversation, candidate.evidence)
    if resolved == candidate.answer:
        return candidate
    return replace(candidate, answer=resolved, generator={**candidate.generator, "answer_as_written": candidate.answer})
