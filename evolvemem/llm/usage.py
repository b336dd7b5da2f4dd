"""Thread-safe accounting of LLM usage per role (extract, answer, judge, diagnose, ...).

`calls` counts replies that came from the provider, `cache_hits` replies served from the cache
(no new tokens), `retries` extra attempts after a retryable fault, and `failures` requests that
gave up. Token counts and cost cover provider replies only.
"""
from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

from evolvemem.roles.protocols import CallCost


@dataclass
class RoleUsage:
    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: "RoleUsage") -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def as_cost(self) -> CallCost:
        return CallCost(self.calls, self.cache_hits, self.prompt_tokens, self.completion_tokens, self.cost_usd)


class UsageLedger:
    """Counters per role, shared by every thread that calls an `LLMClient`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roles: dict[str, RoleUsage] = {}

    def _role(self, role: str) -> RoleUsage:
        return self._roles.setdefault(role, RoleUsage())

    def record_call(self, role: str, prompt_tokens: int, completion_tokens: int, cost_usd: float) -> None:
        with self._lock:
            usage = self._role(role)
            usage.calls += 1
            usage.prompt_tokens += prompt_tokens
            usage.completion_tokens += completion_tokens
            usage.cost_usd += cost_usd

    def record_cache_hit(self, role: str) -> None:
        with self._lock:
            self._role(role).cache_hits += 1

    def record_retry(self, role: str) -> None:
        with self._lock:
            self._role(role).retries += 1

    def record_failure(self, role: str) -> None:
        with self._lock:
            self._role(role).failures += 1

    def snapshot(self) -> dict[str, dict[str, float]]:
        """A copy: `{role: {"calls": ..., "cache_hits": ..., ...}}`."""
        with self._lock:
            return {role: asdict(usage) for role, usage in sorted(self._roles.items())}

    def total(self) -> dict[str, float]:
        """All roles summed, same keys as one role in `snapshot()`."""
        summed = RoleUsage()
        with self._lock:
            for usage in self._roles.values():
                summed.add(usage)
        return asdict(summed)

    def cost(self, role: str | None = None) -> CallCost:
        """Usage of one role (or of all roles) as a `CallCost`."""
        with self._lock:
            if role is not None:
                return self._roles.get(role, RoleUsage()).as_cost()
            summed = RoleUsage()
            for usage in self._roles.values():
                summed.add(usage)
        return summed.as_cost()

    def reset(self) -> None:
        with self._lock:
            self._roles.clear()
