"""The guard (meta-analyzer): decide how the next round's config is made.

Every round after the first is compared, paired, with the incumbent (the best round so far) on
the same dev questions (evolvemem/loop/paired.py):
- accepted: a significant gain that holds across conversations → it becomes the incumbent;
- revert: a significant loss (or the objective falling more than `revert_threshold`), no
  significant gain from a round that switched a lever on (loop/parsimony.py), a round whose
  retrieval is over `--max-ms` (loop/retrieval_cost.py), or one whose dev evaluation stopped for
  futility (loop/sequential.py: it cannot win, and its records cover only part of dev) → the next
  config is built from the incumbent, not from that round;
- explore: `stagnation_rounds` rounds in a row without a significant gain, or the proposal is
  empty or would repeat an evaluated config → a random perturbation of a few dimensions;
- apply: otherwise the clamped proposal is applied to the base config.
The result of a run is the incumbent: a config that beat the start on paired evidence, or the
start itself."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from evolvemem.store.run_store import incumbent
from evolvemem.contracts.diagnosis import Proposal
from evolvemem.contracts.vocab import Decision
from evolvemem.loop.parsimony import parsimony_refusal
from evolvemem.loop.spec import GuardSettings
from evolvemem.qtypes import LABEL_ONLY_TYPES
from evolvemem.space.config import RetrievalConfig
from evolvemem.space.changes import Change, ClampReport
from evolvemem.space.ops import diff_configs, perturb


# What the guard decided for the next round, in the words every view prints (console, `evolve show`, the
# report). The stored value (`decisions.decision`) keeps the short name. Whether a round became the best is
# a separate verdict (`kept_text`): a round that was not better but not significantly worse is still the
# base of the next proposal ("builds on it") while the best stays where it was.
NEXT_STEP: dict[str, str] = {
    Decision.APPLIED: "next builds on it",
    Decision.REVERTED: "next reverts to best",
    Decision.EXPLORED: "next explores",
    Decision.STOPPED: "stops",
    Decision.CONVERGED: "stops (no gain)",
    Decision.PRUNED: "lever dropped (pruning)",
    Decision.LEVER_PAYS: "lever kept (pruning)",
}


def next_step_text(decision: str | None) -> str:
    """A stored decision in the shared vocabulary ("-" when the round has none yet)."""
    if not decision:
        return "-"
    return NEXT_STEP.get(decision, decision)


def kept_text(accepted: bool | None, best_round: int | None) -> str:
    """Whether the guard kept a judged round as its best, in the shared vocabulary."""
    if accepted:
        return "new best"
    return "not kept" + ("" if best_round is None else f" (best stays r{best_round})")


@dataclass
class RoundScore:
    round: int
    score: float  # the dev objective's mean (all F1 for the balanced objective), for display
    config: RetrievalConfig
    accepted: bool = False  # became the incumbent (round 0 always does)
    significant_loss: bool = False  # worse than the incumbent: the next step reverts
    retrieval_ms: float | None = None  # its retrieval ms a question (None: not timed); --max-ms reads it
    stopped_at: str = ""  # its dev evaluation stopped for futility (loop/sequential.py): not built on


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
    decision: Decision
    reason: str
    next_config: RetrievalConfig
    changes: list[Change] = field(default_factory=list)
    clamps: list[ClampReport] = field(default_factory=list)


def incumbent_of(scores: list[RoundScore]) -> RoundScore:
    """The latest accepted round (the start when none was): the store's one rule (`incumbent`)."""
    return incumbent(scores)


def check_regression(scores: list[RoundScore], settings: GuardSettings, reason: str = "") -> Regression:
    """Judge the latest round by its paired verdict against the incumbent."""
    current = scores[-1]
    delta = current.score - scores[-2].score if len(scores) > 1 else None
    best = incumbent_of(scores)
    if current.accepted or current is best:
        return Regression(current, best, False, delta, "")
    if current.significant_loss:
        return Regression(best, best, True, delta, reason or f"round {current.round} is worse than round {best.round}")
    if current.stopped_at:
        return Regression(best, best, True, delta, f"round {current.round} stopped early ({current.stopped_at})")
    if over := settings.over_max_ms(current.retrieval_ms):
        return Regression(best, best, True, delta, f"round {current.round} is refused: {over}")
    if settings.parsimony and (refused := parsimony_refusal(current.round, current.config, best.round, best.config)):
        return Regression(best, best, True, delta, refused)
    return Regression(current, best, False, delta, "")


def _stagnating(scores: list[RoundScore], settings: GuardSettings) -> bool:
    """The last `stagnation_rounds` rounds brought no significant gain."""
    if len(scores) <= settings.stagnation_rounds:
        return False
    return not any(s.accepted for s in scores[-settings.stagnation_rounds :])


def decide(
    scores: list[RoundScore],
    regression: Regression,
    proposal: Proposal,
    settings: GuardSettings,
    rng: random.Random,
    seen_fingerprints: set[str],
    free_dims: list[str] | None = None,
) -> GuardDecision:
    """Produce the next config from the base config, the proposal and the score history.
    Exploration perturbs only `free_dims` (default: every dimension)."""
    base = regression.base.config
    for qtype in LABEL_ONLY_TYPES:
        if proposal.overrides.pop(qtype, None) is not None:
            proposal.rejected.append(f"overrides for {qtype} are not applied (they would use the label)")
    candidate, clamps = proposal.apply_to(base)
    why_explore = ""
    if not regression.reverted and _stagnating(scores, settings):
        why_explore = f"the last {settings.stagnation_rounds} rounds brought no significant gain"
    elif proposal.is_empty:
        why_explore = "the diagnoser proposed no change"
    elif candidate.fingerprint() in seen_fingerprints:
        why_explore = "the proposal would repeat a config already evaluated"
    if why_explore:
        for _ in range(10):
            explored, changes = perturb(base, rng, settings.explore_dims, names=free_dims)
            if explored.fingerprint() not in seen_fingerprints:
                break
        return GuardDecision(
            Decision.EXPLORED,
            f"{why_explore}: random perturbation of {len(changes)} dimensions"
            + (f" (after reverting: {regression.reason})" if regression.reverted else ""),
            explored,
            changes,
        )
    changes = diff_configs(base, candidate)
    if regression.reverted:
        return GuardDecision(
            Decision.REVERTED,
            f"{regression.reason}; the proposal goes onto the best config instead",
            candidate,
            changes,
            clamps,
        )
    return GuardDecision(Decision.APPLIED, proposal.rationale or "applied the proposal", candidate, changes, clamps)
