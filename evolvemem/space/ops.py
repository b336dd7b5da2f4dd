"""Operations on configs generated from the registry: diff, perturbation, Optuna, prompt text."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from evolvemem.space.config import OVERRIDES, RetrievalConfig, parse_config
from evolvemem.space.registry import Dimension, registry


@dataclass(frozen=True)
class Change:
    """One value that differs between two configs (`scope` is "global" or a question type)."""

    field: str
    old: Any
    new: Any
    scope: str = "global"

    def __str__(self) -> str:
        where = "" if self.scope == "global" else f"[{self.scope}] "
        return f"{where}{self.field}: {self.old!r} -> {self.new!r}"

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "old": self.old, "new": self.new, "scope": self.scope}


def diff_configs(old: Any, new: Any) -> list[Change]:
    """Every global value and every per-type override value that differs."""
    changes = [Change(k, v, new.values()[k]) for k, v in old.values().items() if new.values()[k] != v]
    old_o, new_o = old.overrides(), new.overrides()
    for qtype in sorted(set(old_o) | set(new_o)):
        a, b = old_o.get(qtype, {}), new_o.get(qtype, {})
        for key in sorted(set(a) | set(b)):
            if a.get(key, "(global)") != b.get(key, "(global)"):
                changes.append(Change(key, a.get(key, "(global)"), b.get(key, "(global)"), qtype))
    return changes


def sample_value(dim: Dimension, rng: random.Random, current: Any = None) -> Any:
    """A random value of one dimension, different from `current` where the space allows."""
    value: Any = current
    low, high = float(dim.min or 0), float(dim.max or 0)  # numeric dimensions always have both
    for _ in range(8):
        if dim.kind == "bool":
            value = rng.random() < 0.5
        elif dim.kind == "enum":
            value = rng.choice(dim.choices)
        elif (dim.off is not None or dim.optional) and rng.random() < 0.2:
            value = None if dim.optional else dim.off
        elif dim.kind == "int":
            value = rng.randint(int(low), int(high))
        else:
            value = round(rng.uniform(low, high), 3)
        if value != current:
            return value
    return value


def perturb(
    config: Any, rng: random.Random, n_dims: int = 3, names: list[str] | None = None
) -> tuple[Any, list[Change]]:
    """Change `n_dims` randomly chosen global dimensions to random values within their ranges."""
    dims = registry()
    pool = names or list(dims)
    chosen = rng.sample(pool, k=min(n_dims, len(pool)))
    values = config.values()
    updates = {name: sample_value(dims[name], rng, values[name]) for name in chosen}
    new, _ = config.with_changes(updates)
    return new, diff_configs(config, new)


def suggest_config(trial: Any, base: Any | None = None) -> Any:
    """Sample a whole config from an Optuna trial (define-by-run, so off/null are conditional)."""
    base = base or RetrievalConfig()
    values: dict[str, Any] = {}
    for name, dim in registry().items():
        if dim.kind == "bool":
            values[name] = trial.suggest_categorical(name, [False, True])
            continue
        if dim.kind == "enum":
            values[name] = trial.suggest_categorical(name, list(dim.choices))
            continue
        if dim.off is not None or dim.optional:
            if not trial.suggest_categorical(f"{name}__on", [True, False]):
                values[name] = None if dim.optional else dim.off
                continue
        if dim.kind == "int":
            values[name] = trial.suggest_int(name, int(dim.min or 0), int(dim.max or 0))
        else:
            values[name] = trial.suggest_float(name, float(dim.min or 0), float(dim.max or 0))
    values[OVERRIDES] = base.overrides()
    return parse_config(values, source="optuna trial")[0]


def optuna_distributions() -> dict[str, Any]:
    """Flat Optuna distributions of every dimension (for `study.ask(fixed_distributions)`)."""
    import optuna.distributions as od

    out: dict[str, Any] = {}
    for name, dim in registry().items():
        if dim.kind == "bool":
            out[name] = od.CategoricalDistribution([False, True])
        elif dim.kind == "enum":
            out[name] = od.CategoricalDistribution(list(dim.choices))
        elif dim.kind == "int":
            out[name] = od.IntDistribution(int(dim.min or 0), int(dim.max or 0))
        else:
            out[name] = od.FloatDistribution(float(dim.min or 0), float(dim.max or 0))
    return out


def config_to_trial_params(config: Any) -> dict[str, Any]:
    """The params `suggest_config` would have sampled to produce `config` (to tell Optuna about
    configs it did not propose, e.g. the starting config)."""
    params: dict[str, Any] = {}
    for name, dim in registry().items():
        value = config.values()[name]
        if dim.kind in ("int", "float") and (dim.off is not None or dim.optional):
            on = value is not None and value != dim.off
            params[f"{name}__on"] = on
            if not on:
                continue
        params[name] = value
    return params


def action_space_text(per_type_only: bool = False, brief: bool = False) -> str:
    """The action space as the diagnosis model reads it, grouped, one line per dimension
    (`brief`: without the descriptions, for small context windows)."""
    lines: list[str] = []
    group = None
    for name, dim in registry().items():
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
