"""What a session tells the person waiting: one-line messages and progress bars.

The CLI's `UI` is a Reporter; library callers, benchmarks and tests may use `QuietReporter`."""

from __future__ import annotations

from contextlib import contextmanager
from typing import ContextManager, Iterator, Protocol


class Bars(Protocol):
    def update(self, name: str, done: int, total: int, extra: str = "") -> None: ...

    def stage(self, stage: str, done: int, total: int) -> None: ...


class Reporter(Protocol):
    def info(self, message: str) -> None: ...

    def warn(self, message: str) -> None: ...

    def progress(self) -> ContextManager[Bars]: ...


class _NoBars:
    def update(self, name: str, done: int, total: int, extra: str = "") -> None:
        return None

    def stage(self, stage: str, done: int, total: int) -> None:
        return None


class QuietReporter:
    """Says nothing; warnings are kept in `warnings`."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def info(self, message: str) -> None:
        return None

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    @contextmanager
    def progress(self) -> Iterator[Bars]:
        yield _NoBars()
