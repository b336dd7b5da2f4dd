"""`Usage`: LLM calls, cache hits, tokens and cost, the one counter every layer adds up.

A role call returns one (all zero for offline roles), a question's record sums its calls, the
ledger keeps one per role, and a round's accounting is the difference of two snapshots.
`calls` counts replies from the provider (a rejection of a prompt beyond the model's window too:
it reached the server), `cache_hits` replies served from the response cache
(no new tokens), `retries` extra attempts after a retryable fault, `failures` requests that gave
up. Tokens and cost cover provider replies only."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Usage:
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    retries: int = 0
    failures: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __sub__(self, other: "Usage") -> "Usage":
        return Usage(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "Usage":
        """From a stored row or snapshot (unknown keys ignored, missing and NULL ones zero)."""
        data = data or {}
        return cls(**{f.name: (data.get(f.name) or 0) for f in fields(cls)})


USAGE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Usage))
