"""Parsimony: a lever the loop switches on must pay for itself.

"Not significantly worse" used to be enough for the next round to build on a change, so levers
switched on by a proposal or an exploration rode along for free and configs only grew. Now a
judged round that brings no significant gain over the incumbent and switches on a lever the
incumbent has off is refused: the next round builds on the incumbent, as after a loss.

A lever is a setting with an off state that costs something when on: a mechanism
(`mechanism = { off = ... }` in action_space/: retrieval work, context lines or answer tokens)
or a setting that asks a model (`model_calls`). The rule reads only the two configs, never a
clock, so a run decides the same on any machine; retrieval ms and context tokens are reported
beside (`evolve show --frontier`), not priced here."""

from __future__ import annotations

from collections.abc import Callable

from evolvemem.space.config import RetrievalConfig
from evolvemem.space.dimensions import Dimension


def settings_on(config: RetrievalConfig, which: Callable[[Dimension], bool]) -> set[str]:
    """The settings `which` picks that `config` has on, globally or in any per-type override."""
    values = config.values()
    overrides = config.overrides().values()
    return {
        name
        for name, dim in config.space.items()
        if dim.has_off_state()
        and which(dim)
        and (not dim.is_off(values.get(name)) or any(name in o and not dim.is_off(o[name]) for o in overrides))
    }


def _costly(dim: Dimension) -> bool:
    """A mechanism (retrieval work, context lines, answer tokens) or a setting that asks a model."""
    return dim.mechanism_off is not None or dim.model_calls


def levers_switched_on(candidate: RetrievalConfig, incumbent: RetrievalConfig) -> list[str]:
    """The costly levers `candidate` has on (anywhere) that `incumbent` has off everywhere, in the
    order the space lists them."""
    added = settings_on(candidate, _costly) - settings_on(incumbent, _costly)
    return [name for name in candidate.space if name in added]


def parsimony_refusal(round_no: int, candidate: RetrievalConfig, best_round: int, best: RetrievalConfig) -> str:
    """Why the guard does not build on a judged round that gained nothing significant ("" when it
    switched no lever on)."""
    switched = levers_switched_on(candidate, best)
    if not switched:
        return ""
    return (
        f"round {round_no} switches on {', '.join(switched)} for no significant gain over round {best_round} "
        "(parsimony: a lever must pay for itself)"
    )
