"""Candidate questions from a model: which sessions a slot shows, the prompt, and the reply parsed.

Each session gets `per_session` slots; slot j of session i asks for kind
`types[(i * per_session + j) % len(types)]`, so every kind is asked about evenly across the
conversation. A multi-hop slot also shows a second session half the conversation away, so its
two facts come from different times.

Each answerable slot names a focus turn (one per session shown) for the question to be about:
slot j takes the turn (j + 1/2) / per_session of the way through the session's eligible turns.
Without it a small model asked the same question of a session again and again, whatever the
list of questions to avoid said (near-duplicates were 44% of the 1.5B model's candidates), and
the slots of a session now cover different parts of it. A temporal slot prefers turns that
mention a time, so its answer can be worked out from the session date."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evolvemem.data.dates import MONTH_NAMES, WEEKDAY_NAMES
from evolvemem.data.models import Conversation, Session, Turn
from evolvemem.labelling.contexts import session_block
from evolvemem.labelling.kinds import LABEL_KINDS, UNANSWERABLE_ANSWER, Candidate, LabelKind
from evolvemem.labelling.model_calls import reply_field
from evolvemem.memory.offline_extract import resolve_relative_dates
from evolvemem.prompts import load_prompt

GENERATE_PROMPT = "label_generate"
GENERATE_MAX_TOKENS = 160
FOCUS_MIN_WORDS = 6  # a shorter turn ("Thanks!", "Wow, great") holds nothing to ask about
_TIME_NAMES = frozenset(MONTH_NAMES) | frozenset(WEEKDAY_NAMES)
_YEAR = re.compile(r"\b(19|20)\d\d\b")


@dataclass(frozen=True)
class Slot:
    """One generation call: a kind of question about some sessions of a conversation."""

    conversation: Conversation
    sessions: tuple[Session, ...]
    kind: str
    focus: tuple[str, ...] = ()  # turn ids the question is to be about (none for an unanswerable one)


def pick_sessions(conversation: Conversation, limit: int | None) -> list[int]:
    """Indexes of the sessions to label: all, or `limit` spread evenly from first to last."""
    count = len(conversation.sessions)
    if limit is None or limit >= count:
        return list(range(count))
    if limit <= 1:
        return [count - 1] if limit == 1 else []
    return sorted({round(i * (count - 1) / (limit - 1)) for i in range(limit)})


def slots_for(conversation: Conversation, types: Sequence[str], per_session: int, sessions: int | None) -> list[Slot]:
    out = []
    count = len(conversation.sessions)
    for i in pick_sessions(conversation, sessions):
        for j in range(per_session):
            kind = types[(i * per_session + j) % len(types)]
            shown = [conversation.sessions[i]]
            if LABEL_KINDS[kind].sessions > 1 and count > 1:
                other = (i + count // 2) % count
                shown = sorted(
                    [conversation.sessions[i], conversation.sessions[other]],
                    key=lambda s: conversation.sessions.index(s),
                )
            focus = () if LABEL_KINDS[kind].unanswerable else focus_turns(shown, LABEL_KINDS[kind], j, per_session)
            out.append(Slot(conversation, tuple(shown), kind, focus))
    return out


def mentions_time(turn: Turn, session: Session) -> bool:
    """A relative date the session date resolves ("last week"), a month, a weekday or a year."""
    text = turn.full_text
    if session.timestamp is not None and resolve_relative_dates(text, session.timestamp):
        return True
    words = {w.strip(".,!?;:'\"()").lower() for w in text.split()}
    return bool(words & _TIME_NAMES) or bool(_YEAR.search(text))


def focus_turns(sessions: Sequence[Session], kind: LabelKind, index: int, slots: int) -> tuple[str, ...]:
    """One turn id per session shown, or none where a session has no turn worth asking about."""
    out = []
    for session in sessions:
        eligible = [t for t in session.turns if len(t.full_text.split()) >= FOCUS_MIN_WORDS]
        if kind.question_type == "temporal":
            eligible = [t for t in eligible if mentions_time(t, session)] or eligible
        if eligible:
            out.append(eligible[min(len(eligible) - 1, int((index + 0.5) * len(eligible) / slots))].turn_id)
    return tuple(out)


def focus_line(slot: Slot) -> str:
    if not slot.focus:
        return "Ask about any part of the conversation."
    if len(slot.focus) == 1:
        return f"Ask about what turn [{slot.focus[0]}] says (the turns around it may help)."
    named = " and ".join(f"[{turn_id}]" for turn_id in slot.focus)
    return f"Ask about what turns {named} say together."


def generation_prompt(slot: Slot, avoid: Sequence[str]) -> str:
    kind = LABEL_KINDS[slot.kind]
    article = "an" if slot.kind[0] in "aeiou" else "a"
    avoid_text = "; ".join(f'"{q}"' for q in avoid[-8:]) if avoid else "(none yet)"
    return load_prompt(GENERATE_PROMPT).render(
        kind_article=article,
        kind=slot.kind,
        instruction=kind.instruction,
        avoid=avoid_text,
        focus=focus_line(slot),
        example_id=_example_id(slot),
        sessions="\n\n".join(session_block(s) for s in slot.sessions),
    )


def _example_id(slot: Slot) -> str:
    """An id in the style of the turns shown (the example's content is invented; its id must not
    teach the model another id format)."""
    turns = [t for s in slot.sessions for t in s.turns]
    return turns[len(turns) // 2].turn_id if turns else "1"


def parse_candidate(parsed: Any, slot: Slot, generator: dict[str, Any]) -> Candidate | str:
    """The reply as a Candidate, or why it is not one (a malformed reply's detail)."""
    if not isinstance(parsed, dict):
        return "the reply is not a JSON object"
    question = reply_field(parsed, "question")
    answer = reply_field(parsed, "answer")
    if not question:
        return "no question"
    kind = LABEL_KINDS[slot.kind]
    if kind.unanswerable:
        return Candidate(slot.conversation.conversation_id, slot.kind, question, UNANSWERABLE_ANSWER, (), generator)
    if not answer:
        return "no answer"
    raw_evidence = next((v for k, v in parsed.items() if str(k).strip().lower() == "evidence"), None)
    if isinstance(raw_evidence, (str, int)):
        raw_evidence = [raw_evidence]
    if not isinstance(raw_evidence, list) or not raw_evidence:
        return "no evidence turns"
    shown = {t.turn_id for s in slot.sessions for t in s.turns}
    evidence = tuple(dict.fromkeys(str(e).strip().strip("[]") for e in raw_evidence))
    unknown = [e for e in evidence if e not in shown]
    if unknown:
        return f"evidence {unknown[0]!r} is not a turn shown"
    if kind.sessions > 1 and len(slot.sessions) > 1:
        cited = {s.session_id for s in slot.sessions for t in s.turns if t.turn_id in evidence}
        if len(cited) < 2:
            return "a multi-hop question must cite turns of both sessions"
    return Candidate(slot.conversation.conversation_id, slot.kind, question, answer, evidence, generator)
