"""Progress as plain lines, for a stderr that is not a terminal (a log file, CI).

Rich's bars redraw in place, which a log cannot show: such a log would stay silent until the
command ends. `LogBars` takes the same updates and writes one plain line per bar at most every
few seconds (EVOLVEMEM_PROGRESS_SECONDS, default 5), the first and the last line of each bar at
once, e.g. `round 2 dev: 37/120 questions, 41 calls, 0.9 q/s, eta 1m32s`."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable

INTERVAL_ENV = "EVOLVEMEM_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 5.0


def progress_interval(warn: Callable[[str], None]) -> float:
    """Seconds between two lines of one bar (EVOLVEMEM_PROGRESS_SECONDS; a bad value is said once)."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if seconds < 0 or seconds != seconds:
        warn(f"{INTERVAL_ENV}={raw!r} is not a number of seconds; progress lines every {DEFAULT_INTERVAL:g} s")
        return DEFAULT_INTERVAL
    return seconds


def duration_text(seconds: float) -> str:
    """1h02m, 1m32s, 7s."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


@dataclass
class _Bar:
    started: float  # when the bar's first update came
    base: int  # items already done then (the rate counts the items done since)
    done: int = 0
    total: int = 0
    unit: str = ""
    calls: int = 0
    failed: int = 0
    printed_at: float = 0.0
    printed: tuple[int, int] = (-1, -1)  # (done, total) of the last line


class LogBars:
    """The progress-bar interface (cli/ui.py `Bars`) as throttled plain lines."""

    def __init__(
        self,
        write: Callable[[str], None],
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.write = write
        self.interval = interval
        self.clock = clock
        self.bars: dict[str, _Bar] = {}

    def update(self, name: str, done: int, total: int, extra: str = "") -> None:
        self._advance(name, done, total, "")

    def stage(self, stage: str, done: int, total: int) -> None:
        self._advance(stage, done, total, "")

    def questions(
        self, name: str, done: int, total: int, *, cache_hits: int = 0, failed: int = 0, calls: int = 0
    ) -> None:
        self._advance(name, done, total, "questions", calls=calls, failed=failed)

    def close(self) -> None:
        """The last state of every bar whose last update was not written yet."""
        for name, bar in self.bars.items():
            if bar.printed != (bar.done, bar.total):
                self._line(name, bar, self.clock())

    def _advance(self, name: str, done: int, total: int, unit: str, *, calls: int = 0, failed: int = 0) -> None:
        now = self.clock()
        bar = self.bars.get(name)
        first = bar is None
        if bar is None:
            bar = self.bars[name] = _Bar(started=now, base=done)
        bar.done, bar.total, bar.unit, bar.calls, bar.failed = done, total, unit, calls, failed
        finished = total > 0 and done >= total
        if first or finished or now - bar.printed_at >= self.interval:
            self._line(name, bar, now)

    def _line(self, name: str, bar: _Bar, now: float) -> None:
        bar.printed_at, bar.printed = now, (bar.done, bar.total)
        parts = [f"{bar.done}/{bar.total}{' ' + bar.unit if bar.unit else ''}"]
        if bar.calls:
            parts.append(f"{bar.calls} calls")
        if bar.failed:
            parts.append(f"{bar.failed} failed")
        elapsed = now - bar.started
        rate = (bar.done - bar.base) / elapsed if elapsed > 0 and bar.done > bar.base else 0.0
        if rate:
            parts.append(f"{rate:.2g}" if rate < 10 else f"{rate:.0f}")
            parts[-1] += " q/s" if bar.unit == "questions" else "/s"
        if bar.total and bar.done >= bar.total:
            parts.append("done")
        elif rate:
            parts.append(f"eta {duration_text((bar.total - bar.done) / rate)}")
        self.write(f"{name}: {', '.join(parts)}")
