"""`RunResult`: what a finished (or resumed) run hands back — its rounds, best round and scores.

Its own module because both the runner (which fills it) and the round snapshots (which write
`result.json` from it) need it, and neither should import the other."""
from __future__ import annotations

from typing import Any

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunResult:
    run_dir: Path
    rounds: list[dict[str, Any]] = field(default_factory=list)
    best_round: int = 0
    best_config_path: Path | None = None
    dev: dict[str, Any] = field(default_factory=dict)
    test: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, Any] = field(default_factory=dict)  # the rounds' evaluations against full evaluation (store/costs.py)
