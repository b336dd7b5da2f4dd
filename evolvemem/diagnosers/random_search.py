"""`random`: a random perturbation of a few dimensions within their ranges in the config's space (the
paper's ablation baseline). Deterministic per (seed, round) so a resumed run proposes the same."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from evolvemem.contracts.diagnosis import DiagnosisInput, DiagnosisResult, Proposal
from evolvemem.space.ops import perturb


if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig
    from evolvemem.llm.client import LLMClient


class RandomDiagnoser:
    name = "random"

    def __init__(self, seed: int, n_dims: int = 3):
        self.seed = seed
        self.n_dims = n_dims

    def diagnose(self, inp: DiagnosisInput, config: RetrievalConfig) -> DiagnosisResult:
        return DiagnosisResult(self._draw(config, random.Random(f"random-{self.seed}-{inp.round}")))

    def alternatives(self, inp: DiagnosisInput, config: RetrievalConfig, k: int) -> list[Proposal]:
        """`k` further draws, each seeded by (seed, round, draw)."""
        return [self._draw(config, random.Random(f"random-{self.seed}-{inp.round}-{i}")) for i in range(1, k + 1)]

    def _draw(self, config: RetrievalConfig, rng: random.Random) -> Proposal:
        _, changes = perturb(config, rng, self.n_dims)
        return Proposal(
            changes={c.field: c.new for c in changes}, rationale=f"random perturbation of {len(changes)} dimensions"
        )

    def observe(self, config: RetrievalConfig, score: float) -> None:
        return None


def create(seed: int, client: LLMClient | None) -> RandomDiagnoser:
    return RandomDiagnoser(seed)
