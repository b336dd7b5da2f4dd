"""Episode narratives (EverMemOS's episodic memory) and the guarded JSON call mechanisms share.

A narrative is a short third-person account of one topic segment, written by a model from the
segment's memories (prompts/episode.md). It reads as one story rather than a list of turns, so
its embedding says what the segment is *about*: the scenes mechanism clusters episodes by it,
and the episode store (AMA) keeps it as a retrievable unit.

Mechanisms must never stop on a bad model reply. `ask_json` makes one JSON call and returns
the parsed value or None, always with the cost actually paid (an unparseable reply that was
re-asked is billed twice); callers then use their offline rule instead.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Callable, Sequence, TypeVar

from evolvemem.prompts import load_prompt
from evolvemem.roles.protocols import CallCost

log = logging.getLogger(__name__)

T = TypeVar("T")
NARRATIVE_MAX_TOKENS = 400
MIN_NARRATIVE_CHARS = 20  # shorter "narratives" ("ok", "none") are treated as garbage
_DATE_PREFIX = re.compile(r"^\s*\[[^\]]{1,40}\]\s*")  # "[8 May 2023] " in front of a memory


def ask_json(client: Any, prompt: str, *, role: str, max_tokens: int,
             parse: Callable[[Any], T]) -> tuple[T | None, CallCost]:
    """One JSON completion, parsed by `parse` (which raises ValueError on an unusable reply).

    Returns (None, cost) when the call fails or the reply is unusable; the failure is logged."""
    from evolvemem.llm.client import LLMCallFailed, LLMJSONError

    messages = [{"role": "user", "content": prompt}]
    try:
        parsed, reply = client.complete_json(messages, role=role, max_tokens=max_tokens)
    except LLMJSONError as exc:
        log.warning("%s: %s", role, exc)
        return None, exc.reply.as_cost()
    except LLMCallFailed as exc:
        log.warning("%s: %s", role, exc)
        return None, CallCost()
    try:
        return parse(parsed), reply.as_cost()
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("%s: unusable reply from %s: %s", role, getattr(client, "model", "the model"), exc)
        return None, reply.as_cost()


def dated_digest(lines: Sequence[str], date: str | None) -> str:
    """The offline stand-in for a narrative: the lines in order under one date heading
    (their own "[date]" prefixes dropped, so the date is said once)."""
    body = " ".join(_DATE_PREFIX.sub("", line).strip() for line in lines if line.strip())
    return f"On {date}: {body}" if date else body


def parse_narrative(parsed: Any) -> str:
    """The narrative in {"narrative": "..."}; a bare string is accepted too."""
    text = parsed.get("narrative") if isinstance(parsed, dict) else parsed
    if not isinstance(text, str) or len(text.strip()) < MIN_NARRATIVE_CHARS:
        raise ValueError("the reply has no narrative text")
    return " ".join(text.split())


def narrate_episode(client: Any, lines: list[str], date: str | None) -> tuple[str, CallCost]:
    """A third-person narrative of one topic segment (its memories or turns, in order).

    `date` is the segment's date as people write it ("8 May 2023") or None. Without a client,
    or when the call fails or the reply is unusable, returns `dated_digest(lines, date)` and
    the cost paid so far."""
    if client is None or not lines:
        return dated_digest(lines, date), CallCost()
    prompt = load_prompt("episode").render(date=date or "unknown", lines="\n".join(f"- {line}" for line in lines))
    narrative, cost = ask_json(client, prompt, role="episode", max_tokens=NARRATIVE_MAX_TOKENS, parse=parse_narrative)
    return (narrative if narrative is not None else dated_digest(lines, date)), cost
