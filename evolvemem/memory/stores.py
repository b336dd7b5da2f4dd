"""Memory stores: the same conversation kept at more than one granularity.

`fact` is what the run's extractor produced (one memory per turn offline, atomic facts with an
LLM). Mechanisms may read other stores of the same conversation:

- `raw`        one verbatim unit per turn (AMA's raw granularity; RecMem keeps these retrievable)
- `episode`    one unit per topic segment of a session (AMA's episode granularity)
- `recurrence` RecMem's store: raw units plus episodes and facts consolidated only where a topic recurs

A non-fact store is produced by an object that follows the Extractor protocol, made by the
factory named in STORE_BUILDERS, so the memory cache (keyed by the builder's name and version)
and the indexes treat it exactly like the fact store. The workspace builds a store only when a
config needs it (`stores_needed`)."""
from __future__ import annotations

import importlib
from typing import Any

from evolvemem.data.dates import format_day
from evolvemem.data.models import Conversation
from evolvemem.memory import nlp
from evolvemem.contracts.memory import MemoryUnit, make_memory_id
from evolvemem.contracts.usage import Usage

FACT = "fact"
STORE_BUILDERS: dict[str, str] = {
    "raw": "evolvemem.memory.stores:raw_extractor",
    "episode": "evolvemem.memory.granularity:episode_extractor",
    "recurrence": "evolvemem.memory.recurrence:recurrence_extractor",
}
STORE_NAMES = (FACT, *STORE_BUILDERS)
RAW_VERSION = "raw-2"


def _relative_date_notes(text: str, turn: Any) -> list[str]:
    from evolvemem.memory.offline_extract import resolve_relative_dates

    return resolve_relative_dates(text, turn.timestamp) if turn.timestamp else []


def turn_line(turn: Any) -> str:
    """A turn as one line: speaker, what was said, and the absolute dates of its relative ones
    ("yesterday" → the day), since a stored turn is read long after the day it was said."""
    said = " ".join(turn.full_text.split())
    notes = _relative_date_notes(said, turn)
    return f"{turn.speaker}: {said}" + (f" ({'; '.join(notes)})" if notes else "")


def raw_unit(conversation_id: str, turn: Any, speakers: tuple[str, ...] = ()) -> MemoryUnit:
    """A turn as said, dated and attributed (relative dates resolved in a note); annotated so
    the structured view can read it."""
    said = turn.full_text
    prefix = f"[{format_day(turn.timestamp)}] " if turn.timestamp else ""
    content = f"{prefix}{turn_line(turn)}"
    found = nlp.annotate(said, known_persons=speakers)
    speaker = turn.speaker.lower()
    persons = found.persons if speaker in found.persons else (speaker, *found.persons)
    return MemoryUnit(
        memory_id=make_memory_id(conversation_id, content, salt="raw:" + turn.turn_id),
        conversation_id=conversation_id,
        content=content,
        memory_type="episodic",
        session_id=turn.session_id,
        source_turn_ids=(turn.turn_id,),
        timestamp=turn.timestamp,
        persons=persons,
        locations=found.locations,
        entities=found.entities,
        topics=found.topics,
        keywords=found.keywords,
    )


def raw_units(conversation: Conversation, turn_ids: set[str] | None = None) -> list[MemoryUnit]:
    """One raw unit per turn (or per turn in `turn_ids`), in conversation order."""
    speakers = tuple(conversation.speakers)
    return [raw_unit(conversation.conversation_id, turn, speakers) for turn in conversation.turns()
            if turn_ids is None or turn.turn_id in turn_ids]


class RawTurnExtractor:
    """The `raw` store: no model, nothing summarised or dropped."""

    name = "raw"

    def __init__(self) -> None:
        from evolvemem.memory.offline_extract import OfflineExtractor

        self.version = f"{RAW_VERSION}-{OfflineExtractor().version}"  # the date-note rules live there

    def extract(self, conversation: Conversation, turn_ids: set[str] | None = None) -> tuple[list[MemoryUnit], Usage]:
        return raw_units(conversation, turn_ids), Usage()


def raw_extractor(roles: Any, embedder: Any) -> RawTurnExtractor:
    return RawTurnExtractor()


def store_extractor(name: str, roles: Any, embedder: Any) -> Any:
    """The Extractor that builds store `name` (the run's own extractor for `fact`)."""
    if name == FACT:
        return roles.extractor
    if name not in STORE_BUILDERS:
        raise ValueError(f"unknown memory store {name!r} (known: {', '.join(STORE_NAMES)})")
    module, function = STORE_BUILDERS[name].split(":")
    return getattr(importlib.import_module(module), function)(roles, embedder)


def base_store(effective: Any) -> str:
    """The store a question's main retrieval reads under its effective config."""
    return "recurrence" if getattr(effective, "consolidation_policy", "eager") == "recurrence" else FACT


def granularity_stores(effective: Any) -> set[str]:
    """Stores AMA's granularity routing and judge retries may read under one effective config."""
    granularity = getattr(effective, "memory_granularity", FACT)
    if granularity == "routed" or getattr(effective, "judge_retries", 0) > 0:
        return {"raw", "episode"}
    return {granularity} if granularity in ("raw", "episode") else set()


def stores_needed(config: Any) -> set[str]:
    """Every store some question type may read under `config` (global values and overrides)."""
    needed: set[str] = set()
    for question_type in (None, *config.overrides()):
        effective = config.for_type(question_type)
        needed.add(base_store(effective))
        needed |= granularity_stores(effective)
    return needed
