"""What is tuned is what is served: a run's token budget travels with the config it hands on.

A run evolved at `--context-tokens N` measured every context at N tokens. Its best config, loaded
by any command that starts from the run directory — `evolve eval --config RUN`, `evolve transfer
RUN`, `Memory.open(..., RUN)` (what `evolve serve` and `evolve mcp` open), `evolve run --init RUN` —
must give the very contexts the run measured, with no `--context-tokens` repeated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evolvemem.benchmarks import load_benchmark
from evolvemem.data.split import split_dataset
from evolvemem.errors import ConfigError
from evolvemem.space.budget import TokenBudget
from evolvemem.space.config import config_to_toml, load_config
from evolvemem.store.run_store import RunStore
from tests.test_memory_api import add_turn_by_turn

EVOLVE = [sys.executable, "-m", "evolvemem.cli.main"]
BUDGET = 120  # small enough to cut the synthetic conversations' contexts


def evolve(*args: str | Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*EVOLVE, *map(str, args), "--quiet"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def contexts(run_dir: Path, round_no: int, phase: str) -> dict[str, tuple[str, ...]]:
    with RunStore(run_dir, read_only=True) as store:
        rows = store.round_records(round_no, phase)
    assert rows, f"{run_dir}: no records for round {round_no} {phase}"
    return {r.question_id: tuple(r.context_ids or ()) for r in rows}


@pytest.fixture(scope="module")
def budgeted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("budget") / "run"
    evolve("run", "--benchmark", "synth", "--rounds", "2", "--context-tokens", str(BUDGET), "--out", run_dir)
    return run_dir


def test_the_best_config_file_carries_the_budget_and_loads_with_it(budgeted_run):
    config, _ = load_config(str(budgeted_run / "best_config.toml"))
    assert config.budget == TokenBudget(BUDGET)
    assert config.token_limit == BUDGET or 0 < config.token_limit < BUDGET  # its own budget may be smaller
    snapshot, _ = load_config(str(budgeted_run / "rounds" / "round_00" / "config.toml"))
    assert snapshot.budget == TokenBudget(BUDGET)
    # written and read back: the same values and the same budget
    again = budgeted_run.parent / "again.toml"
    again.write_text(config_to_toml(config))
    assert load_config(str(again))[0] == config


@pytest.mark.slow
def test_every_command_started_from_the_run_gets_the_contexts_it_measured(budgeted_run, tmp_path):
    with RunStore(budgeted_run, read_only=True) as store:
        best = store.best_round()
    measured = contexts(budgeted_run, best, "test_best")

    evolve("eval", "--benchmark", "synth", "--config", budgeted_run, "--split", "test", "--out", tmp_path / "eval")
    assert contexts(tmp_path / "eval", 0, "eval") == measured
    evolve("transfer", budgeted_run, "--benchmark", "synth", "--split", "test", "--out", tmp_path / "transfer")
    assert contexts(tmp_path / "transfer", 0, "eval") == measured
    # the budget binds: told another budget, the same config hands other contexts
    evolve(
        "eval", "--benchmark", "synth", "--config", budgeted_run, "--split", "test",
        "--context-tokens", "4000", "--out", tmp_path / "wide",
    )  # fmt: skip
    assert contexts(tmp_path / "wide", 0, "eval") != measured

    evolve("run", "--benchmark", "synth", "--rounds", "0", "--init", budgeted_run, "--out", tmp_path / "init")
    with RunStore(tmp_path / "init", read_only=True) as store:
        assert store.manifest()["spec"]["token_budget"] == BUDGET


def test_a_served_run_directory_hands_the_measured_contexts(budgeted_run, tmp_path):
    from evolvemem import Memory

    with RunStore(budgeted_run, read_only=True) as store:
        best = store.best_round()
    measured = contexts(budgeted_run, best, "test_best")
    test = split_dataset(load_benchmark("synth", None), "test")
    with Memory.open(tmp_path / "memory.duckdb", budgeted_run) as memory:
        for conversation in test.conversations.values():
            add_turn_by_turn(memory, conversation)
        served = {
            q.question_id: tuple(memory.context(q.conversation_id, q.text, question_type=q.question_type).memory_ids)
            for q in test.questions
        }
    assert served == measured


def test_a_malformed_budget_table_is_one_clear_error(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("max_context = 8\n\n[token_budget]\ntokens = 0\n")
    with pytest.raises(ConfigError, match=r"config.toml: a token budget must be 1 or more"):
        load_config(str(path))
    path.write_text("max_context = 8\n\n[token_budget]\ntokens = 600\nsize = 3\n")
    with pytest.raises(ConfigError, match=r"\[token_budget\] holds tokens"):
        load_config(str(path))
