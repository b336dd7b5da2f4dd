"""Where work runs: one small protocol, `Executor.map(fn, items)`, with two implementations.

`local` (the default) runs every item in this process, one after another: today's behaviour.
`ray` runs each item as a Ray task on a cluster (`ray.init(address=...)`, or a local cluster
when no address is given); a task whose worker dies is run again by Ray's task retries, so a
caller sees each item's result exactly once. Ray is imported only when the `ray` executor is
made. Callers send large read-only values once with `share` and pass the handle in their items.

Items and functions must be picklable (module-level functions, dataclasses) for `ray`; results
come back in completion order, each with its item's index, so the caller decides the order in
which it writes them."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Generic, Iterator, Protocol, Sequence, TypeVar

from evolvemem.errors import EvolveMemError

T = TypeVar("T")
R = TypeVar("R")
T_co = TypeVar("T_co", covariant=True)

EXECUTORS = ("local", "ray")


class Shared(Protocol[T_co]):
    """A value sent once to wherever items run; `key` names its content (equal keys, equal values)."""

    @property
    def key(self) -> str: ...

    def get(self) -> T_co: ...


class Executor(Protocol):
    name: str
    remote: bool  # items run in other processes (they cannot reach this process's objects)

    @property
    def workers(self) -> int:
        """How many one-CPU items can run at once."""
        ...

    def share(self, value: T, key: str) -> Shared[T]:
        """A handle to `value` that items can carry cheaply (sent once, not once per item)."""
        ...

    def map(self, fn: Callable[[T], R], items: Sequence[T], cpus: float = 1.0) -> Iterator[tuple[int, R]]:
        """(index, fn(item)) for every item, in completion order; each item needs `cpus` CPUs."""
        ...

    def close(self) -> None:
        """Release what this executor started (a local Ray cluster is shut down)."""
        ...


class InProcess(Generic[T]):
    """A shared value that stays in this process."""

    def __init__(self, value: T, key: str):
        self.value, self.key = value, key

    def get(self) -> T:
        return self.value


def make_executor(name: str, address: str | None = None, workers: int | None = None) -> Executor:
    """The executor called `name`; `address` (ray: "auto" or HOST:PORT) joins a running cluster,
    `workers` caps the CPUs of a cluster started here."""
    if name == "local":
        if address:
            raise EvolveMemError("--ray-address needs --executor ray")
        from evolvemem.executor.local import LocalExecutor

        return LocalExecutor()
    if name == "ray":
        from evolvemem.executor.ray_executor import RayExecutor

        return RayExecutor(address=address, workers=workers)
    raise EvolveMemError(f"--executor must be {' or '.join(EXECUTORS)}, not {name!r}")


@contextmanager
def open_executor(name: str, address: str | None = None, workers: int | None = None) -> Iterator[Executor]:
    """`make_executor`, closed on the way out whatever happens (Ctrl-C included): a local Ray
    cluster started here never outlives the command."""
    executor = make_executor(name, address, workers)
    try:
        yield executor
    finally:
        executor.close()
