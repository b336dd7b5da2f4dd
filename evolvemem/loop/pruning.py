"""End-of-run pruning: every lever the run kept is tried off once more, and dropped when it does
not pay for itself.

The guard's parsimony rule (loop/parsimony.py) refuses a round that switches a lever on for no
significant gain, but a lever switched on beside a real gain (one proposal, several changes) rides
along. So after the last round each lever the best config has on and the start had off is
switched off in turn (everywhere, per-type overrides included) and the variant is evaluated on dev
as a round of its own. Compared, paired, with the best: unless dropping the lever is a significant
loss (the guard's own test, `accept`'s `significant_loss`), the variant becomes the best — decision
`pruned` — and the next lever is tried on it; otherwise the lever stays (`lever_pays`). A lever here
is what parsimony calls one: a mechanism or a setting that asks a model, so it costs retrieval
work, context lines or answer tokens by definition; the rule reads no clock. Every pruning round is
a stored round with a decision, so `evolve show`, the report and a resume see it like any other."""

from __future__ import annotations

from dataclasses import dataclass

from evolvemem.contracts.vocab import Decision
from evolvemem.loop.paired import Comparison, accept
from evolvemem.loop.parsimony import levers_switched_on
from evolvemem.loop.spec import GuardSettings
from evolvemem.space.config import OVERRIDES, RetrievalConfig, parse_config


def without_lever(config: RetrievalConfig, name: str) -> RetrievalConfig:
    """`config` with setting `name` switched off globally and in every per-type override that sets
    it (at the token budget `config` carries)."""
    off = config.space[name].switched_off()
    overrides = config.overrides()
    data = {
        **config.values(),  # values(): levers added at run time too
        name: off,
        OVERRIDES: {qtype: ({**o, name: off} if name in o else o) for qtype, o in overrides.items()},
    }
    return parse_config(data, source=f"{name} switched off", space=config.space)[0].with_budget(config.budget)


def next_lever(best: RetrievalConfig, start: RetrievalConfig, tried: set[str]) -> str | None:
    """The next kept lever to try off: the first, in the space's order, that `best` has on, `start`
    had off, and pruning has not tried yet (None: nothing left)."""
    return next((name for name in levers_switched_on(best, start) if name not in tried), None)


@dataclass(frozen=True)
class PruningVerdict:
    decision: Decision
    reason: str

    @property
    def pruned(self) -> bool:
        return self.decision == Decision.PRUNED


def pruning_verdict(
    lever: str, comparison: Comparison, objective: str, settings: GuardSettings, round_no: int
) -> PruningVerdict:
    """Judge the variant without `lever` (the comparison's candidate) against the best (its
    incumbent): dropped unless dropping it is a significant loss."""
    verdict = accept(comparison, objective, settings)
    best = comparison.incumbent_round
    if verdict.significant_loss:
        return PruningVerdict(
            Decision.LEVER_PAYS, f"{lever} pays for itself: without it, {verdict.reason}; round {best} stays the best"
        )
    return PruningVerdict(
        Decision.PRUNED,
        f"{lever} is dropped: without it no significant loss vs round {best} ({verdict.reason}); "
        f"round {round_no}, without it, is the best",
    )
