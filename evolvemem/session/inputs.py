"""Turning what a user typed into validated inputs: model settings, configs, datasets."""
from __future__ import annotations

import os
from pathlib import Path

from evolvemem.benchmarks import load_benchmark
from evolvemem.data.models import Dataset
from evolvemem.data.split import split_dataset
from evolvemem.errors import EvolveMemError
from evolvemem.roles.factory import ModelSettings
from evolvemem.session.reporter import Reporter
from evolvemem.store.run_store import RunStore
from evolvemem.space.config import RetrievalConfig, load_config, parse_config
from evolvemem.space.emerged import load_run_dimensions

BEST_CONFIG = "best_config.toml"


def model_settings(model: str | None = None, extract_model: str | None = None, answer_model: str | None = None,
                   diagnosis_model: str | None = None, judge_model: str | None = None, api_base: str | None = None,
                   classify_model: str | None = None, context_window: int | None = None) -> ModelSettings:
    """Per-role models; `model` (or EVOLVEMEM_MODEL) is every role's default."""
    return ModelSettings(model=model or os.environ.get("EVOLVEMEM_MODEL"), extract_model=extract_model,
                         answer_model=answer_model, diagnosis_model=diagnosis_model, judge_model=judge_model,
                         api_base=api_base, classify_model=classify_model, context_window=context_window)


def load_config_reporting(reporter: Reporter, name_or_path: str) -> RetrievalConfig:
    """A preset or a config file; clamped values are reported as warnings."""
    config, clamps = load_config(name_or_path)
    for clamp in clamps:
        reporter.warn(str(clamp))
    return config


def best_config_path(run_dir: str | Path) -> Path:
    """A finished run's exported best config (usable with --config and --init)."""
    path = Path(run_dir) / BEST_CONFIG
    if not path.is_file():
        raise EvolveMemError(f"{run_dir}: no {BEST_CONFIG} (is the run finished?)")
    return path


def manifest_start_config(manifest: dict, run_dir: str | Path) -> RetrievalConfig:
    """The config a run started from (its round 0), as its manifest holds it."""
    if "init_config" not in manifest:
        raise EvolveMemError(f"{run_dir}: not an evolve run (no starting config in its manifest)")
    return parse_config(manifest["init_config"], source=f"{run_dir} manifest")[0]


def start_config(run_dir: str | Path) -> RetrievalConfig:
    """The starting config of a finished run, read from its directory."""
    load_run_dimensions(Path(run_dir))  # a start from another run's config names its levers
    with RunStore(Path(run_dir), read_only=True) as store:
        return manifest_start_config(store.manifest(), run_dir)


def resolve_init(reporter: Reporter, init: str) -> RetrievalConfig:
    """A preset, a config file, or a run directory (its best config)."""
    return load_config_reporting(reporter, str(best_config_path(init)) if Path(init).is_dir() else init)


def load_split(benchmark: str, data: str | None, split: str) -> tuple[Dataset, Dataset]:
    """A benchmark and (the full dataset, the requested split)."""
    dataset = load_benchmark(benchmark, data)
    return dataset, split_dataset(dataset, split)
