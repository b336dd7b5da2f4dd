"""Episode narratives (EverMemOS's episodic memory).

A narrative is a short third-person account of one topic segment, written by a model from the
segment's memories (prompts/episode.md). It reads as one story rather than a list of turns, so
its embedding says what the segment is *about*: the scenes mechanism clusters episodes by it,
and the episode store (AMA) keeps it as a retrievable unit.

The model is asked through `evolvemem.llm.ask.ask_json`: a bad reply falls back to the dated
digest (the offline form), with the cost still counted.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from evolvemem.llm.ask import ask_json
from evolvemem.prompts import load_prompt
from evolvemem.contracts.usage import Usage

NARRATIVE_MAX_TOKENS = 400
MIN_NARRATIVE_CHARS = 20  # shorter "narratives" ("ok", "none") are treated as garbage
_DATE_PREFIX = re.compile(r"^\s*\[[^\]]{1,40}\]\s*")  # "[8 May 2023] " in front of a memory


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


def narrate_episode(client: Any, lines: list[str], date: str | None) -> tuple[str, Usage]:
    """A third-person narrative of one topic segment (its memories or turns, in order).

    `date` is the segment's date as people write it ("8 May 2023") or None. Without a client,
    or when the call fails or the reply is unusable, returns `dated_digest(lines, date)` and
    the cost paid so far."""
    if client is None or not lines:
        return dated_digest(lines, date), Usage()
    prompt = load_prompt("episode").render(date=date or "unknown", lines="\n".join(f"- {line}" for line in lines))
    narrative, cost = ask_json(client, prompt, role="episode", max_tokens=NARRATIVE_MAX_TOKENS, parse=parse_narrative)
    return (narrative if narrative is not None else dated_digest(lines, date)), cost
