"""The library's verbs, and the only thing the CLI imports besides the registry and rendering.

`Session` creates, resumes and scores runs (session.py); `open_run` opens one read-only for
inspection; the rest turns what a user typed into validated inputs. Names are resolved on first
use, so `evolve --help` does not import the engine."""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "ANSWER_THREAD_PREFIX": "evolvemem.answering.evaluate",
    "SPLITS": "evolvemem.data.split",
    "DIAGNOSERS": "evolvemem.diagnosers",
    "diagnoser_entry": "evolvemem.diagnosers",
    "EXECUTORS": "evolvemem.executor",
    "open_executor": "evolvemem.executor",
    "GuardSettings": "evolvemem.loop.spec",
    "candidates_problem": "evolvemem.loop.candidates",
    "Hooks": "evolvemem.loop.runner",
    "RunResult": "evolvemem.loop.result",
    "OBJECTIVES": "evolvemem.loop.spec",
    "default_objective": "evolvemem.loop.spec",
    "RunSpec": "evolvemem.loop.spec",
    "PROTOCOLS": "evolvemem.scoring.locomo",
    "check_protocol": "evolvemem.scoring.locomo",
    "best_config_path": "evolvemem.session.inputs",
    "load_config_reporting": "evolvemem.session.inputs",
    "load_split": "evolvemem.session.inputs",
    "model_settings": "evolvemem.session.inputs",
    "resolve_init": "evolvemem.session.inputs",
    "start_config": "evolvemem.session.inputs",
    "run_rerank_model": "evolvemem.session.inputs",
    "ModelSettings": "evolvemem.roles.factory",
    "QuietReporter": "evolvemem.session.reporter",
    "Reporter": "evolvemem.session.reporter",
    "evaluate_config": "evolvemem.session.setup",
    "open_workspace": "evolvemem.session.setup",
    "EvalResult": "evolvemem.session.session",
    "Session": "evolvemem.session.session",
    "open_run": "evolvemem.session.session",
    "compare_rounds": "evolvemem.session.session",
    "RunLockedError": "evolvemem.store.run_store",
    "RunStore": "evolvemem.store.run_store",
    "headline": "evolvemem.store.run_store",
    "round_costs": "evolvemem.store.costs",
    "total_cost": "evolvemem.store.costs",
    "vs_full_text": "evolvemem.store.costs",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'evolvemem.session' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
