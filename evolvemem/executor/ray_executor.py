"""The `ray` executor: each item is a Ray task (https://docs.ray.io/en/latest/ray-core/tasks.html).

A task whose worker process dies (killed, out of memory, its machine gone) is run again by Ray,
up to `max_retries` times (Ray's own task retries; an exception raised by our code is not
retried: it is a bug or a bad input, and is raised here as it was raised there). Results come
back with `ray.wait` as they finish; nothing is written by a worker, so a retried task can
neither lose nor duplicate a result.

Without an address a local cluster is started (`ray.init()` on 127.0.0.1, no dashboard) and shut down by
`close()`; with one (`auto`, or HOST:PORT of `ray start --head`) the executor joins that cluster
and `close()` only disconnects. A driver that already called `ray.init()` (a notebook, the
tests) keeps its cluster. Workers see the driver's EvolveMem, Hugging Face and model-provider
environment as of each `map` (cache folder, offline flags, API keys), set per task."""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Iterator, Sequence, TypeVar

from evolvemem.errors import EvolveMemError

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_MAX_RETRIES = 3  # Ray's own default for tasks, stated so a reader need not look it up
LOOPBACK = "127.0.0.1"  # a local cluster listens on this machine's loopback only
IDLE_WORKERS_VARIABLE = "RAY_num_workers_soft_limit"  # Ray's own setting: idle workers kept alive
WORKERS_PER_CPU = 4  # items asking a quarter CPU run four to a CPU
WAIT_SECONDS = 1.0  # ray.wait returns at least this often, so Ctrl-C is handled promptly
FORWARDED_PREFIXES = ("EVOLVEMEM_", "HF_", "TRANSFORMERS_", "LITELLM_", "SENTENCE_TRANSFORMERS_")
FORWARDED_SUFFIXES = ("_API_KEY", "_API_BASE", "_BASE_URL")


def forwarded_environment() -> dict[str, str]:
    """The variables a task needs to behave as it would in the driver."""
    return {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIXES) or k.endswith(FORWARDED_SUFFIXES)}


def _run_item(fn: Callable[[Any], Any], environment: dict[str, str], item: Any) -> Any:
    """What a Ray task runs: the item under the driver's environment."""
    os.environ.update(environment)
    return fn(item)


class RayShared:
    """A value in Ray's object store; workers fetch it once per use (zero-copy for arrays)."""

    def __init__(self, ref: Any, key: str):
        self.ref, self.key = ref, key

    def get(self) -> Any:
        import ray

        return ray.get(self.ref)


class RayExecutor:
    name = "ray"
    remote = True

    def __init__(self, address: str | None = None, workers: int | None = None, max_retries: int = DEFAULT_MAX_RETRIES):
        try:
            import ray
        except ImportError:
            raise EvolveMemError('--executor ray needs Ray: pip install -e ".[ray]"') from None
        self._ray = ray
        self.max_retries = max_retries
        self._owns = False
        self._shared: dict[str, RayShared] = {}
        self._task: Any = None
        if not ray.is_initialized():
            # Ray's own notices (token authentication, the instance it started) would interleave
            # with the run's output; its errors still show
            options: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "logging_level": logging.ERROR,
            }
            if address:
                options["address"] = address
            else:  # a new cluster of this machine only, even when another one runs here
                cpus = workers or os.cpu_count() or 1
                options.update(address="local", num_cpus=cpus, _node_ip_address=LOOPBACK)
                # Ray keeps as many idle worker processes as free CPUs and kills the rest after a
                # second: items that ask a fraction of a CPU (model-bound shards) would start new
                # workers, each paying its imports again, in every batch (ray-project/ray#36766)
                os.environ.setdefault(IDLE_WORKERS_VARIABLE, str(WORKERS_PER_CPU * cpus))
            try:
                ray.init(**options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
                raise EvolveMemError(f"cannot start or join {where}: {str(exc).splitlines()[0][:300]}") from None
            self._owns = True
        self.address = address or "local"

    @property
    def workers(self) -> int:
        """The cluster's CPUs: how many one-CPU items run at once."""
        resources: dict[str, float] = self._ray.cluster_resources()  # type: ignore[no-untyped-call]  # ray ships no annotations here
        return max(1, int(resources.get("CPU", 1)))

    def share(self, value: T, key: str) -> RayShared:
        """Put `value` in the object store once per key (later calls with the key reuse it)."""
        if key not in self._shared:
            self._shared[key] = RayShared(self._ray.put(value), key)
        return self._shared[key]

    def map(self, fn: Callable[[T], R], items: Sequence[T], cpus: float = 1.0) -> Iterator[tuple[int, R]]:
        ray = self._ray
        if self._task is None:
            self._task = ray.remote(_run_item)
        task = self._task.options(num_cpus=cpus, max_retries=self.max_retries, retry_exceptions=False)
        environment = forwarded_environment()
        index_of = {task.remote(fn, environment, item): i for i, item in enumerate(items)}
        pending = list(index_of)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1, timeout=WAIT_SECONDS)
                for ref in ready:
                    yield index_of[ref], self._result(ref)
        except BaseException:
            for ref in pending:  # Ctrl-C or a failed item: nobody will read the others
                ray.cancel(ref, force=True)
            raise

    def _result(self, ref: Any) -> Any:
        ray = self._ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, BaseException) else None
            if cause is not None:
                raise cause from None  # our own exception, as the code that ran there raised it
            raise
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
            raise EvolveMemError(
                f"a Ray task failed {self.max_retries + 1} times because its worker died "
                f"({type(exc).__name__}); nothing of it was recorded, --resume runs it again"
            ) from None

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns = False
        self._shared.clear()
