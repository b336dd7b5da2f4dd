"""The run store: one DuckDB file per run (or per `evolve eval`), the memory of a run."""

from evolvemem.store.run_store import RunStore, RunLockedError

__all__ = ["RunStore", "RunLockedError"]
