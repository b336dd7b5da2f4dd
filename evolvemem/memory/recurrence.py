"""Recurrence-gated consolidation (after RecMem): extract only where a topic comes back.

Eager extraction sends every turn of a conversation to the extractor. RecMem's observation is
that most turns are never asked about again, while a topic that keeps recurring is worth the
cost of consolidating. So here every turn stays retrievable as a raw unit, and the extractor is
called only when recurrence justifies it. Turns are read in time order:

1. A new turn whose embedding has cosine > `merge_sim` with an existing episode's centroid
   joins that episode: the episode gains the turn as a source, and *semantic refinement* adds
   the facts of the turn the episode does not hold yet (LLM: prompts/refine.md; offline: the
   offline extractor's fact for the turn when its token Jaccard with every fact already in the
   episode is < FACT_NOVELTY). No extraction call.
2. Otherwise, when it has at least `theta_count` neighbours with cosine ≥ `theta_sim` among the
   turns not consolidated yet, ONE extraction call turns it and those neighbours into an episode
   (LLM: prompts/recurrence_episode.md, a third-person narrative plus atomic facts; offline: a
   dated digest of the turns plus the offline extractor's facts), and they count as consolidated.
3. Otherwise it waits, unconsolidated, as a raw unit only.

Which turns form which episode depends on the embeddings alone, so the whole schedule is planned
first (`plan_recurrence`, pure numpy) and the model calls run afterwards, one thread per
episode. An episode's text is written when it is formed; turns merged later reach it as refined
facts and as sources. An LLM failure falls back to the offline variant for that cluster or turn
and is recorded; the build never fails because of the model.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from evolvemem.contracts.vocab import StoreKind
from evolvemem.data.dates import format_day
from evolvemem.data.models import Conversation, Turn
from evolvemem.memory import nlp
from evolvemem.memory.consolidate import jaccard
from evolvemem.memory.llm_extract import format_turn, memory_from_item
from evolvemem.memory.offline_extract import OfflineExtractor
from evolvemem.memory.stores import RAW_VERSION, raw_units
from evolvemem.contracts.memory import MemoryUnit, make_memory_id
from evolvemem.prompts import load_prompt
from evolvemem.contracts.usage import Usage

if TYPE_CHECKING:
    from evolvemem.contracts.roles import TextEncoder
    from evolvemem.llm.client import LLMClient
    from evolvemem.space.config import RetrievalConfig

log = logging.getLogger(__name__)

MERGE_SIM = 0.75  # cosine with an episode centroid above which a turn joins that episode
THETA_SIM = 0.70  # cosine at which two unconsolidated turns count as the same recurring topic
THETA_COUNT = 5  # neighbours a turn needs among the unconsolidated turns to trigger extraction
FACT_NOVELTY = 0.5  # a fact is new when its token Jaccard with every held fact is below this
DIGEST_WORDS = 16  # words of each turn kept in the offline episode digest
PLAN_BLOCK = 512  # turns whose cosines with all earlier turns are computed in one matrix product
ROLE = "extract"
EPISODE_PROMPT = "recurrence_episode"
REFINE_PROMPT = "refine"


# ------------------------------------------------------------------------------ planning
@dataclass
class PlannedEpisode:
    """Positions (in the processed turn list) of one episode's turns."""

    cluster: list[int]  # consolidated together by one extraction call, in time order
    merged: list[int] = field(default_factory=list)  # merged afterwards, in arrival order

    @property
    def positions(self) -> list[int]:
        return [*self.cluster, *self.merged]


@dataclass
class RecurrencePlan:
    episodes: list[PlannedEpisode]
    pending: list[int]  # turns never consolidated (raw units only)


def plan_recurrence(
    vectors: np.ndarray, merge_sim: float = MERGE_SIM, theta_sim: float = THETA_SIM, theta_count: int = THETA_COUNT
) -> RecurrencePlan:
    """The merge / consolidate / wait decision for each turn, in order, from unit-length vectors."""
    n = len(vectors)
    if n == 0:
        return RecurrencePlan([], [])
    vectors = np.asarray(vectors, dtype=np.float32)
    pending = np.zeros(n, dtype=bool)
    sums = np.zeros_like(vectors, dtype=np.float64)
    centroids = np.zeros_like(vectors)
    episodes: list[PlannedEpisode] = []
    for i in range(n):
        if i % PLAN_BLOCK == 0:  # cosines with all earlier turns, a block of rows at a time (bounded memory)
            block = vectors[i : i + PLAN_BLOCK] @ vectors[: i + PLAN_BLOCK].T
        if episodes:
            sims = centroids[: len(episodes)] @ vectors[i]
            best = int(np.argmax(sims))
            if sims[best] > merge_sim:
                episodes[best].merged.append(i)
                _add_to_centroid(sums, centroids, best, vectors[i])
                continue
        neighbours = np.flatnonzero(pending[:i] & (block[i % PLAN_BLOCK, :i] >= theta_sim))
        if len(neighbours) >= theta_count:
            pending[neighbours] = False
            episode = len(episodes)
            episodes.append(PlannedEpisode(cluster=[*neighbours.tolist(), i]))
            for row in episodes[-1].cluster:
                _add_to_centroid(sums, centroids, episode, vectors[row])
            continue
        pending[i] = True
    return RecurrencePlan(episodes, np.flatnonzero(pending).tolist())


def _add_to_centroid(sums: np.ndarray, centroids: np.ndarray, episode: int, vector: np.ndarray) -> None:
    sums[episode] += vector
    centroids[episode] = sums[episode] / max(float(np.linalg.norm(sums[episode])), 1e-12)


# ------------------------------------------------------------------------------ results
@dataclass
class RecurrenceStats:
    """What consolidating one conversation took. Offline, `extraction_calls`/`refinement_calls`
    are the calls an LLM variant would have made and `prompt_tokens` the whitespace words of the
    prompts it would have been sent; with an LLM, tokens are the billed ones (re-asks included)."""

    turns: int = 0
    episodes: int = 0
    turns_consolidated: int = 0
    merges: int = 0
    extraction_calls: int = 0
    refinement_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    facts: int = 0
    fallbacks: int = 0  # LLM calls that failed and were replaced by the offline variant
    units: int = 0

    @property
    def calls(self) -> int:
        return self.extraction_calls + self.refinement_calls


@dataclass
class _EpisodeOutcome:
    text: str = ""
    facts: list[MemoryUnit] = field(default_factory=list)
    cost: Usage = field(default_factory=Usage)
    prompt_words: int = 0  # offline: words of the prompts an LLM would have been sent
    refinement_calls: int = 0
    fallbacks: int = 0
    failures: list[str] = field(default_factory=list)


def _words(text: str) -> int:
    return len(text.split())


def _fact_tokens(unit: MemoryUnit) -> set[str]:
    return set(nlp.tokenize(unit.content))


def novel_facts(
    candidates: Sequence[MemoryUnit], held: Sequence[MemoryUnit], threshold: float = FACT_NOVELTY
) -> list[MemoryUnit]:
    """The candidates whose token Jaccard with every held fact (and every earlier new one) is below `threshold`."""
    kept: list[MemoryUnit] = []
    seen = [_fact_tokens(u) for u in held]
    for unit in candidates:
        tokens = _fact_tokens(unit)
        if all(jaccard(tokens, other) < threshold for other in seen):
            kept.append(unit)
            seen.append(tokens)
    return kept


def digest(turns: Sequence[Turn]) -> str:
    """Offline episode text: the date span, then each turn shortened, dated where the day changes."""
    days = [format_day(t.timestamp) for t in turns if t.timestamp]
    span = "" if not days else f", {days[0]}" if days[0] == days[-1] else f", {days[0]} to {days[-1]}"
    parts, last_day = [], None
    for turn in turns:
        words = turn.full_text.split()
        said = " ".join(words[:DIGEST_WORDS]) + (" …" if len(words) > DIGEST_WORDS else "")
        day = format_day(turn.timestamp) if turn.timestamp else None
        parts.append(f"{f'[{day}] ' if day and day != last_day else ''}{turn.speaker}: {said}")
        last_day = day or last_day
    return f"Recurring topic ({len(turns)} turns{span}): " + " | ".join(parts)


# ------------------------------------------------------------------------------ extractor
class RecurrenceExtractor:
    """Extractor protocol: raw units for every turn, episodes and facts where a topic recurs.

    `client` is an `LLMClient` (evolvemem/llm/client.py) or None for the offline variant.
    `stats[conversation_id]` and `failures[conversation_id]` describe the last extraction."""

    def __init__(
        self,
        embedder: Any,
        client: Any = None,
        *,
        merge_sim: float = MERGE_SIM,
        theta_sim: float = THETA_SIM,
        theta_count: int = THETA_COUNT,
        max_workers: int = 4,
        episode_max_tokens: int = 2048,
        refine_max_tokens: int = 512,
    ):
        if not (0 < theta_sim <= 1 and 0 < merge_sim <= 1 and theta_count >= 1):
            raise ValueError(
                f"need 0 < theta_sim, merge_sim <= 1 and theta_count >= 1 (got {theta_sim}, {merge_sim}, {theta_count})"
            )
        self.embedder = embedder
        self.client = client
        self.merge_sim, self.theta_sim, self.theta_count = merge_sim, theta_sim, theta_count
        self.max_workers = max(1, max_workers)
        self.episode_max_tokens, self.refine_max_tokens = episode_max_tokens, refine_max_tokens
        self.episode_prompt = load_prompt(EPISODE_PROMPT)
        self.refine_prompt = load_prompt(REFINE_PROMPT)
        self.offline = OfflineExtractor()
        self.model = str(client.model) if client is not None else ""
        self.name = f"recurrence-llm:{self.model}" if client is not None else "recurrence-offline"
        embedding_model = getattr(embedder, "model_name", type(embedder).__name__)
        self.version = (
            f"m{merge_sim:g}-s{theta_sim:g}-c{theta_count}-n{FACT_NOVELTY:g}-d{DIGEST_WORDS}"
            f"-{self.episode_prompt.version}-{self.refine_prompt.version}-{self.offline.version}"
            f"-{embedding_model}-{RAW_VERSION}"
        )
        self.stats: dict[str, RecurrenceStats] = {}
        self.failures: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------ protocol
    def extract(self, conversation: Conversation, turn_ids: set[str] | None = None) -> tuple[list[MemoryUnit], Usage]:

        turns = [t for t in conversation.turns() if turn_ids is None or t.turn_id in turn_ids]
        vectors = self.embedder.encode([t.full_text for t in turns]) if turns else np.zeros((0, 1), np.float32)
        plan = plan_recurrence(vectors, self.merge_sim, self.theta_sim, self.theta_count)
        episodes = [([turns[i] for i in e.cluster], [turns[i] for i in e.merged]) for e in plan.episodes]
        workers = min(self.max_workers, len(episodes)) if self.client is not None else 1
        if workers > 1:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                outcomes = list(pool.map(lambda e: self._consolidate(conversation, *e), episodes))
        else:
            outcomes = [self._consolidate(conversation, *e) for e in episodes]

        units = raw_units(conversation, turn_ids)
        seen = {u.content for u in units}
        stats = RecurrenceStats(
            turns=len(turns),
            episodes=len(episodes),
            turns_consolidated=sum(len(e.positions) for e in plan.episodes),
            merges=sum(len(e.merged) for e in plan.episodes),
            extraction_calls=len(episodes),
        )
        cost = Usage()
        failures: list[str] = []
        for planned, outcome in zip(plan.episodes, outcomes):
            sources = tuple(turns[i].turn_id for i in sorted(planned.positions))
            units.append(self._episode_unit(conversation, outcome.text, turns[planned.cluster[0]], sources))
            for fact in outcome.facts:
                if fact.content not in seen:
                    seen.add(fact.content)
                    units.append(fact)
                    stats.facts += 1
            cost = cost + outcome.cost
            stats.refinement_calls += outcome.refinement_calls
            stats.prompt_tokens += outcome.cost.prompt_tokens + outcome.prompt_words
            stats.completion_tokens += outcome.cost.completion_tokens
            stats.fallbacks += outcome.fallbacks
            failures.extend(outcome.failures)
        stats.units = len(units)
        with self._lock:
            self.stats[conversation.conversation_id] = stats
            self.failures[conversation.conversation_id] = failures
        if failures:
            log.warning(
                "%s: %d model calls for %s failed; their offline variant was used",
                self.name,
                len(failures),
                conversation.conversation_id,
            )
        return units, cost

    # ------------------------------------------------------------------------------ one episode
    def _consolidate(self, conversation: Conversation, cluster: list[Turn], merged: list[Turn]) -> _EpisodeOutcome:
        """One extraction for the cluster, then one refinement per merged turn, in order."""
        outcome = _EpisodeOutcome()
        speakers = ", ".join(conversation.speakers) or "(unknown)"
        prompt = self.episode_prompt.render(speakers=speakers, turns="\n".join(format_turn(t) for t in cluster))
        reply = self._ask(prompt, self.episode_max_tokens, outcome) if self.client is not None else None
        parsed = self._parse_episode(reply, conversation, cluster, outcome) if reply is not None else None
        if parsed is None:
            outcome.prompt_words += _words(prompt) if self.client is None else 0
            outcome.text = digest(cluster)
            outcome.facts = [self._offline_fact(conversation, t) for t in cluster]
        else:
            outcome.text, outcome.facts = parsed
        for turn in merged:
            outcome.facts.extend(self._refine(conversation, speakers, outcome.facts, turn, outcome))
        return outcome

    def _refine(
        self, conversation: Conversation, speakers: str, held: list[MemoryUnit], turn: Turn, outcome: _EpisodeOutcome
    ) -> list[MemoryUnit]:
        """The facts of `turn` the episode does not hold yet."""
        outcome.refinement_calls += 1
        listed = "\n".join(f"{i}. {u.content}" for i, u in enumerate(held, start=1)) or "(none)"
        prompt = self.refine_prompt.render(speakers=speakers, facts=listed, turn=format_turn(turn))
        if self.client is not None:
            reply = self._ask(prompt, self.refine_max_tokens, outcome)
            items = self._items(reply, "facts", outcome) if reply is not None else None
            if items is not None:
                found = [
                    u
                    for item in items
                    if (u := self._fact_unit(item, conversation, {turn.turn_id: turn}, turn)) is not None
                ]
                return novel_facts(found, held)
        else:
            outcome.prompt_words += _words(prompt)
        return novel_facts([self._offline_fact(conversation, turn)], held)

    # ------------------------------------------------------------------------------ model calls
    def _ask(self, prompt: str, max_tokens: int, outcome: _EpisodeOutcome) -> Any | None:
        """The parsed JSON reply, or None after a failure (recorded, its cost still billed)."""
        from evolvemem.llm.client import LLMCallFailed, LLMJSONError

        try:
            parsed, reply = self.client.complete_json(
                [{"role": "user", "content": prompt}], role=ROLE, temperature=0.0, max_tokens=max_tokens
            )
        except LLMCallFailed as exc:
            if isinstance(exc, LLMJSONError):
                outcome.cost = outcome.cost + exc.reply.as_cost()
            self._failed(outcome, str(exc))
            return None
        outcome.cost = outcome.cost + reply.as_cost()
        return parsed

    def _failed(self, outcome: _EpisodeOutcome, message: str) -> None:
        outcome.fallbacks += 1
        outcome.failures.append(message)

    def _items(self, parsed: Any, key: str, outcome: _EpisodeOutcome) -> list[object] | None:
        items = parsed.get(key) if isinstance(parsed, dict) else None
        if not isinstance(items, list):
            self._failed(outcome, f"{self.name}: reply has no {key!r} list")
            return None
        return items

    def _parse_episode(
        self, parsed: Any, conversation: Conversation, cluster: list[Turn], outcome: _EpisodeOutcome
    ) -> tuple[str, list[MemoryUnit]] | None:
        items = self._items(parsed, "facts", outcome)
        text = str(parsed.get("episode") or "").strip() if isinstance(parsed, dict) else ""
        if items is None:
            return None
        if not text:
            self._failed(outcome, f"{self.name}: reply has no 'episode' text")
            return None
        allowed = {t.turn_id: t for t in cluster}
        facts = [u for item in items if (u := self._fact_unit(item, conversation, allowed)) is not None]
        return text, facts

    # ------------------------------------------------------------------------------ units
    def _fact_unit(
        self, item: Any, conversation: Conversation, allowed: dict[str, Turn], default_turn: Turn | None = None
    ) -> MemoryUnit | None:
        """A semantic unit from one reply item (a refinement's facts all come from its one new
        turn, `default_turn`)."""
        return memory_from_item(
            item,
            conversation,
            allowed,
            salt="recurrence-fact",
            memory_type="semantic",
            sources=(default_turn.turn_id,) if default_turn is not None else (),
        )

    def _offline_fact(self, conversation: Conversation, turn: Turn) -> MemoryUnit:
        unit = self.offline.memory_for_turn(conversation.conversation_id, turn, tuple(conversation.speakers))
        return unit.evolve(memory_type="semantic")

    @staticmethod
    def _episode_unit(conversation: Conversation, text: str, first: Turn, sources: tuple[str, ...]) -> MemoryUnit:
        found = nlp.annotate(text, conversation.speakers)
        return MemoryUnit(
            memory_id=make_memory_id(conversation.conversation_id, text, salt="recurrence-episode"),
            conversation_id=conversation.conversation_id,
            content=text,
            memory_type="episodic",
            session_id=first.session_id,
            source_turn_ids=sources,
            timestamp=first.timestamp,
            importance=0.6,
            persons=found.persons,
            locations=found.locations,
            entities=found.entities,
            topics=found.topics,
            keywords=found.keywords,
        )


def recurrence_extractor(client: LLMClient | None, encoder: TextEncoder) -> RecurrenceExtractor:
    """Store builder for STORE_BUILDERS["recurrence"]: the LLM variant when the extract role has a model."""
    return RecurrenceExtractor(encoder, client=client)


RECURRENCE = StoreKind.RECURRENCE  # the store's name (memory/stores.py: STORE_BUILDERS)
OWNS = ("consolidation_policy",)


def stores_for(effective: RetrievalConfig) -> set[str]:
    """`consolidation_policy = recurrence` makes RecMem's store the base store."""
    return {RECURRENCE} if effective.consolidation_policy == RECURRENCE else set()
