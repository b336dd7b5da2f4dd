"""Pieces shared by several commands: default run directories."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path


def default_run_dir(kind: str, benchmark: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{kind}-{benchmark}-{stamp}"
