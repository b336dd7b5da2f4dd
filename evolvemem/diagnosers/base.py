"""The diagnoser protocol and the factory that picks one by name."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from evolvemem.errors import EvolveMemError
from evolvemem.loop.diagnosis_input import DiagnosisInput
from evolvemem.loop.proposal import Proposal
from evolvemem.roles.protocols import CallCost

DIAGNOSERS = ("llm", "rubric", "random", "tpe")


@dataclass
class DiagnosisResult:
    proposal: Proposal
    prompt: str = ""
    raw_response: str = ""
    parse_error: str = ""
    cost: CallCost = field(default_factory=CallCost)


class Diagnoser(Protocol):
    name: str

    def diagnose(self, inp: DiagnosisInput, config: Any) -> DiagnosisResult:
        """Read one round's diagnosis input and propose a change to `config`."""
        ...

    def observe(self, config: Any, score: float) -> None:
        """Learn the dev score a config earned (only model-based searchers use it)."""
        ...


def make_diagnoser(name: str, *, seed: int, client: Any = None) -> Diagnoser:
    if name == "rubric":
        from evolvemem.diagnosers.rubric import RubricDiagnoser
        return RubricDiagnoser()
    if name == "random":
        from evolvemem.diagnosers.random_search import RandomDiagnoser
        return RandomDiagnoser(seed)
    if name == "tpe":
        from evolvemem.diagnosers.tpe import TPEDiagnoser
        return TPEDiagnoser(seed)
    if name == "llm":
        if client is None:
            raise EvolveMemError("--diagnoser llm needs a model: pass --model or --diagnosis-model")
        from evolvemem.diagnosers.llm import LLMDiagnoser
        return LLMDiagnoser(client)
    raise EvolveMemError(f"unknown diagnoser {name!r} (known: {', '.join(DIAGNOSERS)})")
