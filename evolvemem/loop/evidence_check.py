"""Proposals checked against the round's own evidence, whatever diagnoser made them.

A change is flagged when the diagnosis input contradicts its direction:
- it shrinks the context budget or a retrieval view while retrieval misses or budget cuts are
  the dominant failure (the evidence is not reaching the answer: less context cannot help);
- it switches off a view that put a memory into the context of a large share of the right
  answers (`view_credit`: the view that found the evidence);
- it repeats a move that was already tried and brought no gain (`failed_moves`), and the proposal
  brings nothing new beside it (a tried move paired with a new one is a new experiment, and so is a
  combination of tried moves never evaluated together: the rubric keeps a change that traded one
  group for the other together with a counterweight).
Random and TPE keep their nature (the flags are only recorded, so the report can show how often
each diagnoser proposed against the evidence); an LLM's flagged changes are rejected."""

from __future__ import annotations

from typing import Any

from evolvemem.contracts.vocab import FailureClass
from evolvemem.contracts.diagnosis import DiagnosisInput, Proposal, change_key, move_direction
from evolvemem.space.action_space import ActionSpace

MISSING_EVIDENCE = (FailureClass.RETRIEVAL_MISS, FailureClass.BUDGET_CUT)  # failures where less context cannot help
CONTEXT_SIZE = "max_context"
VIEW_SIZE_SUFFIX = "_top_k"  # `<view>_top_k` sets how many candidates the view contributes
CREDIT_SHARE = 0.3  # a view in the context of this share of right answers "found the evidence"


def _view_of(name: str) -> str | None:
    return name[: -len(VIEW_SIZE_SUFFIX)] if name.endswith(VIEW_SIZE_SUFFIX) else None


def _smaller(old: Any, new: Any, off: Any) -> bool:
    if new == off and old != off:
        return True
    return isinstance(old, (int, float)) and isinstance(new, (int, float)) and new < old


def _contradiction(
    name: str, old: Any, new: Any, off: Any, dominant: str | None, inp: DiagnosisInput, right: int
) -> str:
    """Why setting `name` from `old` to `new` goes against the round's evidence ("" if it does not)."""
    view = _view_of(name)
    if _smaller(old, new, off) and dominant in MISSING_EVIDENCE and (name == CONTEXT_SIZE or view is not None):
        return f"shrinks {name} ({old} → {new}) while {dominant} is the dominant failure"
    if (
        view is not None
        and new == off
        and old != off
        and right
        and inp.view_credit.get(view, 0) >= CREDIT_SHARE * right
    ):
        return f"switches off the {view} view, which was in the context of {inp.view_credit[view]} right answers"
    return ""


def contradictions(proposal: Proposal, inp: DiagnosisInput, space: ActionSpace) -> list[tuple[str, str, str]]:
    """(scope, field, why) for every change of `proposal` (settings of `space`) that the round's
    evidence contradicts."""
    dims = space
    dominant = inp.dominant_failure()
    failed = inp.failed_moves(space)
    right = max(inp.view_credit.values(), default=0)
    out = []
    moves = []
    for scope, settings in [("global", proposal.changes), *proposal.overrides.items()]:
        current = {**inp.config, **(inp.overrides.get(scope, {}) if scope != "global" else {})}
        for name, new in settings.items():
            old, dim = current.get(name), dims[name]
            # a bundle lever switched on is judged by the moves of its settings
            members = dim.maps_to if dim.maps_to and new and not old else {name: new}
            for member, value in members.items():
                why = _contradiction(member, current.get(member), value, dims[member].off, dominant, inp, right)
                if why:
                    out.append((scope, name, why if member == name else f"switches on {name}, which {why}"))
                    break
            moves.append((scope, name, new, (scope, name, move_direction(name, old, new, space)) in failed))
    contradicted = {(scope, name) for scope, name, _ in out}
    sound = [m for m in moves if (m[0], m[1]) not in contradicted]
    together = frozenset(change_key(scope, name, new) for scope, name, new, _ in sound)
    # nothing new and sound beside the tried moves, and not a combination of them never tried
    # as a whole (the rubric's counterweight bundles are such combinations): a repeat
    if all(m[3] for m in sound) and (len(sound) <= 1 or together in inp.tried_change_sets()):
        out += [
            (scope, name, f"repeats {name} → {new!r}, a move already tried without a gain")
            for scope, name, new, repeated in moves
            if repeated
        ]
    return out


def flag_proposal(proposal: Proposal, inp: DiagnosisInput, space: ActionSpace, reject: bool) -> list[str]:
    """Record the contradictions on the proposal (`flags`); with `reject`, also drop those
    changes (listed in `rejected` with the reason). Returns the flags."""
    found = contradictions(proposal, inp, space)
    proposal.flags = [f"{name} ({scope}): {why}" for scope, name, why in found]
    if reject:
        for scope, name, why in found:
            settings = proposal.changes if scope == "global" else proposal.overrides.get(scope, {})
            if settings.pop(name, None) is not None:
                proposal.rejected.append(f"{name} ({scope}): rejected, {why}")
        proposal.overrides = {q: s for q, s in proposal.overrides.items() if s}
    return proposal.flags
