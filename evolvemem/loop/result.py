"""`RunResult`: what a finished (or resumed) run hands back — its rounds, best round and scores.

Its own module because both the runner (which fills it) and the round snapshots (which write
`result.json` from it) need it, and neither should import the other."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunResult:
    run_dir: Path
    rounds: list[dict] = field(default_factory=list)
    best_round: int = 0
    best_config_path: Path | None = None
    dev: dict = field(default_factory=dict)
    test: dict = field(default_factory=dict)
    cost: dict = field(default_factory=dict)  # the rounds' evaluations against full evaluation (store/costs.py)
