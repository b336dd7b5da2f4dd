"""Thread-safe accounting of LLM usage per role (extract, answer, judge, diagnose, ...): one
`Usage` per role, shared by every thread that calls an `LLMClient`."""

from __future__ import annotations

import threading
from collections.abc import Callable

from evolvemem.contracts.usage import Usage

# where each usage event goes as it happens: (role, usage, call id or None); a run's usage journal
UsageSink = Callable[[str, Usage, str | None], None]


class UsageLedger:
    """Counters per role; `snapshot()` differences give a round's usage. With a sink attached,
    every event is also handed to it in the calling thread the moment it is counted, so a run
    keeps the cost of each call that returned even if the process is killed right after."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roles: dict[str, Usage] = {}
        self._sink: UsageSink | None = None
        self._unsent: dict[str, Usage] = {}  # counted while no sink was attached

    def attach(self, sink: UsageSink) -> None:
        """Send every later event to `sink`, and first what was counted while none was attached
        (a workspace built before its run store was open); attaching the same sink again is a no-op."""
        with self._lock:
            if sink == self._sink:
                return
            backlog, self._unsent, self._sink = self._unsent, {}, sink
        for role, usage in sorted(backlog.items()):
            sink(role, usage, None)

    def detach(self) -> None:
        with self._lock:
            self._sink = None

    def _add(self, role: str, usage: Usage, call_id: str | None = None) -> None:
        with self._lock:
            self._roles[role] = self._roles.get(role, Usage()) + usage
            sink = self._sink
            if sink is None:
                self._unsent[role] = self._unsent.get(role, Usage()) + usage
        if sink is not None:  # outside the lock: a slow disk must not serialise the counters
            sink(role, usage, call_id)

    def record_call(
        self, role: str, prompt_tokens: int, completion_tokens: int, cost_usd: float, call_id: str | None = None
    ) -> None:
        self._add(
            role,
            Usage(calls=1, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost_usd),
            call_id,
        )

    def record_cache_hit(self, role: str) -> None:
        self._add(role, Usage(cache_hits=1))

    def record_retry(self, role: str) -> None:
        self._add(role, Usage(retries=1))

    def record_failure(self, role: str) -> None:
        self._add(role, Usage(failures=1))

    def record_rejection(self, role: str, call_id: str | None = None) -> None:
        """A request the server answered by rejecting it (a prompt beyond its window): it reached
        the model's server, so it is a call, and it failed."""
        self._add(role, Usage(calls=1, failures=1), call_id)

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
            self._unsent.clear()
