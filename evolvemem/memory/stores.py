"""Memory stores: the same conversation kept at more than one granularity.

`fact` is what the run's extractor produced (one memory per turn offline, atomic facts with an
LLM). Mechanisms may read other stores of the same conversation:

- `raw`        one verbatim unit per turn (AMA's raw granularity; RecMem keeps these retrievable)
- `episode`    one unit per topic segment of a session (AMA's episode granularity)
- `recurrence` RecMem's store: raw units plus episodes and facts consolidated only where a topic recurs

A non-fact store is produced by an object that follows the Extractor protocol, made by the
factory named in STORE_BUILDERS (called with the extraction model's client and the sentence
encoder), so the memory cache (keyed by the builder's name and version) and the indexes treat it
exactly like the fact store. Which stores a config reads is declared by the modules owning the
settings (evolvemem/answering/stores.py); the session builds them before evaluating."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from evolvemem.contracts.vocab import StoreKind
from evolvemem.contracts.memory import MemoryUnit, make_memory_id
from evolvemem.contracts.roles import Extractor
from evolvemem.contracts.usage import Usage
from evolvemem.data.dates import format_day
from evolvemem.data.models import Conversation, Turn
from evolvemem.memory import nlp
from evolvemem.memory.offline_extract import OfflineExtractor, resolve_relative_dates

if TYPE_CHECKING:
    from evolvemem.contracts.roles import TextEncoder
    from evolvemem.llm.client import LLMClient

FACT, RAW = StoreKind.FACT, StoreKind.RAW
STORE_BUILDERS: dict[str, str] = {
    RAW: "evolvemem.memory.stores:raw_extractor",
    StoreKind.EPISODE: "evolvemem.memory.granularity:episode_extractor",
    StoreKind.RECURRENCE: "evolvemem.memory.recurrence:recurrence_extractor",
}
STORE_NAMES = (FACT, *STORE_BUILDERS)
RAW_VERSION = "raw-2"


def _relative_date_notes(text: str, turn: Turn) -> list[str]:
    return resolve_relative_dates(text, turn.timestamp) if turn.timestamp else []


def turn_line(turn: Turn) -> str:
    """A turn as one line: speaker, what was said, and the absolute dates of its relative ones
    ("yesterday" → the day), since a stored turn is read long after the day it was said."""
    said = " ".join(turn.full_text.split())
    notes = _relative_date_notes(said, turn)
    return f"{turn.speaker}: {said}" + (f" ({'; '.join(notes)})" if notes else "")


def raw_unit(conversation_id: str, turn: Turn, speakers: tuple[str, ...] = ()) -> MemoryUnit:
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
    return [
        raw_unit(conversation.conversation_id, turn, speakers)
        for turn in conversation.turns()
        if turn_ids is None or turn.turn_id in turn_ids
    ]


class RawTurnExtractor:
    """The `raw` store: no model, nothing summarised or dropped."""

    name = "raw"

    def __init__(self) -> None:
        self.version = f"{RAW_VERSION}-{OfflineExtractor().version}"  # the date-note rules live there

    def extract(self, conversation: Conversation, turn_ids: set[str] | None = None) -> tuple[list[MemoryUnit], Usage]:
        return raw_units(conversation, turn_ids), Usage()


def raw_extractor(client: LLMClient | None, encoder: TextEncoder) -> RawTurnExtractor:
    return RawTurnExtractor()


def store_extractor(name: str, client: LLMClient | None, encoder: TextEncoder) -> Extractor:
    """The Extractor that builds store `name` (not `fact`: that is the run's own extractor)."""
    if name not in STORE_BUILDERS:
        raise ValueError(f"unknown memory store {name!r} (known: {', '.join(STORE_NAMES)})")
    module, function = STORE_BUILDERS[name].split(":")
    extractor: Extractor = getattr(importlib.import_module(module), function)(client, encoder)
    return extractor
