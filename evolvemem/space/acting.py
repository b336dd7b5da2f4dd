"""Whether a change acts: a dimension's value matters only where its `acts_when` holds
(`late_weight` under `sum` fusion, `rrf_k` outside rank fusion, a view's settings with the view
off). The one place diagnosers, menus, random and TPE proposals and the guard's explorations ask
"would this change alter anything?" before spending a round on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from evolvemem.space.budget import TokenBudget

if TYPE_CHECKING:
    from evolvemem.space.action_space import ActionSpace
    from evolvemem.space.config import RetrievalConfig


def acts(space: ActionSpace, name: str, values: Mapping[str, Any]) -> bool:
    """Whether dimension `name` acts under the effective `values` (one question's settings): one
    of its `acts_when` alternatives holds (a dimension without one, or unknown here, always acts)."""
    dim = space.get(name)
    if dim is None or not dim.acts_when:
        return True
    return any(
        all(c.holds(values.get(c.dimension), space[c.dimension]) for c in alternative) for alternative in dim.acts_when
    )


def effective_values(
    space: ActionSpace, values: Mapping[str, Any], override: Mapping[str, Any], budget: TokenBudget = TokenBudget()
) -> dict[str, Any]:
    """One question type's settings as the retriever sees them: the global `values`, its
    `override`, then what a switched-on bundle lever sets (as `RetrievalConfig.for_type` resolves
    them), with the context's token limit under the run's `budget` (`RetrievalConfig.token_limit`):
    under a run's budget, settings that act only without one do not act."""
    out = {**values, **override}
    for name, dim in space.items():
        if dim.maps_to and out.get(name):
            out.update({k: space[k].clamp(space[k].coerce(v)) for k, v in dim.maps_to.items() if k in space})
    if budget and "context_token_budget" in out:
        out["context_token_budget"] = budget.limit(int(out["context_token_budget"] or 0))
    return out


def idle_changes(
    space: ActionSpace,
    values: Mapping[str, Any],
    overrides: Mapping[str, Mapping[str, Any]],
    changes: Mapping[str, Any],
    question_type: str | None = None,
    budget: TokenBudget = TokenBudget(),
) -> list[str]:
    """The names in `changes` that would act on no question under the config they make: the
    global `values` and per-type `overrides` with `changes` applied globally, or to the override
    of `question_type`. A global change acts if it acts globally or for a type whose override
    leaves that setting to the global value."""
    if question_type is not None:
        settings = effective_values(space, values, {**overrides.get(question_type, {}), **changes}, budget)
        return [name for name in changes if not acts(space, name, settings)]
    new = {**values, **changes}
    overall = effective_values(space, new, {}, budget)
    typed = [(effective_values(space, new, override, budget), override) for override in overrides.values()]
    return [
        name
        for name in changes
        if not acts(space, name, overall)
        and not any(name not in override and acts(space, name, settings) for settings, override in typed)
    ]


def config_idle_changes(
    config: RetrievalConfig, changes: Mapping[str, Any], question_type: str | None = None
) -> list[str]:
    """`idle_changes` of `changes` made to `config` (globally, or to one type's override)."""
    return idle_changes(config.space, config.values(), config.overrides(), changes, question_type, config.budget)
