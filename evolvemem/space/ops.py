"""Operations on configs and their action space: diff, perturbation, Optuna, prompt text."""

from __future__ import annotations

import random
from typing import Any

from evolvemem.space.acting import config_idle_changes
from evolvemem.space.action_space import ActionSpace
from evolvemem.space.changes import Change
from evolvemem.space.config import OVERRIDES, RetrievalConfig, parse_config
from evolvemem.space.dimensions import NumericDimension


def diff_configs(old: RetrievalConfig, new: RetrievalConfig) -> list[Change]:
    """Every global value and every per-type override value that differs (a lever only one of the
    two spaces has reads as its default in the other)."""
    levers = (*old.space.added(), *new.space.added())
    before, after = old.values(), new.values()
    for dim in levers:
        before.setdefault(dim.name, dim.default)
        after.setdefault(dim.name, dim.default)
    changes = [Change(k, v, after[k]) for k, v in before.items() if after[k] != v]
    old_o, new_o = old.overrides(), new.overrides()
    for qtype in sorted(set(old_o) | set(new_o)):
        a, b = old_o.get(qtype, {}), new_o.get(qtype, {})
        for key in sorted(set(a) | set(b)):
            if a.get(key, "(global)") != b.get(key, "(global)"):
                changes.append(Change(key, a.get(key, "(global)"), b.get(key, "(global)"), qtype))
    return changes


def perturb(
    config: RetrievalConfig, rng: random.Random, n_dims: int = 3, names: list[str] | None = None
) -> tuple[RetrievalConfig, list[Change]]:
    """Change `n_dims` randomly chosen global dimensions of the config's space to random values
    within their ranges, each one that acts under the config they make (space/acting.py)."""
    dims = config.space
    pool = names or list(dims)
    chosen = rng.sample(pool, k=min(n_dims, len(pool)))
    values = config.values()
    updates = {name: dims[name].sample(rng, values[name]) for name in chosen}
    new, _ = config.with_changes(_acting_draws(config, updates, pool, rng, n_dims))
    return new, diff_configs(config, new)


def _acting_draws(
    config: RetrievalConfig, updates: dict[str, Any], pool: list[str], rng: random.Random, n_dims: int
) -> dict[str, Any]:
    """`updates` without the draws that would act on nothing, each dropped one replaced by a draw
    of a dimension of `pool` not drawn yet. The generator is read again only when a draw is
    dropped: a perturbation whose draws all act is the one drawn without this rule."""
    dims, values = config.space, config.values()
    drawn = set(updates)
    while idle := config_idle_changes(config, updates):
        for name in idle:
            del updates[name]
        left = [name for name in pool if name not in drawn]
        extra = rng.sample(left, k=min(n_dims - len(updates), len(left)))
        drawn.update(extra)
        updates.update({name: dims[name].sample(rng, values[name]) for name in extra})
    return updates


def suggest_config(trial: Any, base: RetrievalConfig | None = None) -> RetrievalConfig:
    """Sample a whole config of `base`'s space from an Optuna trial (define-by-run, so off/null
    are conditional)."""
    base = base or RetrievalConfig()
    values: dict[str, Any] = {name: dim.suggest(trial) for name, dim in base.space.items()}
    values[OVERRIDES] = base.overrides()
    return parse_config(values, source="optuna trial", space=base.space)[0].with_budget(base.budget)


def optuna_distributions(space: ActionSpace) -> dict[str, Any]:
    """Flat Optuna distributions of every dimension (for `study.ask(fixed_distributions)`)."""
    return {name: dim.optuna_distribution() for name, dim in space.items()}


def config_to_trial_params(config: RetrievalConfig) -> dict[str, Any]:
    """The params `suggest_config` would have sampled to produce `config` (to tell Optuna about
    configs it did not propose, e.g. the starting config)."""
    params: dict[str, Any] = {}
    values = config.values()
    for name, dim in config.space.items():
        value = values[name]
        if isinstance(dim, NumericDimension) and dim.can_switch_off():
            on = value is not None and value != dim.off
            params[f"{name}__on"] = on
            if not on:
                continue
        params[name] = value
    return params


def action_space_text(space: ActionSpace, per_type_only: bool = False, brief: bool = False) -> str:
    """The action space as the diagnosis model reads it, grouped, one line per dimension
    (`brief`: without the descriptions, for small context windows)."""
    lines: list[str] = []
    group = None
    for name, dim in space.items():
        if per_type_only and not dim.per_type:
            continue
        if dim.group != group:
            group = dim.group
            lines.append(f"## {group}")
        tag = " [per-type]" if dim.per_type else ""
        about = "" if brief else f": {dim.description}"
        if dim.maps_to:  # a bundle: what switching it on sets
            about += f" [true sets {', '.join(f'{k}={v!r}' for k, v in dim.maps_to.items())}]"
        lines.append(f"- {name} ({dim.kind}: {dim.range_text()}; default {dim.default!r}){tag}{about}")
    return "\n".join(lines)
