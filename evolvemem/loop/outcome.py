"""`RoundOutcome`: one evaluated round as every reader sees it — the console as the loop runs,
`evolve show` / `show --json`, and the report.

It is built by one function (`round_outcome`) from the store's typed rows, so the three agree on
what a round scored, what the guard decided after it, what it cost and which emerged levers it
used; each reader only renders it. The decision keeps the store's own row: `show --json` quotes
its stored values (None where an older run lacks a column), the others read its parsed parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from evolvemem.contracts.vocab import Phase
from evolvemem.loop.paired import Comparison
from evolvemem.loop.spec import objective_column
from evolvemem.space.changes import Change
from evolvemem.space.emerged import switched_on
from evolvemem.store.costs import RoundCost, round_costs
from evolvemem.store.rows import DecisionRow, ReaderSplitCounts, RoundSummary, RoundUsage, ScreeningRow
from evolvemem.store.run_store import RunStore


@dataclass(frozen=True)
class RoundOutcome:
    """One evaluated round: its scores, the guard's decision after it, its usage, cost and screenings.

    A dev round of a run has a decision and a cost; an `evolve eval` round has neither. `seconds` is
    the wall time the loop spent on the round (screening included); a reader of a finished store
    does not know it (None)."""

    summary: RoundSummary  # the evaluation, as the store holds it
    score: float | None  # the objective's headline (loop/spec.objective_column); None: not scored
    decision: DecisionRow | None  # the guard's decision after the round (None: not decided, not a dev round)
    accepted: bool | None  # it beat the incumbent on paired evidence (None: never judged)
    usage: RoundUsage | None  # calls, cache hits and tokens over the round's phases (None: no call)
    cost: RoundCost | None  # against a full evaluation (store/costs.py; dev rounds only)
    screenings: tuple[ScreeningRow, ...]  # candidates screened before the full evaluation
    emerged_used: tuple[str, ...]  # levers that emerged in this run and the round's config switched on
    seconds: float | None = None
    reader_split: ReaderSplitCounts | None = None  # where a model's answers went wrong (None: no model answered)
    stores_built: tuple[str, ...] = ()  # memory stores the round's configs first made the run build, with their time

    @property
    def round(self) -> int:
        return self.summary.round

    @property
    def objective_score(self) -> float:
        """The score the loop ranks the round by (runner.objective_of): 0 where the figure is missing."""
        return self.score or 0.0

    @property
    def next_step(self) -> str | None:
        """What the guard decided for the next round (contracts/vocab.Decision)."""
        return self.decision.decision if self.decision else None

    @property
    def paired(self) -> Comparison | None:
        """Against the incumbent (None: the start round, an undecided one, an older store)."""
        return Comparison.from_dict(self.decision.paired) if self.decision else None

    @property
    def changes(self) -> list[Change]:
        """What the next round's config changes (a pruning round: the lever it switched off)."""
        return [Change.from_dict(c) for c in (self.decision.changes if self.decision else None) or []]

    @property
    def verdict(self) -> str | None:
        return self.decision.verdict if self.decision else None

    @property
    def reason(self) -> str | None:
        return self.decision.reason if self.decision else None

    @property
    def fallback(self) -> str | None:
        """Why a model's diagnosis was replaced by the rubric's best action."""
        return self.decision.fallback if self.decision else None

    @property
    def flags(self) -> list[str]:
        """The applied proposal's changes that the round's own evidence contradicts."""
        return list((self.decision.flags if self.decision else None) or [])

    @property
    def memories_added(self) -> int:
        return (self.decision.memories_added if self.decision else None) or 0

    @property
    def eval_seconds(self) -> float:
        """The wall time of the round's full evaluation."""
        return self.summary.wall_seconds or 0.0


@dataclass(frozen=True)
class RoundFacts:
    """What a round's outcome reads beside its evaluation, for every round of a store at once."""

    decisions: dict[int, DecisionRow]
    usage: dict[int, RoundUsage]
    costs: dict[int, RoundCost]
    screenings: tuple[ScreeningRow, ...]
    splits: dict[tuple[int, str], ReaderSplitCounts] = field(default_factory=dict)  # by (round, phase)
    stores_built: dict[int, tuple[str, ...]] = field(default_factory=dict)  # by round, over its phases

    @classmethod
    def read(cls, store: RunStore) -> RoundFacts:
        return cls(
            decisions=store.decisions(),
            usage=store.usage_by_round(),
            costs={c.round: c for c in round_costs(store)},
            screenings=tuple(store.screenings()),
            splits=store.reader_splits(),
            stores_built=store.stores_built(),
        )


def round_outcome(
    summary: RoundSummary,
    facts: RoundFacts,
    objective: str,
    levers: set[str],
    *,
    seconds: float | None = None,
    judged: bool | None = None,
) -> RoundOutcome:
    """The one way a round's outcome is made. A dev round takes its decision and cost; `levers` are
    the run's emerged ones; `judged` is the loop's own verdict, which stands in where the store's
    decision does not record one (a store from before paired decisions)."""
    dev = summary.phase == Phase.DEV
    decision = facts.decisions.get(summary.round) if dev else None
    recorded = decision.accepted if decision is not None else None
    return RoundOutcome(
        summary=summary,
        score=summary.column(objective_column(objective)),
        decision=decision,
        accepted=judged if recorded is None and judged is not None else recorded,
        usage=facts.usage.get(summary.round),
        cost=facts.costs.get(summary.round) if dev else None,
        screenings=tuple(s for s in facts.screenings if s.round == summary.round),
        emerged_used=tuple(switched_on(summary.config or {}, levers)),
        seconds=seconds,
        reader_split=facts.splits.get((summary.round, summary.phase)),
        stores_built=facts.stores_built.get(summary.round, ()) if dev else (),
    )


def round_outcomes(
    store: RunStore, phases: Sequence[str], objective: str, levers: set[str], facts: RoundFacts | None = None
) -> list[RoundOutcome]:
    """Every evaluated round of `phases` in a store, in round order (`facts`: read already)."""
    facts = facts or RoundFacts.read(store)
    return [round_outcome(s, facts, objective, levers) for s in store.round_summaries(phases)]
