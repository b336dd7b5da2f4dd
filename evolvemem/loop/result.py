"""`RunResult`: what a finished (or resumed) run hands back — its rounds, best round and scores.

Its own module because both the runner (which fills it) and the round snapshots (which write
`result.json` from it) need it, and neither should import the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evolvemem.loop.paired import Comparison
from evolvemem.space.changes import Change
from evolvemem.store.costs import EvaluationCost, RoundCost
from evolvemem.store.rows import RoundSummary, RoundUsage, ScreeningRow


@dataclass(frozen=True)
class RoundDone:
    """One judged round as the loop reports it: to `Hooks.round_done` as it ends, and in `RunResult.rounds`."""

    round: int
    dev: RoundSummary  # the dev evaluation, as the store holds it
    score: float  # its objective
    accepted: bool  # it beat the incumbent on paired evidence
    verdict: str
    paired: Comparison | None  # against the incumbent (None: the start round)
    decision: str  # what the guard decided for the next round (contracts/vocab.Decision)
    fallback: str | None
    flags: list[str]
    emerged_used: list[str]  # levers that emerged in this run and the evaluated config switched on
    reason: str
    changes: list[Change]  # what the next round's config changes
    memories_added: int
    seconds: float
    eval_seconds: float
    usage: RoundUsage | None  # calls, cache hits and tokens over the round's phases (None: no call)
    screenings: list[ScreeningRow]
    cost: RoundCost | None  # against a full evaluation (store/costs.py)


@dataclass
class RunResult:
    run_dir: Path
    rounds: list[RoundDone] = field(default_factory=list)
    best_round: int = 0
    best_config_path: Path | None = None
    dev: dict[str, Any] = field(default_factory=dict)
    test: dict[str, Any] = field(default_factory=dict)
    cost: EvaluationCost | None = None  # the rounds' evaluations against full evaluation (store/costs.py)
