"""Turning what a user typed into validated inputs: model settings, configs, datasets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import os
from dataclasses import fields
from pathlib import Path

from evolvemem.benchmarks import load_benchmark
from evolvemem.contracts.local_models import LocalModels
from evolvemem.data.models import Dataset, Question
from evolvemem.data.split import split_dataset
from evolvemem.errors import ConfigError, EvolveMemError
from evolvemem.roles.factory import ModelSettings
from evolvemem.session.reporter import Reporter
from evolvemem.store.run_store import RunStore
from evolvemem.space.action_space import ActionSpace
from evolvemem.loop.frontier import point_config_file
from evolvemem.loop.spec import manifest_budget
from evolvemem.space.config import RetrievalConfig, load_config, parse_config
from evolvemem.space.emerged import run_space

BEST_CONFIG = "best_config.toml"
MODEL_ENV = "EVOLVEMEM_MODEL"  # every role's model when --model is not given


def model_settings(options: object) -> ModelSettings:
    """Per-role models from the fields of `options` (a command's option group) named like
    `ModelSettings`' own; EVOLVEMEM_MODEL is every role's default when `model` is not given."""
    given = {f.name: getattr(options, f.name) for f in fields(ModelSettings) if hasattr(options, f.name)}
    given["model"] = given.get("model") or os.environ.get(MODEL_ENV)
    return ModelSettings(**given)


def load_config_reporting(reporter: Reporter, name_or_path: str) -> RetrievalConfig:
    """A preset or a config file; clamped values are reported as warnings."""
    config, clamps = load_config(name_or_path)
    for clamp in clamps:
        reporter.warn(str(clamp))
    return config


def best_config_path(run_dir: str | Path, budget: int | None = None) -> Path:
    """A finished run's exported best config (usable with --config and --init); `budget`: its
    point at that token budget (loop/frontier.py)."""
    if budget is not None:
        return point_config_file(run_dir, budget)
    path = Path(run_dir) / BEST_CONFIG
    if not path.is_file():
        raise EvolveMemError(f"{run_dir}: no {BEST_CONFIG} (is the run finished?)")
    return path


def manifest_start_config(
    manifest: Mapping[str, Any], run_dir: str | Path, space: ActionSpace, budget: int | None = None
) -> RetrievalConfig:
    """The config a run started from (its round 0), as its manifest holds it, in the run's `space`
    and at the run's token budget (`budget`: at that one of a frontier run's, cut as it cut)."""
    if "init_config" not in manifest:
        raise EvolveMemError(f"{run_dir}: not an evolve run (no starting config in its manifest)")
    config = parse_config(manifest["init_config"], source=f"{run_dir} manifest", space=space)[0]
    measured = manifest_budget(manifest)
    return config.with_budget(measured if budget is None else measured.cut_at(budget))


def start_config(run_dir: str | Path, budget: int | None = None) -> RetrievalConfig:
    """The starting config of a finished run, read from its directory (in the run's space: a
    start from another run's config names its levers); `budget`: at that one of its budgets."""
    if budget is not None:
        point_config_file(run_dir, budget)  # one error naming the run's budgets
    space = run_space(Path(run_dir))
    with RunStore(Path(run_dir), read_only=True) as store:
        return manifest_start_config(store.manifest(), run_dir, space, budget)


def run_local_models(source: str | Path) -> LocalModels:
    """The local models a run evolved with (`--embedding-model`, `--rerank-model`,
    `--second-embedding-model`) when `source` is a run directory; none for a preset or a file."""
    if not Path(source).is_dir():
        return LocalModels()
    with RunStore(Path(source), read_only=True) as store:
        return LocalModels.from_spec(store.manifest().get("spec") or {})


def resolve_config(reporter: Reporter, source: str, budget: int | None = None) -> RetrievalConfig:
    """A preset, a config file, or a run directory (its best config; at `budget`, its point there)."""
    if budget is not None and not Path(source).is_dir():
        raise ConfigError(f"--budget picks a point of a run directory; {source} is not one")
    return load_config_reporting(reporter, str(best_config_path(source, budget)) if Path(source).is_dir() else source)


def load_split(benchmark: str, data: str | None, split: str) -> tuple[Dataset, Dataset]:
    """A benchmark and (the full dataset, the requested split)."""
    dataset = load_benchmark(benchmark, data)
    return dataset, split_dataset(dataset, split)


def small_dev_warning(dataset: Dataset, dev_ids: list[str], objective: str, alpha: float, min_effect: float) -> str:
    """A warning when the dev split is too small for the guard to accept a gain of
    DETECTABLE_TARGET, naming the smallest gain it could accept; "" when it is large enough."""
    from evolvemem.loop.paired import DETECTABLE_TARGET, judged_groups, questions_needed, smallest_detectable_gain

    dev = set(dev_ids)
    questions = [q for q in dataset.questions if q.conversation_id in dev]
    sizes = _group_sizes(dataset, questions, objective)
    judged = judged_groups(objective)
    gain = min(smallest_detectable_gain(sizes[g], alpha, min_effect) for g in judged)
    if gain <= DETECTABLE_TARGET:
        return ""
    groups = ", ".join(
        f"{sizes[g]} {'answerable' if g == 'main' else 'unanswerable' if g == 'adversarial' else 'in all'}"
        for g in judged
    )
    floor = "no gain at all" if gain == float("inf") else f"no mean gain below {gain:.2f}"
    return (
        f"the dev split is too small for the guard to detect a gain: {len(questions)} dev questions in "
        f"{len(dev)} conversation(s) ({groups}); at --alpha {alpha:g} it can accept {floor} on the "
        f"{objective} objective, even when every other answer stays the same. A gain of {DETECTABLE_TARGET:g} "
        f"needs at least {questions_needed(alpha)} dev questions in a judged group "
        "(docs/guides/custom-data.md#how-much-data)"
    )


def small_transfer_warning(dataset: Dataset, alpha: float) -> str:
    """`evolve transfer`'s paired comparison on too few answerable questions to tell a gain of
    DETECTABLE_TARGET from chance (the dev-split warning's rule); "" when there are enough."""
    from evolvemem.loop.paired import DETECTABLE_TARGET, questions_needed, smallest_detectable_gain

    answerable = _group_sizes(dataset, dataset.questions, "balanced")["main"]
    gain = smallest_detectable_gain(answerable, alpha)
    if gain <= DETECTABLE_TARGET:
        return ""
    floor = "no gain at all" if gain == float("inf") else f"no mean gain below {gain:.2f}"
    return (
        f"a small sample: {answerable} answerable questions; at alpha {alpha:g} the paired comparison can "
        f"call {floor} significant, and a gain of {DETECTABLE_TARGET:g} needs at least "
        f"{questions_needed(alpha)}: read its interval, not its point estimate"
    )


def _group_sizes(dataset: Dataset, questions: list[Question], objective: str) -> dict[str, int]:
    """Questions per paired group (an evidence objective judges only answerable ones with evidence)."""
    from evolvemem.loop.spec import CONTEXTS_ONLY

    adversarial = set(dataset.adversarial_categories)
    return {
        "main": sum(
            q.category not in adversarial and (objective != CONTEXTS_ONLY or bool(q.evidence)) for q in questions
        ),
        "adversarial": sum(q.category in adversarial for q in questions),
        "all": len(questions),
    }
