"""The guard (meta-analyzer): decide how the next round's config is made.

- revert: the score fell more than `revert_threshold` below the best so far → the next config
  is built from the best config, not from the regressed one;
- explore: `stagnation_rounds` rounds in a row moved the score by less than `stagnation_epsilon`,
  or the proposal is empty or would repeat an evaluated config → a random perturbation of a
  few dimensions of the base config;
- apply: otherwise the clamped proposal is applied to the base config.
The result of a run is the argmax-over-rounds config on dev."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from evolvemem.contracts.diagnosis import Proposal
from evolvemem.loop.spec import GuardSettings
from evolvemem.qtypes import LABEL_ONLY_TYPES
from evolvemem.space.config import RetrievalConfig
from evolvemem.space.config import ClampReport
from evolvemem.space.ops import Change, diff_configs, perturb


@dataclass
class RoundScore:
    round: int
    score: float
    config: RetrievalConfig


@dataclass
class Regression:
    """Which round's config the next step builds on, and whether that is a revert."""

    base: RoundScore
    best: RoundScore
    reverted: bool
    delta: float | None
    reason: str


@dataclass
class GuardDecision:
    decision: str
    reason: str
    next_config: RetrievalConfig
    changes: list[Change] = field(default_factory=list)
    clamps: list[ClampReport] = field(default_factory=list)


def check_regression(scores: list[RoundScore], settings: GuardSettings) -> Regression:
    """Judge the latest round against the best of the earlier ones."""
    current = scores[-1]
    earlier = scores[:-1]
    delta = current.score - earlier[-1].score if earlier else None
    best_before = max(earlier, key=lambda s: (s.score, -s.round)) if earlier else None
    best = current if best_before is None or current.score > best_before.score else best_before
    if best_before is not None and current.score < best_before.score - settings.revert_threshold:
        reason = (f"score {current.score:.4f} is {best_before.score - current.score:.4f} below the best "
                  f"(round {best_before.round}, {best_before.score:.4f}) > tau_rev {settings.revert_threshold}")
        return Regression(best_before, best, True, delta, reason)
    return Regression(current, best, False, delta, "")


def _stagnating(scores: list[RoundScore], settings: GuardSettings) -> bool:
    if len(scores) <= settings.stagnation_rounds:
        return False
    recent = scores[-(settings.stagnation_rounds + 1):]
    return all(abs(b.score - a.score) < settings.stagnation_epsilon for a, b in zip(recent, recent[1:]))


def decide(scores: list[RoundScore], regression: Regression, proposal: Proposal, settings: GuardSettings,
           rng: random.Random, seen_fingerprints: set[str], free_dims: list[str] | None = None) -> GuardDecision:
    """Produce the next config from the base config, the proposal and the score history.
    Exploration perturbs only `free_dims` (default: every dimension)."""
    base = regression.base.config
    for qtype in LABEL_ONLY_TYPES:
        if proposal.overrides.pop(qtype, None) is not None:
            proposal.rejected.append(f"overrides for {qtype} are not applied (they would use the label)")
    candidate, clamps = proposal.apply_to(base)
    why_explore = ""
    if not regression.reverted and _stagnating(scores, settings):
        why_explore = (f"the last {settings.stagnation_rounds} rounds moved the score by less than "
                       f"{settings.stagnation_epsilon}")
    elif proposal.is_empty:
        why_explore = "the diagnoser proposed no change"
    elif candidate.fingerprint() in seen_fingerprints:
        why_explore = "the proposal would repeat a config already evaluated"
    if why_explore:
        for _ in range(10):
            explored, changes = perturb(base, rng, settings.explore_dims, names=free_dims)
            if explored.fingerprint() not in seen_fingerprints:
                break
        return GuardDecision("explored", f"{why_explore}: random perturbation of {len(changes)} dimensions"
                             + (f" (after reverting: {regression.reason})" if regression.reverted else ""),
                             explored, changes)
    changes = diff_configs(base, candidate)
    if regression.reverted:
        return GuardDecision("reverted", f"{regression.reason}; the proposal is applied to the best config instead",
                             candidate, changes, clamps)
    return GuardDecision("applied", proposal.rationale or "applied the proposal", candidate, changes, clamps)
