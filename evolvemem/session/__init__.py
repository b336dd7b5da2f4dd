"""The library's verbs, and the only thing the CLI imports besides the action space and rendering.

`Session` creates, resumes and scores runs (session.py); `open_run` opens one read-only for
inspection; the rest turns what a user typed into validated inputs. The CLI imports this package
inside its commands (its defaults live in cli/defaults.py), so `evolve --help` does not import the
engine."""

from __future__ import annotations

from evolvemem.answering.evaluate import ANSWER_THREAD_PREFIX, evaluate
from evolvemem.contracts.local_models import LocalModels
from evolvemem.data.split import SPLITS
from evolvemem.diagnosers import DIAGNOSERS, diagnoser_entry
from evolvemem.executor import EXECUTORS, open_executor
from evolvemem.loop.held_out import stored_held_out
from evolvemem.loop.outcome import RoundFacts, RoundOutcome, round_outcomes
from evolvemem.loop.result import RunResult
from evolvemem.loop.runner import Hooks
from evolvemem.loop.spec import GuardSettings, OBJECTIVES, RunSpec, candidates_problem, default_objective
from evolvemem.roles.factory import ModelSettings
from evolvemem.scoring.locomo import PROTOCOLS, check_protocol
from evolvemem.session.inputs import (
    best_config_path,
    load_config_reporting,
    load_split,
    model_settings,
    resolve_config,
    run_local_models,
    small_transfer_warning,
    start_config,
)
from evolvemem.session.reporter import QuietReporter, Reporter
from evolvemem.session.session import EvalResult, Session, compare_rounds, open_run
from evolvemem.session.setup import open_workspace
from evolvemem.store.costs import EvaluationCost, round_costs, total_cost, vs_full_text
from evolvemem.store.run_store import RunLockedError, RunStore

__all__ = [
    "ANSWER_THREAD_PREFIX",
    "DIAGNOSERS",
    "EXECUTORS",
    "EvalResult",
    "EvaluationCost",
    "GuardSettings",
    "Hooks",
    "LocalModels",
    "ModelSettings",
    "OBJECTIVES",
    "PROTOCOLS",
    "QuietReporter",
    "Reporter",
    "RoundFacts",
    "RoundOutcome",
    "RunLockedError",
    "RunResult",
    "RunSpec",
    "RunStore",
    "SPLITS",
    "Session",
    "best_config_path",
    "candidates_problem",
    "check_protocol",
    "compare_rounds",
    "default_objective",
    "diagnoser_entry",
    "evaluate",
    "load_config_reporting",
    "load_split",
    "model_settings",
    "open_executor",
    "open_run",
    "open_workspace",
    "resolve_config",
    "round_costs",
    "round_outcomes",
    "run_local_models",
    "small_transfer_warning",
    "start_config",
    "stored_held_out",
    "total_cost",
    "vs_full_text",
]
