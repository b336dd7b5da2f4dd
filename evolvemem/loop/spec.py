"""`RunSpec` and `GuardSettings`: everything that defines a run, stored in its manifest so `--resume` needs only the
run directory."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


OBJECTIVES = ("all", "main")


@dataclass(frozen=True)
class GuardSettings:
    revert_threshold: float = 0.01
    stagnation_epsilon: float = 0.005
    stagnation_rounds: int = 2
    explore_dims: int = 3

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class RunSpec:
    benchmark: str
    data: str | None
    diagnoser: str
    rounds: int = 7
    init: str = "weak"
    seed: int = 0
    objective: str = "all"
    protocol: str = "official"
    models: dict[str, Any] = field(default_factory=dict)
    guard: GuardSettings = field(default_factory=GuardSettings)
    concurrency: int = 8
    embedding_model: str | None = None
    patience: int = 4
    reextract: bool = True
    cache_enabled: bool = True
    frozen: list[str] = field(default_factory=list)  # dimensions the loop may not change (--freeze)

    def as_dict(self) -> dict:
        out = asdict(self)
        out["guard"] = self.guard.as_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "RunSpec":
        data = dict(data)
        data["guard"] = GuardSettings(**data.get("guard", {}))
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})
