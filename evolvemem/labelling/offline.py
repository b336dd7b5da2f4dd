"""The offline labeller (`--model offline`): deterministic questions from the offline extractor's
dated facts, for tests and for users without a model.

The offline extractor turns each turn into a dated memory with the places and people it names.
A name said in exactly one turn of a conversation anchors questions with one right answer:
- temporal: "When did <speaker> mention <name>?" — the date of that turn's session;
- single-hop: "Which place did <speaker> mention on <date>?" (or "Who ... ?") — the name, when it
  is the only place (person) that speaker named that day.
No model checks these: every output says they are offline labels (provenance and a printed line).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.data.dates import TIME_NAMES, format_day
from evolvemem.data.models import Conversation
from evolvemem.labelling.kinds import Candidate
from evolvemem.memory.offline_extract import OfflineExtractor

OFFLINE_KINDS = ("temporal", "single-hop")


def _surface(name: str, text: str) -> str:
    """`name` as the turn wrote it (the extractor lowercases names)."""
    found = re.search(re.escape(name), text, re.IGNORECASE)
    return found.group(0) if found else name.title()


def _names(unit: MemoryUnit, speakers: set[str]) -> list[tuple[str, str]]:
    """(name, "place" | "person") of the names a memory holds; the speakers (whole names and
    their parts) left out."""
    out = [(loc, "place") for loc in unit.locations] + [(p, "person") for p in unit.persons]
    # the rules may take a time for a place ("Wednesdays", "May")
    return [
        (n, k) for n, k in out if n.lower() not in speakers and len(n) > 2 and n.lower().rstrip("s") not in TIME_NAMES
    ]


def offline_candidates(conversation: Conversation, types: Sequence[str], per_session: int) -> list[Candidate]:
    """At most `per_session` candidates per session, in conversation order."""
    extractor = OfflineExtractor()
    units, _ = extractor.extract(conversation)
    speakers = {s.lower() for s in conversation.speakers}
    speakers |= {part for s in list(speakers) for part in s.split()}
    turns = {t.turn_id: t for t in conversation.turns()}
    said_in: dict[str, set[str]] = defaultdict(set)  # name -> turns that name it
    for unit in units:
        for name, _kind in _names(unit, speakers):
            said_in[name].update(unit.source_turn_ids)
    per_day: dict[tuple[str, str, str], set[str]] = defaultdict(set)  # (session, speaker, kind) -> names
    for unit in units:
        turn = turns[unit.source_turn_ids[0]]
        for name, kind in _names(unit, speakers):
            per_day[(turn.session_id, turn.speaker, kind)].add(name)
    out: list[Candidate] = []
    count: dict[str, int] = defaultdict(int)
    generator = {"kind": "offline", "extractor": extractor.version}
    for unit in units:
        turn = turns[unit.source_turn_ids[0]]
        if turn.timestamp is None:
            continue
        day = format_day(turn.timestamp)
        for name, kind in _names(unit, speakers):
            if len(said_in[name]) != 1:
                continue
            shown = _surface(name, turn.full_text)
            made = []
            if "temporal" in types:
                made.append(
                    Candidate(
                        conversation.conversation_id,
                        "temporal",
                        f"When did {turn.speaker} mention {shown}?",
                        day,
                        (turn.turn_id,),
                        {**generator, "rule": "date of the only turn naming it", "turn": turn.turn_id},
                    )
                )
            if "single-hop" in types and len(per_day[(turn.session_id, turn.speaker, kind)]) == 1:
                asked = "Which place" if kind == "place" else "Who"
                made.append(
                    Candidate(
                        conversation.conversation_id,
                        "single-hop",
                        f"{asked} did {turn.speaker} mention on {day}?",
                        shown,
                        (turn.turn_id,),
                        {**generator, "rule": f"the only {kind} the speaker named that day", "turn": turn.turn_id},
                    )
                )
            for candidate in made:
                if count[turn.session_id] < per_session:
                    count[turn.session_id] += 1
                    out.append(candidate)
    return out
