"""Readable files beside the DuckDB store: one folder per round and the exported best config.

runs/<id>/rounds/round_03/config.toml       the config that produced round 3's score
                          decision.json     the guard's decision and the next config's changes
                          diagnosis_input.json, diagnosis_prompt.md, proposal.json
                          (the model's raw reply is kept once, in the store: diagnoses.raw_response)
                          new_dimensions/<name>.toml  a lever that emerged (written by space/emerged.py)
runs/<id>/best_config.toml                  usable with --config and --init
runs/<id>/best_config.<tokens>.toml         a frontier run (`--budgets`): each budget's best config
runs/<id>/result.json                       dev and test scores for start and best"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from evolvemem.contracts.diagnosis import DiagnosisResult
from evolvemem.paths import write_atomic
from evolvemem.space.config import RetrievalConfig, config_to_toml
from evolvemem.store.rows import DecisionRow

if TYPE_CHECKING:
    from evolvemem.loop.frontier import FrontierPoint
    from evolvemem.loop.guard import RoundScore
    from evolvemem.loop.result import RunResult


def _dump(path: Path, payload: Any) -> None:
    path.write_text(json.dumps(payload, indent=2, default=str, ensure_ascii=False) + "\n", encoding="utf-8")


def round_dir(run_dir: Path, round_no: int) -> Path:
    path = Path(run_dir) / "rounds" / f"round_{round_no:02d}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_round_snapshot(
    run_dir: Path,
    round_no: int,
    config: RetrievalConfig,
    decision: DecisionRow,
    diagnosis_input: dict[str, Any] | None,
    diagnosis: DiagnosisResult | None,
) -> None:
    folder = round_dir(run_dir, round_no)
    (folder / "config.toml").write_text(
        config_to_toml(config, header=f"config evaluated in round {round_no} (fingerprint {config.fingerprint()})"),
        encoding="utf-8",
    )
    _dump(folder / "decision.json", {k: v for k, v in decision.as_row().items() if k != "next_config"})
    if diagnosis_input is not None:
        _dump(folder / "diagnosis_input.json", diagnosis_input)
    if diagnosis is not None:
        _dump(folder / "proposal.json", diagnosis.proposal.as_dict())
        if diagnosis.prompt:
            (folder / "diagnosis_prompt.md").write_text(diagnosis.prompt, encoding="utf-8")


def write_final(run_dir: Path, best: RoundScore, start: RoundScore, result: RunResult) -> Path:
    path = Path(run_dir) / "best_config.toml"
    write_atomic(  # a server watching the file never reads half of it
        path,
        config_to_toml(
            best.config,
            header=(
                f"best config of run {Path(run_dir).name}: round {best.round}, dev objective {best.score:.4f}\n"
                f"use with: evolve eval --config {path}  or  evolve run --init {run_dir}"
            ),
        ),
    )
    _dump(
        Path(run_dir) / "result.json",
        {
            "best_round": best.round,
            "best_score": best.score,
            "start_score": start.score,
            "dev": result.dev,
            "test": result.test,
            **({"frontier": [point.as_dict() for point in result.frontier]} if result.frontier else {}),
        },
    )
    return path


def frontier_config_name(tokens: int) -> str:
    """The file a frontier run exports its best config at `tokens` to."""
    return f"best_config.{tokens}.toml"


def write_frontier_configs(
    run_dir: Path, points: list[FrontierPoint], config_of: Callable[[int, int], RetrievalConfig]
) -> None:
    """`best_config.<tokens>.toml` for each budget of a frontier run: the budget's best round's
    config carrying that budget (`[token_budget]`, ranked as the run ranked it)."""
    for point in points:
        path = Path(run_dir) / frontier_config_name(point.tokens)
        header = (
            f"best config of run {Path(run_dir).name} at {point.tokens} context tokens: round {point.best_round}\n"
            f"use with: evolve eval --config {run_dir} --budget {point.tokens}"
        )
        write_atomic(path, config_to_toml(config_of(point.best_round, point.tokens), header=header))
