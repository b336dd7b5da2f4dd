"""The `episode` memory store (AMA's coarse granularity): one unit per topic segment of a session.

Why: some questions ("what happened at …", "how did she feel about …", "why did he …") are
answered by an exchange, not by one turn or one atomic fact. An episode keeps the exchange
together, so retrieval that finds one half of it brings the other half along.

Segmentation (offline, no model): each session's turns are embedded and cut where the cosine of
neighbouring turns falls clearly below the session's usual neighbour similarity
(mean − CUT_STD · std of that session's neighbour cosines). The threshold is relative, so it
holds for embedders whose cosines run high or low; no segment is shorter than MIN_SEGMENT
turns (a short tail joins the segment before it) or longer than MAX_SEGMENT.

Text: offline, a dated digest of the segment's turns (`narrative.dated_digest`), with relative
dates resolved in notes; with an extraction model, a third-person narrative written by
`narrative.narrate_episode`. A segment whose narration failed keeps the digest and is reported
in `failed_turns`, so the memory cache does not freeze the fallback.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from evolvemem.contracts.memory import MemoryUnit, make_memory_id
from evolvemem.contracts.usage import Usage
from evolvemem.data.dates import format_day
from evolvemem.data.models import Conversation, Turn
from evolvemem.memory import narrative, nlp, offline_extract
from evolvemem.memory.narrative import dated_digest, narrate_episode
from evolvemem.memory.stores import turn_line
from evolvemem.prompts import load_prompt

if TYPE_CHECKING:
    from evolvemem.contracts.roles import TextEncoder
    from evolvemem.llm.client import LLMClient

CUT_STD = 1.0  # a segment ends where neighbour cosine < session mean − CUT_STD · std
MIN_SEGMENT = 2  # turns per segment at least (unless the session is shorter)
MAX_SEGMENT = 8  # turns per segment at most: a long single-topic run is still split
NARRATION_CONCURRENCY = 8  # narratives written at once with a model
# One topic segment to narrate: its turns as lines, its date, and that date as people write it.
_Plan = tuple[list[str], datetime | None, str | None]


def topic_segments(
    vectors: np.ndarray, *, cut_std: float = CUT_STD, min_len: int = MIN_SEGMENT, max_len: int = MAX_SEGMENT
) -> list[list[int]]:
    """Positions 0..n-1 of time-ordered unit vectors, cut into runs at topic shifts.

    A cut falls between neighbours whose cosine is below mean − cut_std · std of all neighbour
    cosines (needs at least two of them), once the current run has `min_len` items; a run is
    also cut at `max_len`. A final run shorter than `min_len` joins the one before it."""
    n = len(vectors)
    if n == 0:
        return []
    neighbour = np.einsum("ij,ij->i", vectors[:-1], vectors[1:]) if n > 1 else np.zeros(0)
    threshold = neighbour.mean() - cut_std * neighbour.std() if len(neighbour) >= 2 else -np.inf
    runs: list[list[int]] = [[0]]
    for position, similarity in enumerate(neighbour.tolist(), start=1):
        current = runs[-1]
        if (similarity < threshold and len(current) >= min_len) or len(current) >= max_len:
            runs.append([])
        runs[-1].append(position)
    if len(runs) > 1 and len(runs[-1]) < min_len:
        runs[-2].extend(runs.pop())
    return runs


def _rules_version(*extra: str) -> str:
    """Hash of the code that writes episodes (this module, the digest and the date notes)."""

    digest = hashlib.sha256()
    for path in (__file__, narrative.__file__, offline_extract.__file__):
        digest.update(Path(path).read_bytes())
    for part in extra:
        digest.update(part.encode("utf-8"))
    return digest.hexdigest()[:12]


class EpisodeExtractor:
    """Extractor protocol for the `episode` store (see the module docstring).

    `client` is the extraction role's LLMClient (narratives) or None (digests)."""

    def __init__(self, embedder: Any, client: Any = None):
        self.embedder = embedder
        self.client = client
        self.model = getattr(client, "model", "") if client is not None else ""
        self.name = "episode-llm" if client is not None else "episode"
        extra = [str(getattr(embedder, "model_name", ""))]  # segmentation depends on the embedder
        if client is not None:
            extra.append(load_prompt("episode").version)
        self.version = "episode-" + _rules_version(*extra)
        self.failed_turns: dict[str, set[str]] = {}

    def segments(self, conversation: Conversation, turn_ids: set[str] | None = None) -> list[list[Turn]]:
        """Each session's turns (only `turn_ids` when given) cut into topic segments, in order."""
        sessions = [[t for t in s.turns if turn_ids is None or t.turn_id in turn_ids] for s in conversation.sessions]
        sessions = [turns for turns in sessions if turns]
        # what was said, without speaker or date: those would make same-speaker turns look alike
        texts = [t.full_text for turns in sessions for t in turns]
        vectors = self.embedder.encode(texts) if texts else np.zeros((0, 1), np.float32)
        out: list[list[Turn]] = []
        start = 0
        for turns in sessions:
            session_vectors = vectors[start : start + len(turns)]
            start += len(turns)
            out.extend([turns[i] for i in run] for run in topic_segments(session_vectors))
        return out

    def extract(self, conversation: Conversation, turn_ids: set[str] | None = None) -> tuple[list[MemoryUnit], Usage]:
        self.failed_turns.pop(conversation.conversation_id, None)
        speakers = tuple(conversation.speakers)
        units: list[MemoryUnit] = []
        cost = Usage()
        segments = self.segments(conversation, turn_ids)
        plans: list[_Plan] = []
        for segment in segments:
            when = next((t.timestamp for t in segment if t.timestamp), None)
            plans.append(([turn_line(t) for t in segment], when, format_day(when) if when else None))

        def write(plan: _Plan) -> tuple[str, Usage]:
            return narrate_episode(self.client, plan[0], plan[2])

        if self.client is not None and len(plans) > 1:  # model calls wait on the network: overlap them
            with ThreadPoolExecutor(max_workers=NARRATION_CONCURRENCY) as pool:
                written = list(pool.map(write, plans))
        else:
            written = [write(plan) for plan in plans]
        for segment, (lines, when, day), (text, paid) in zip(segments, plans, written):
            cost = cost + paid
            if self.client is not None and text == dated_digest(lines, day):
                self.failed_turns.setdefault(conversation.conversation_id, set()).update(t.turn_id for t in segment)
            units.append(episode_unit(conversation.conversation_id, segment, text, when, speakers))
        return units, cost


def episode_unit(
    conversation_id: str, segment: Sequence[Turn], text: str, when: Any, speakers: tuple[str, ...]
) -> MemoryUnit:
    """One episode memory: its text, annotated, traced to every turn of its segment."""
    found = nlp.annotate(text, known_persons=speakers)
    in_segment = tuple(dict.fromkeys(t.speaker.lower() for t in segment))
    persons = tuple(dict.fromkeys(in_segment + tuple(found.persons)))
    return MemoryUnit(
        memory_id=make_memory_id(conversation_id, text, salt="episode:" + segment[0].turn_id),
        conversation_id=conversation_id,
        content=" ".join(text.split()),
        memory_type="episodic",
        session_id=segment[0].session_id,
        source_turn_ids=tuple(t.turn_id for t in segment),
        timestamp=when,
        persons=persons,
        locations=found.locations,
        entities=found.entities,
        topics=found.topics,
        keywords=found.keywords,
    )


def episode_extractor(client: LLMClient | None, encoder: TextEncoder) -> EpisodeExtractor:
    """STORE_BUILDERS factory: narratives with the extraction model, digests without one."""
    return EpisodeExtractor(encoder, client)
