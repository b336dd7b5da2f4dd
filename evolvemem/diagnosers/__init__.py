"""Diagnosers read a round's failures and propose the next change; all return a `Proposal`.

A diagnoser is one module with a `create(seed, client)` function plus one row of `DIAGNOSERS`;
the CLI's help and the run's validation are generated from the table."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evolvemem.errors import EvolveMemError
from evolvemem.named_table import named_table

if TYPE_CHECKING:
    from evolvemem.contracts.diagnosis import Diagnoser
    from evolvemem.llm.client import LLMClient


@dataclass(frozen=True)
class DiagnoserEntry:
    name: str
    module: str  # defines create(seed: int, client: LLMClient | None) -> Diagnoser
    summary: str
    needs_model: bool = False
    modes: tuple[str, ...] = ()  # ways it can be asked (--diagnosis-mode); create() takes the mode


DIAGNOSERS: dict[str, DiagnoserEntry] = named_table(
    DiagnoserEntry(
        "llm",
        "evolvemem.diagnosers.llm",
        "a model reads the failures and proposes changes",
        needs_model=True,
        modes=("free", "menu"),
    ),
    DiagnoserEntry("rubric", "evolvemem.diagnosers.rubric", "deterministic rules over the failure taxonomy"),
    DiagnoserEntry("random", "evolvemem.diagnosers.random_search", "random perturbation (baseline)"),
    DiagnoserEntry("tpe", "evolvemem.diagnosers.tpe", "Optuna TPE over the action space (baseline)"),
)


def diagnoser_entry(name: str) -> DiagnoserEntry:
    if name not in DIAGNOSERS:
        raise EvolveMemError(f"unknown diagnoser {name!r} (known: {', '.join(DIAGNOSERS)})")
    return DIAGNOSERS[name]


def make_diagnoser(name: str, *, seed: int, client: LLMClient | None = None, mode: str = "free") -> Diagnoser:
    entry = diagnoser_entry(name)
    module = importlib.import_module(entry.module)
    diagnoser: Diagnoser = module.create(seed, client, mode) if entry.modes else module.create(seed, client)
    return diagnoser
