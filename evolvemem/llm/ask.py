"""The guarded JSON call every mechanism's LLM variant makes.

Mechanisms must never stop on a bad model reply: `ask_json` makes one JSON call and returns the
parsed value or None, always with the cost actually paid (an unparseable reply that was
re-asked is billed twice); the caller then uses its offline rule instead."""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence, TypeVar

from evolvemem.contracts.usage import Usage
from evolvemem.llm.client import LLMCallFailed, LLMJSONError

log = logging.getLogger(__name__)
T = TypeVar("T")


def ask_json(
    client: Any, prompt: str, *, role: str, max_tokens: int, parse: Callable[[Any], T]
) -> tuple[T | None, Usage]:
    """One JSON completion, parsed by `parse` (which raises ValueError on an unusable reply).

    Returns (None, cost) when the call fails or the reply is unusable; the failure is logged."""

    messages = [{"role": "user", "content": prompt}]
    try:
        parsed, reply = client.complete_json(messages, role=role, max_tokens=max_tokens)
    except LLMJSONError as exc:
        log.warning("%s: %s", role, exc)
        return None, exc.reply.as_cost()
    except LLMCallFailed as exc:
        log.warning("%s: %s", role, exc)
        return None, Usage()
    try:
        return parse(parsed), reply.as_cost()
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("%s: unusable reply from %s: %s", role, getattr(client, "model", "the model"), exc)
        return None, reply.as_cost()


def parse_choice(parsed: Any, field: str, choices: Sequence[str]) -> str:
    """The value of `field` in a reply like {"<field>": "<one of choices>"} (a bare string is
    accepted too), lowercased; ValueError otherwise."""
    value = parsed.get(field) if isinstance(parsed, dict) else parsed
    choice = str(value).strip().lower() if isinstance(value, str) else ""
    if choice not in choices:
        raise ValueError(f"{field} must be one of {', '.join(choices)}, got {value!r}")
    return choice
