"""Candidate questions from a model: which sessions a slot shows, the prompt, and the reply parsed.

Each session gets `per_session` slots; slot j of session i asks for kind
`types[(i * per_session + j) % len(types)]`, so every kind is asked about evenly across the
conversation. A multi-hop slot also shows a second session half the conversation away, so its
two facts come from different times.

Each slot names a focus turn (one per session shown), quoted at the end of the prompt, for the
question to be about: slot j takes the turn (j + 1/2) / per_session of the way through the
session's eligible turns, so the slots of a session cover different parts of it. A temporal slot
prefers turns that mention a time, so its answer can be worked out from the session date. The
prompt used to list the questions already written, to be avoided instead; the 1.5B model copied
them back (near-duplicates were 44% of its candidates).

An unanswerable slot's reply must decline in its own answer: one that gives an answer is the
model saying its question is answerable after all, and is rejected as malformed before any check
is paid for."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evolvemem.data.dates import TIME_NAMES, format_day
from evolvemem.data.models import Conversation, Session, Turn
from evolvemem.labelling.contexts import session_block, turn_line
from evolvemem.labelling.kinds import LABEL_KINDS, UNANSWERABLE_ANSWER, Candidate, LabelKind
from evolvemem.labelling.model_calls import reply_field
from evolvemem.memory.offline_extract import resolve_relative_dates
from evolvemem.prompts import load_prompt
from evolvemem.scoring.metrics import is_abstention

GENERATE_PROMPT = "label_generate"
GENERATE_MAX_TOKENS = 160
FOCUS_MIN_WORDS = 6  # a shorter turn ("Thanks!", "Wow, great") holds nothing to ask about
_YEAR = re.compile(r"\b(19|20)\d\d\b")


@dataclass(frozen=True)
class Slot:
    """One generation call: a kind of question about some sessions of a conversation."""

    conversation: Conversation
    sessions: tuple[Session, ...]
    kind: str
    focus: tuple[Turn, ...] = ()  # the turns the question is to be about (one per session shown)

    @property
    def label_kind(self) -> LabelKind:
        return LABEL_KINDS[self.kind]


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
            kind = LABEL_KINDS[types[(i * per_session + j) % len(types)]]
            shown = [conversation.sessions[i]]
            if kind.sessions > 1 and count > 1:
                other = (i + count // 2) % count
                shown = sorted(
                    [conversation.sessions[i], conversation.sessions[other]],
                    key=lambda s: conversation.sessions.index(s),
                )
            out.append(Slot(conversation, tuple(shown), kind.name, focus_turns(shown, kind, j, per_session)))
    return out


def mentions_time(turn: Turn, session: Session) -> bool:
    """A relative date the session date resolves ("last week"), a month, a weekday or a year."""
    text = turn.full_text
    if session.timestamp is not None and resolve_relative_dates(text, session.timestamp):
        return True
    words = {w.strip(".,!?;:'\"()").lower() for w in text.split()}
    return bool(words & TIME_NAMES) or bool(_YEAR.search(text))


def focus_turns(sessions: Sequence[Session], kind: LabelKind, index: int, slots: int) -> tuple[Turn, ...]:
    """One turn per session shown, or none where a session has no turn worth asking about."""
    out = []
    for session in sessions:
        eligible = [t for t in session.turns if len(t.full_text.split()) >= FOCUS_MIN_WORDS]
        if kind.question_type == "temporal":
            eligible = [t for t in eligible if mentions_time(t, session)] or eligible
        if eligible:
            out.append(eligible[min(len(eligible) - 1, int((index + 0.5) * len(eligible) / slots))])
    return tuple(out)


def focus_text(slot: Slot) -> str:
    """The closing instruction: which turns the question is about, quoted (a small model follows
    what it read last)."""
    if not slot.focus:
        return "Ask about any part of the conversation."
    quoted = "\n".join(
        f"{turn_line(t)} (said on {format_day(t.timestamp)})" if t.timestamp else turn_line(t) for t in slot.focus
    )
    if slot.label_kind.unanswerable:
        return (
            f"Ask about someone or something this turn mentions, for a detail the conversation never gives:\n{quoted}"
        )
    if len(slot.focus) == 1:
        return f"The question must be about what this turn says (the turns around it may help):\n{quoted}"
    return f"The question must need what both of these turns say:\n{quoted}"


def generation_prompt(slot: Slot) -> str:
    kind = slot.label_kind
    article = "an" if slot.kind[0] in "aeiou" else "a"
    return load_prompt(GENERATE_PROMPT).render(
        kind_article=article,
        kind=slot.kind,
        instruction=kind.instruction,
        focus=focus_text(slot),
        example_id=_example_id(slot),
        sessions="\n\n".join(session_block(s) for s in slot.sessions),
    )


def fitted(slot: Slot, fits: Callable[[str], bool]) -> Slot:
    """`slot` itself when its prompt fits the model's window; else the same slot showing only the
    turns nearest its focus turns, as many as fit. Two long sessions side by side (a multi-hop
    slot) overflow a 4,096-token window, and a prompt that cannot be sent would stop the run at the
    same slot on every resume."""
    if fits(generation_prompt(slot)):
        return slot
    longest = max(len(s.turns) for s in slot.sessions)
    narrowed = slot
    for reach in range(longest - 1, -1, -1):  # a reach of `longest` would show every turn again
        narrowed = replace(slot, sessions=tuple(_near_focus(s, slot.focus, reach) for s in slot.sessions))
        if fits(generation_prompt(narrowed)):
            return narrowed
    return narrowed


def _near_focus(session: Session, focus: Sequence[Turn], reach: int) -> Session:
    """The session's turns within `reach` turns of one of its focus turns (the middle turn when it has none)."""
    ids = [t.turn_id for t in session.turns]
    centres = [ids.index(t.turn_id) for t in focus if t.turn_id in ids] or [len(ids) // 2]
    kept = tuple(t for i, t in enumerate(session.turns) if any(abs(i - c) <= reach for c in centres))
    return replace(session, turns=kept)


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
        if answer and not is_abstention(answer, lenient=True):
            return f"an unanswerable question came with an answer ({answer!r})"
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
