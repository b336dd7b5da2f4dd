"""Which memory stores a config reads, as declared by the modules that own the settings.

`fact` is the run's own extractor; other stores (memory/stores.py) are built once, by the
session, the first time a config needs them. Each owning module exposes
`stores_for(effective) -> set[str]`; adding a store-reading mechanism adds one row here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from evolvemem.mechanisms import ama_judge, ama_router
from evolvemem.memory import recurrence
from evolvemem.memory.stores import FACT

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig

StoresFor = Callable[["RetrievalConfig"], set[str]]

# module that owns the settings -> the stores they make a question read
STORE_NEEDS: tuple[StoresFor, ...] = (
    recurrence.stores_for,  # consolidation_policy = recurrence: the base store is RecMem's
    ama_router.stores_for,  # memory_granularity: raw, episode, or both when routed
    ama_judge.stores_for,  # judge_retries: retries widen to raw turns and episodes
)


def base_store(effective: RetrievalConfig) -> str:
    """The store a question's main retrieval reads ("fact" granularity) under its effective config."""
    return recurrence.RECURRENCE if recurrence.stores_for(effective) else FACT


def stores_for(effective: RetrievalConfig) -> set[str]:
    """Every store one effective config may read."""
    needed = {base_store(effective)}
    for declared in STORE_NEEDS:
        needed |= declared(effective)
    return needed


def stores_needed(config: RetrievalConfig) -> set[str]:
    """Every store some question type may read under `config` (global values and overrides)."""
    needed: set[str] = set()
    for question_type in (None, *config.overrides()):
        needed |= stores_for(config.for_type(question_type))
    return needed
