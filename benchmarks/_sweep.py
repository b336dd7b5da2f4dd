"""What the multi-run benchmarks share: their runs go through an executor (evolvemem/executor/),
one after another in this process (`--executor local`, the default) or as Ray tasks in parallel
(`--executor ray [--ray-address auto|HOST:PORT]`), each run in its own directory. Results come
back as runs finish; a script prints each as it comes and its tables in its own order.

A run's function and its item must be picklable: a module-level function of the script (Ray
sends a script's own functions by value) and plain data. Scripts put the repo root on sys.path,
then import this as `benchmarks._sweep`."""

from __future__ import annotations

import argparse
from typing import Callable, Iterator, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor",
        default="local",
        choices=("local", "ray"),
        help="run the runs one after another here (local) or as parallel Ray tasks (ray)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        help="with --executor ray: auto or HOST:PORT of a running cluster (default: a local one)",
    )


def sweep(run: Callable[[T], R], items: Sequence[T], args: argparse.Namespace) -> Iterator[tuple[int, R]]:
    """(index, run(item)) for every item, as runs finish."""
    from evolvemem.executor import open_executor

    with open_executor(args.executor, args.ray_address) as executor:
        yield from executor.map(run, items)
