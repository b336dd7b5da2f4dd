"""The LLM extractor: windows of turns in, self-contained dated memories out.

A conversation is cut into windows of `window` turns; each prompt also shows the `overlap` turns
before its window as context, so a memory can draw on what was just said. A window whose call
keeps failing, or that overflows the model's context, is split into `sub_window`-turn pieces.
After each window a keyword coverage check looks for turns whose content words appear in no
memory and re-extracts just those turns (one extra call per window at most). Whatever succeeds
is kept; turns that could not be extracted are reported in `failed_turns`.
"""

from __future__ import annotations

import logging
import math
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from evolvemem.contracts.memory import MEMORY_TYPES, MemoryUnit, make_memory_id
from evolvemem.contracts.usage import Usage
from evolvemem.data.dates import format_day, parse_iso_datetime
from evolvemem.data.models import Conversation, Turn
from evolvemem.llm.budget import ask_fitted, fit_prompt
from evolvemem.llm.client import LLMCallFailed, LLMJSONError, PromptTooLong
from evolvemem.memory import nlp
from evolvemem.memory.offline_extract import OfflineExtractor
from evolvemem.prompts import load_prompt

log = logging.getLogger(__name__)

ROLE = "extract"
FOCUS_NOTE = (
    "\nA first pass wrote no memory for most of what these turns say. Write memories for every fact, "
    "event, name, number and date in them.\n"
)
_TYPE_ALIASES = {
    "event": "episodic",
    "fact": "semantic",
    "plan": "episodic",
    "opinion": "preference",
    "like": "preference",
    "project": "project_state",
    "state": "project_state",
}
_NOT_CONTENT = frozenset(
    "yesterday today tomorrow tonight week weekend month year years ago last next recently soon later "
    "really think know feel guess glad happy thing things stuff something anything everything sounds "
    "shares photo".split()
)
# A reply needs about one short memory per turn; a budget sized to the window's turns keeps a small
# model that loops (repeating memories until the limit) from generating thousands of tokens.
REPLY_TOKENS_BASE, REPLY_TOKENS_PER_TURN = 200, 120
MIN_REPLY_TOKENS = 512  # room for a handful of memories in JSON
_OVERFLOW_RE = re.compile(r"context.?(length|window)|too long|maximum.{0,30}tokens|token limit|too many tokens", re.I)


class _WindowFailed(Exception):
    """All attempts at one window failed; `overflow` means splitting will help, retrying would not.
    `unusable_reply`: the model answered, but not with usable JSON; the same request at temperature 0
    gets the same reply, so it is not repeated (a smaller window is a different request)."""

    def __init__(self, message: str, overflow: bool = False, unusable_reply: bool = False):
        super().__init__(message)
        self.overflow = overflow
        self.unusable_reply = unusable_reply


@dataclass
class _Outcome:
    units: list[MemoryUnit] = field(default_factory=list)
    cost: Usage = field(default_factory=Usage)
    failed: set[str] = field(default_factory=set)


def format_turn(turn: Turn) -> str:
    when = f" ({format_day(turn.timestamp)})" if turn.timestamp else ""
    return f"[{turn.turn_id}]{when} {turn.speaker}: {turn.full_text}"


def turn_keywords(turn: Turn, speakers: Sequence[str]) -> set[str]:
    """Content words a memory of this turn should mention, as 5-letter prefixes (a crude stem).

    Speaker names and relative-time or filler words are left out: a good memory rewrites
    "yesterday" as a date and drops "really"."""
    names = {s.lower() for s in speakers}
    return {
        w[:5]
        for w in nlp.tokenize(turn.full_text)
        if (len(w) >= 4 or w.isdigit()) and w not in names and w not in _NOT_CONTENT
    }


class LLMExtractor:
    """Extractor protocol backed by an `LLMClient` (see evolvemem/llm/client.py)."""

    def __init__(
        self,
        client: Any,
        window: int = 40,
        overlap: int = 8,
        sub_window: int = 15,
        *,
        max_tokens: int = 4096,
        attempts: int = 3,
        retry_wait: float = 2.0,
        min_keyword_coverage: float = 0.5,
        min_turn_keywords: int = 3,
        max_workers: int = 4,
        prompt_name: str = "extract",
    ):
        if window < 1 or sub_window < 1 or not 0 <= overlap < window:
            raise ValueError(
                f"need window >= 1, sub_window >= 1 and 0 <= overlap < window (got {window}, {sub_window}, {overlap})"
            )
        self.client = client
        self.window, self.overlap, self.sub_window = window, overlap, sub_window
        self.max_tokens = max_tokens
        self.attempts = max(1, attempts)
        self.retry_wait = retry_wait
        self.min_keyword_coverage = min_keyword_coverage
        self.min_turn_keywords = min_turn_keywords
        self.max_workers = max(1, max_workers)
        self.prompt = load_prompt(prompt_name)
        self.model = str(client.model)
        self.name = f"llm:{self.model}"
        self.version = f"{self.prompt.version}-w{window}o{overlap}s{sub_window}c{min_keyword_coverage:g}"
        self.failed_turns: dict[str, set[str]] = {}
        self.offline_turns: dict[str, set[str]] = {}  # turns kept as offline memories (see _offline_for_orphans)
        self._offline = OfflineExtractor()

    # ------------------------------------------------------------------------------ protocol
    def extract(self, conversation: Conversation, turn_ids: set[str] | None = None) -> tuple[list[MemoryUnit], Usage]:
        turns = conversation.turns()
        positions = [i for i, t in enumerate(turns) if turn_ids is None or t.turn_id in turn_ids]
        windows = [positions[i : i + self.window] for i in range(0, len(positions), self.window)]
        with ThreadPoolExecutor(max_workers=min(self.max_workers, max(1, len(windows)))) as pool:
            outcomes = list(pool.map(lambda w: self._extract_window(conversation, turns, w), windows))
        units: list[MemoryUnit] = []
        seen: set[str] = set()
        cost = Usage()
        failed: set[str] = set()
        for outcome in outcomes:
            cost = cost + outcome.cost
            failed |= outcome.failed
            for unit in outcome.units:
                if unit.content not in seen:
                    seen.add(unit.content)
                    units.append(unit)
        self.failed_turns[conversation.conversation_id] = failed
        if failed:
            log.warning(
                "%s: %d turns of %s could not be extracted", self.name, len(failed), conversation.conversation_id
            )
        units += self._offline_for_orphans(conversation, [turns[i] for i in positions], units)
        return units, cost

    def _offline_for_orphans(
        self, conversation: Conversation, targets: Sequence[Turn], units: Sequence[MemoryUnit]
    ) -> list[MemoryUnit]:
        """Turns no model memory cites (failed windows, or replies whose memories all cited turns that
        do not exist, as a small model copying the prompt's example does) are not lost: each becomes
        the offline memory of that turn, and `offline_turns` counts them."""
        cited = {t for unit in units for t in unit.source_turn_ids}
        orphans = {t.turn_id for t in targets if t.turn_id not in cited}
        self.offline_turns[conversation.conversation_id] = orphans
        if not orphans:
            return []
        log.warning(
            "%s: %d of %d turns of %s have no usable memory from the model; kept as one offline memory per turn",
            self.name,
            len(orphans),
            len(targets),
            conversation.conversation_id,
        )
        fallback, _ = self._offline.extract(conversation, orphans)
        return fallback

    # ------------------------------------------------------------------------------ windows
    def _context_for(self, turns: list[Turn], positions: list[int]) -> list[Turn]:
        first = positions[0]
        chosen = set(positions)
        return [turns[i] for i in range(max(0, first - self.overlap), first) if i not in chosen]

    def _extract_window(self, conversation: Conversation, turns: list[Turn], positions: list[int]) -> _Outcome:
        outcome = _Outcome()
        targets = [turns[i] for i in positions]
        try:
            self._call_with_retries(conversation, targets, self._context_for(turns, positions), outcome)
        except _WindowFailed as exc:
            # pieces always smaller than the window (halves of a window no larger than sub_window):
            # the same turns again would be the same request
            size = min(self.sub_window, max(1, (len(positions) + 1) // 2))
            if size >= len(positions):
                log.warning("turn %s could not be extracted: %s", targets[0].turn_id, exc)
                outcome.failed.update(t.turn_id for t in targets)
                return outcome
            log.info("window at %s failed (%s); splitting into %d-turn pieces", targets[0].turn_id, exc, size)
            for start in range(0, len(positions), size):
                piece = positions[start : start + size]
                piece_turns = [turns[i] for i in piece]
                try:
                    self._call_with_retries(conversation, piece_turns, self._context_for(turns, piece), outcome)
                except _WindowFailed as piece_exc:
                    log.warning(
                        "turns %s..%s could not be extracted: %s",
                        piece_turns[0].turn_id,
                        piece_turns[-1].turn_id,
                        piece_exc,
                    )
                    outcome.failed.update(t.turn_id for t in piece_turns)
        self._recover_uncovered(conversation, turns, positions, outcome)
        return outcome

    def uncovered_turns(
        self, targets: Sequence[Turn], units: Sequence[MemoryUnit], speakers: Sequence[str]
    ) -> list[Turn]:
        """Turns with at least `min_turn_keywords` content words of which fewer than
        `min_keyword_coverage` appear in the memories drawn from that turn (none cited: none covered).

        Checking only the memories that cite the turn keeps words other turns share ("bought",
        "class") from hiding a turn the model skipped."""
        covered: dict[str, set[str]] = {}
        for unit in units:
            words = {w[:5] for w in nlp.tokenize(" ".join((unit.content, *unit.entities, *unit.locations)))}
            for turn_id in unit.source_turn_ids:
                covered.setdefault(turn_id, set()).update(words)
        missing = []
        for turn in targets:
            words = turn_keywords(turn, speakers)
            found = covered.get(turn.turn_id, set())
            if len(words) >= self.min_turn_keywords and len(words & found) < self.min_keyword_coverage * len(words):
                missing.append(turn)
        return missing

    def _recover_uncovered(
        self, conversation: Conversation, turns: list[Turn], positions: list[int], outcome: _Outcome
    ) -> None:
        """One extra call for the window's turns that no memory covers (failed turns excluded)."""
        targets = [turns[i] for i in positions if turns[i].turn_id not in outcome.failed]
        missing = self.uncovered_turns(targets, outcome.units, conversation.speakers)
        if not missing:
            return
        missing_ids = {t.turn_id for t in missing}
        context = self._context_for(turns, positions) + [t for t in targets if t.turn_id not in missing_ids]
        try:
            self._call(conversation, missing, context, outcome, focus=FOCUS_NOTE)
        except _WindowFailed as exc:
            log.info("coverage re-extraction of %d turns failed: %s", len(missing), exc)

    # ------------------------------------------------------------------------------ calls
    def _call_with_retries(
        self, conversation: Conversation, targets: list[Turn], context: list[Turn], outcome: _Outcome
    ) -> None:
        """Up to `attempts` tries with growing waits; an overflow or an unusable reply is re-raised at
        once for splitting (retrying either would repeat it)."""
        for attempt in range(self.attempts):
            try:
                self._call(conversation, targets, context, outcome)
                return
            except _WindowFailed as exc:
                if exc.overflow or exc.unusable_reply or attempt == self.attempts - 1:
                    raise
                time.sleep(self.retry_wait * (2**attempt))

    def _call(
        self, conversation: Conversation, targets: list[Turn], context: list[Turn], outcome: _Outcome, focus: str = ""
    ) -> None:
        text = self.prompt.render(
            speakers=", ".join(conversation.speakers) or "(unknown)",
            context="\n".join(format_turn(t) for t in context) or "(none)",
            turns="\n".join(format_turn(t) for t in targets),
            focus=focus,
        )
        try:
            # A small local window: the reply budget shrinks to what is left (not below a useful
            # floor); a prompt that leaves less is split into smaller windows instead.
            budget = min(self.max_tokens, REPLY_TOKENS_BASE + REPLY_TOKENS_PER_TURN * len(targets))
            _, parsed, reply = ask_fitted(
                self.client,
                lambda: fit_prompt(self.client, [("", text)], budget, min_reply_tokens=min(budget, MIN_REPLY_TOKENS)),
                role=ROLE,
                json_reply=True,
            )
        except LLMJSONError as exc:
            outcome.cost = outcome.cost + exc.reply.as_cost()
            raise _WindowFailed(str(exc), unusable_reply=True) from None
        except LLMCallFailed as exc:
            outcome.cost = outcome.cost + exc.cost  # a rejected request reached the server
            overflow = isinstance(exc, PromptTooLong) or (
                exc.status_code in (400, 413) and bool(_OVERFLOW_RE.search(str(exc)))
            )
            raise _WindowFailed(str(exc), overflow=overflow or "ContextWindowExceeded" in str(exc)) from None
        outcome.cost = outcome.cost + reply.as_cost()
        items = parsed.get("memories") if isinstance(parsed, dict) else parsed
        if not isinstance(items, list):
            raise _WindowFailed(f"reply has no 'memories' list (got {type(parsed).__name__})", unusable_reply=True)
        allowed = {t.turn_id: t for t in [*context, *targets]}
        for item in items:
            unit = self._to_unit(item, conversation, allowed)
            if unit is not None:
                outcome.units.append(unit)

    def _to_unit(self, item: Any, conversation: Conversation, allowed: dict[str, Turn]) -> MemoryUnit | None:
        return memory_from_item(item, conversation, allowed)


def memory_from_item(
    item: Any,
    conversation: Conversation,
    allowed: dict[str, Turn],
    *,
    salt: str = "",
    memory_type: str | None = None,
    sources: tuple[str, ...] = (),
) -> MemoryUnit | None:
    """A memory from one item of a model's reply, or None when it has no content or no source
    among `allowed` (the turns the model was shown). `sources`, when given, replaces the item's
    own (a reply about one known turn); `memory_type` replaces the item's type."""
    if not isinstance(item, dict):
        return None
    content = str(item.get("content") or "").strip()
    if not sources:
        raw_ids = item.get("source_turn_ids") or item.get("source_turns") or []
        if isinstance(raw_ids, (str, int)):
            raw_ids = [raw_ids]
        if not isinstance(raw_ids, list):
            raw_ids = []
        sources = tuple(dict.fromkeys(i for i in (str(r).strip().strip("[]") for r in raw_ids) if i in allowed))
    if not content or not sources:
        return None
    first = allowed[sources[0]]
    found = nlp.annotate(content, conversation.speakers)
    return MemoryUnit(
        memory_id=make_memory_id(conversation.conversation_id, content, salt=salt),
        conversation_id=conversation.conversation_id,
        content=content,
        memory_type=memory_type or _memory_type(item.get("type")),
        session_id=first.session_id,
        source_turn_ids=sources,
        timestamp=parse_date(item.get("date")) or first.timestamp,
        importance=importance_value(item.get("importance")),
        persons=_merged(item.get("persons"), found.persons),
        locations=_merged(item.get("locations"), found.locations),
        entities=_merged(item.get("entities"), found.entities),
        topics=_merged(item.get("topics"), found.topics),
        keywords=found.keywords,
    )


def _merged(from_model: Any, from_rules: Sequence[str]) -> tuple[str, ...]:
    """The model's values (lowercased, like `nlp.annotate`'s) followed by the rule annotations."""
    values = from_model if isinstance(from_model, list) else []
    cleaned = [str(v).strip().lower() for v in values if isinstance(v, (str, int, float)) and str(v).strip()]
    return tuple(dict.fromkeys([*cleaned, *from_rules]))


def _memory_type(value: Any) -> str:
    name = str(value or "").strip().lower().replace(" ", "_")
    name = _TYPE_ALIASES.get(name, name)
    return name if name in MEMORY_TYPES else "episodic"


def importance_value(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.5
    return 0.5 if math.isnan(number) else min(1.0, max(0.0, number))


def parse_date(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return parse_iso_datetime(value.strip()[:19])
    except ValueError:
        return None
