"""The `local` executor: every item in this process, in order (what a run did before executors)."""

from __future__ import annotations

from typing import Callable, Iterator, Sequence, TypeVar

from evolvemem.executor import InProcess

T = TypeVar("T")
R = TypeVar("R")


class LocalExecutor:
    name = "local"
    remote = False
    workers = 1

    def share(self, value: T, key: str) -> InProcess[T]:
        return InProcess(value, key)

    def map(self, fn: Callable[[T], R], items: Sequence[T], cpus: float = 1.0) -> Iterator[tuple[int, R]]:
        for index, item in enumerate(items):
            yield index, fn(item)

    def close(self) -> None:
        return None
