"""Thread-safe accounting of LLM usage per role (extract, answer, judge, diagnose, ...): one
`Usage` per role, shared by every thread that calls an `LLMClient`."""
from __future__ import annotations

import threading
from typing import Callable

from evolvemem.contracts.usage import Usage


class UsageLedger:
    """Counters per role; `snapshot()` differences give a round's usage."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roles: dict[str, Usage] = {}
        # called (in the calling thread) after each paid call: a run store records what was paid for
        # at once, so a kill loses no cost (session.py sets it while a round is evaluated)
        self.on_paid: Callable[[], None] | None = None

    def _add(self, role: str, usage: Usage) -> None:
        with self._lock:
            self._roles[role] = self._roles.get(role, Usage()) + usage

    def _paid(self) -> None:
        hook = self.on_paid
        if hook is not None:
            try:
                hook()
            except Exception:  # noqa: BLE001 - the usage stays counted here; the next flush records it
                pass

    def record_call(self, role: str, prompt_tokens: int, completion_tokens: int, cost_usd: float) -> None:
        self._add(role, Usage(calls=1, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                              cost_usd=cost_usd))
        self._paid()

    def record_cache_hit(self, role: str) -> None:
        self._add(role, Usage(cache_hits=1))

    def record_retry(self, role: str) -> None:
        self._add(role, Usage(retries=1))

    def record_failure(self, role: str) -> None:
        self._add(role, Usage(failures=1))

    def record_rejection(self, role: str) -> None:
        """A request the server answered by rejecting it (a prompt beyond its window): it reached
        the model's server, so it is a call, and it failed."""
        self._add(role, Usage(calls=1, failures=1))
        self._paid()

    def snapshot(self) -> dict[str, Usage]:
        """Usage so far, per role."""
        with self._lock:
            return dict(sorted(self._roles.items()))

    def total(self) -> Usage:
        """All roles summed."""
        return sum(self.snapshot().values(), Usage())

    def cost(self, role: str | None = None) -> Usage:
        """Usage of one role (or of all roles)."""
        if role is None:
            return self.total()
        with self._lock:
            return self._roles.get(role, Usage())

    def reset(self) -> None:
        with self._lock:
            self._roles.clear()
