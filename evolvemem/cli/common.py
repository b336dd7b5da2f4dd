"""Pieces shared by several commands: loading data and configs, building roles, run dirs."""
from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from evolvemem.cli.ui import UI



def load_split(benchmark: str, data: str | None, split: str, seed: int = 0) -> tuple[Any, Any]:
    """Load a benchmark and return (full dataset, the requested split)."""
    from evolvemem.data.loader import load_benchmark
    from evolvemem.data.split import split_dataset

    dataset = load_benchmark(benchmark, data)
    return dataset, split_dataset(dataset, split)


def load_config_reporting(ui: UI, name_or_path: str) -> Any:
    from evolvemem.space.config import load_config

    config, clamps = load_config(name_or_path)
    for clamp in clamps:
        ui.warn(str(clamp))
    return config


def model_settings(model: str | None, extract_model: str | None, answer_model: str | None,
                   diagnosis_model: str | None, judge_model: str | None, api_base: str | None,
                   classify_model: str | None = None) -> Any:
    from evolvemem.roles.factory import ModelSettings

    return ModelSettings(model=model or os.environ.get("EVOLVEMEM_MODEL"), extract_model=extract_model,
                         answer_model=answer_model, diagnosis_model=diagnosis_model, judge_model=judge_model,
                         api_base=api_base, classify_model=classify_model)


def reclassify_if_asked(ui: UI, dataset: Any, roles: Any) -> Any:
    """With --classify-model, let the LLM re-type the questions that only rules typed."""
    if roles.classifier is None:
        return dataset
    from evolvemem.roles.classify import reclassify

    dataset, changed, cost = reclassify(dataset, roles.classifier)
    ui.info(f"[dim]question types: the LLM re-typed {changed} rule-typed questions ({cost.calls} calls)[/dim]")
    return dataset


def announce_models(ui: UI, settings: Any) -> None:
    if settings.is_offline():
        ui.info("[dim]No model configured: using the offline roles (rule-based extraction, extractive reader, "
                "rubric diagnosis). Pass --model <litellm model> to use an LLM.[/dim]")
    else:
        roles = ", ".join(f"{role}={model}" for role, model in settings.as_dict().items())
        ui.info(f"[dim]Models: {roles}[/dim]")


def default_run_dir(kind: str, benchmark: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{kind}-{benchmark}-{stamp}"


def command_line() -> str:
    return " ".join(["evolve", *sys.argv[1:]])
