"""A user's memory as a benchmark conversation: the turns added so far, in sessions.

Evaluation reads `Conversation`s; so does the serving path, so that extraction, consolidation and
retrieval see a user's turns exactly as they would see the same conversation in a benchmark file
(sessions in the order they first appeared, turns in the order they were added, a session dated
by its first dated turn, speakers in order of speaking).
"""

from __future__ import annotations

from datetime import datetime
from typing import Sequence

from evolvemem.data.dates import parse_iso_datetime
from evolvemem.data.models import Conversation, Session, Turn
from evolvemem.errors import EvolveMemError
from evolvemem.serving.models import TurnIn, blank
from evolvemem.serving.store import StoredTurn

DEFAULT_SESSION = "session-1"


def to_turn(stored: StoredTurn, session_date: datetime | None) -> Turn:
    at = parse_iso_datetime(stored.at) if stored.at else None
    return Turn(
        turn_id=stored.turn_id,
        speaker=stored.speaker,
        text=stored.text,
        session_id=stored.session_id,
        timestamp=at or session_date,
        image_caption=stored.image_caption,
    )


def build_conversation(conversation_id: str, turns: Sequence[StoredTurn]) -> Conversation:
    """The conversation of stored turns (in the order they were stored)."""
    order: dict[str, list[StoredTurn]] = {}
    for stored in turns:
        order.setdefault(stored.session_id, []).append(stored)
    sessions = []
    speakers: dict[str, None] = {}
    for session_id, members in order.items():
        date = next((parse_iso_datetime(t.at) for t in members if t.at), None)
        sessions.append(Session(session_id, date, tuple(to_turn(t, date) for t in members)))
        speakers.update(dict.fromkeys(t.speaker for t in members))
    return Conversation(conversation_id, tuple(sessions), tuple(speakers))


def new_turns(
    existing: Sequence[StoredTurn], turns: Sequence[TurnIn], session: str | None, at: datetime | None
) -> tuple[list[StoredTurn], list[str]]:
    """The turns of an add as they will be stored, and the given ids already stored (skipped).

    A turn's session is its own, else the add's, else the user's last session (the first one
    is DEFAULT_SESSION); its date is its own, else the add's. Ids default to <session>:<n>."""
    taken = {t.turn_id for t in existing}
    per_session: dict[str, int] = {}
    for t in existing:
        per_session[t.session_id] = per_session.get(t.session_id, 0) + 1
    last_session = existing[-1].session_id if existing else DEFAULT_SESSION
    out: list[StoredTurn] = []
    skipped: list[str] = []
    for turn in turns:
        session_id = turn.session or session or last_session
        when = turn.at or at
        if turn.id is not None and turn.id in taken:
            skipped.append(turn.id)
            continue
        per_session[session_id] = per_session.get(session_id, 0) + 1
        turn_id = turn.id
        if turn_id is None:
            number = per_session[session_id]
            turn_id = f"{session_id}:{number}"
            while turn_id in taken:  # a given id took the default name
                number += 1
                turn_id = f"{session_id}:{number}"
        if blank(turn.text) and not turn.image_caption:  # TurnIn refuses it too; a turn built otherwise
            raise EvolveMemError(f"turn {turn_id!r}: empty text")
        taken.add(turn_id)
        out.append(
            StoredTurn(
                turn_id, session_id, turn.speaker, turn.text, turn.image_caption, when.isoformat() if when else None
            )
        )
    return out, skipped
