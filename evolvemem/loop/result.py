"""`RunResult`: what a finished (or resumed) run hands back — its rounds, best round and scores.

Its own module because both the runner (which fills it) and the round snapshots (which write
`result.json` from it) need it, and neither should import the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evolvemem.loop.frontier import FrontierPoint
from evolvemem.loop.outcome import RoundOutcome
from evolvemem.store.costs import EvaluationCost


@dataclass
class RunResult:
    run_dir: Path
    rounds: list[RoundOutcome] = field(default_factory=list)
    best_round: int = 0
    best_config_path: Path | None = None
    dev: dict[str, Any] = field(default_factory=dict)
    test: dict[str, Any] = field(default_factory=dict)
    frontier: list[FrontierPoint] = field(default_factory=list)  # `--budgets`: each budget's best (loop/frontier.py)
    cost: EvaluationCost | None = None  # the rounds' evaluations against full evaluation (store/costs.py)
