"""The frontier of a `--budgets` run: the best config at each token budget, and how it held out.

Why a module of its own: the loop decides its rounds at the primary (first) budget exactly as a
one-budget run does — the guard is untouched — while every round's contexts are also cut at the
further budgets and recorded as their own phases (`budget_phase`). Each further budget then keeps
its own best among the configs the loop evaluated: walking the rounds in order, a round replaces
that budget's best when the guard's paired test (`compare` + `accept`, the run's settings) finds
it significantly better *at that budget*. The primary budget's best is the loop's own. Everything
here is read back from the run store, so `evolve show --frontier` and a resumed run agree.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

from evolvemem.contracts.records import QuestionRecord
from evolvemem.contracts.vocab import Phase, budget_phase
from evolvemem.errors import ConfigError
from evolvemem.loop.paired import Comparison, accept, compare
from evolvemem.loop.snapshots import frontier_config_name
from evolvemem.loop.spec import RunSpec
from evolvemem.store.rows import RoundSummary
from evolvemem.store.run_store import RunStore


def dev_phase(spec: RunSpec, tokens: int) -> str:
    """The dev phase a budget's records are in ("dev" for the primary budget)."""
    return Phase.DEV if tokens == spec.token_budget else budget_phase(Phase.DEV, tokens)


def test_phases(spec: RunSpec, tokens: int) -> tuple[str, str]:
    """(start, best) test phases of a budget ("test_start", "test_best" for the primary)."""
    if tokens == spec.token_budget:
        return Phase.TEST_START, Phase.TEST_BEST
    return budget_phase(Phase.TEST_START, tokens), budget_phase(Phase.TEST_BEST, tokens)


def dev_rounds(store: RunStore) -> list[int]:
    """The rounds whose dev evaluation finished, in order."""
    return [row.round for row in store.round_summaries((Phase.DEV,), done_only=True)]


def budget_best(store: RunStore, spec: RunSpec, tokens: int, primary_best: int) -> int:
    """The best round at `tokens`: the loop's own at the primary budget; at a further one, the last
    round the guard's paired test found significantly better than the budget's best so far."""
    if tokens == spec.token_budget:
        return primary_best
    phase = dev_phase(spec, tokens)
    best = 0
    read: dict[int, list[QuestionRecord]] = {}  # each round's records read once (the best's are read again and again)

    def records(round_no: int) -> list[QuestionRecord]:
        if round_no not in read:
            read[round_no] = store.round_records(round_no, phase)
        return read[round_no]

    for round_no in dev_rounds(store):
        row = store.round_row(round_no, phase)
        if round_no == 0 or row is None or not row.done:
            continue
        timed = store.round_row(round_no, Phase.DEV)  # the ranking is timed once, at the primary budget
        if spec.guard.over_max_ms(timed.retrieval_ms if timed else None):
            continue
        comparison = compare(
            records(round_no),
            records(best),
            round_no,
            best,
            spec.objective,
            folds=spec.guard.folds,
            seed=spec.seed,
        )
        if accept(comparison, spec.objective, spec.guard).accepted:
            best = round_no
    return best


@dataclass(frozen=True)
class FrontierPoint:
    """One budget's best config and what it scored (recall: the answerable questions')."""

    tokens: int
    primary: bool
    best_round: int
    fingerprint: str | None
    dev_recall: float | None
    dev_start_recall: float | None
    dev_context_tokens: float | None
    test_recall: float | None = None
    test_start_recall: float | None = None
    test_context_tokens: float | None = None
    start_context_tokens: float | None = None  # the start's mean context (test, else dev)
    held_out: Comparison | None = None  # test best − test start, paired
    ms: float | None = None  # retrieval ms a question, where the run recorded it

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["held_out"] = self.held_out.as_dict() if self.held_out is not None else None
        return out


def _recall(row: RoundSummary | None) -> float | None:
    return row.main_evidence_recall if row is not None and row.done else None


def _ms(row: RoundSummary | None) -> float | None:
    """The round's retrieval milliseconds a question (None: not timed)."""
    return row.retrieval_ms if row is not None else None


def budget_bests(store: RunStore, spec: RunSpec, primary_best: int) -> dict[int, int]:
    """Every budget's best round (`budget_best`), by budget."""
    return {tokens: budget_best(store, spec, tokens, primary_best) for tokens in spec.budgets}


def frontier_points(
    store: RunStore, spec: RunSpec, primary_best: int, bests: Mapping[int, int] | None = None
) -> list[FrontierPoint]:
    """Every budget's point, ascending; test figures once the run scored them. `bests`: the
    budgets' best rounds when the caller has them (`budget_bests`: they read every dev round's
    records at each budget, and held-out scoring does not change them)."""
    bests = bests if bests is not None else budget_bests(store, spec, primary_best)
    points = []
    for tokens in spec.budgets:
        best = bests[tokens]
        dev, dev_start = store.round_row(best, dev_phase(spec, tokens)), store.round_row(0, dev_phase(spec, tokens))
        start_phase, best_phase = test_phases(spec, tokens)
        test_best, test_start = store.round_row(best, best_phase), store.round_row(0, start_phase)
        start = test_start if test_start is not None and test_start.done else dev_start
        held = None
        if test_best is not None and test_best.done and test_start is not None and test_start.done:
            held = compare(
                store.round_records(best, best_phase),
                store.round_records(0, start_phase),
                best,
                0,
                spec.objective,
                seed=spec.seed,
            )
        points.append(
            FrontierPoint(
                tokens,
                tokens == spec.token_budget,
                best,
                dev.config_fingerprint if dev is not None else None,
                _recall(dev),
                _recall(dev_start),
                dev.context_tokens if dev is not None else None,
                _recall(test_best),
                _recall(test_start),
                test_best.context_tokens if test_best is not None else None,
                start.context_tokens if start is not None else None,
                held,
                _ms(store.round_row(best, Phase.DEV)),
            )
        )
    return points


def test_groups(points: list[FrontierPoint]) -> dict[int, list[int]]:
    """The budgets whose best is each round (one test evaluation, cut at each of them)."""
    groups: dict[int, list[int]] = {}
    for point in points:
        groups.setdefault(point.best_round, []).append(point.tokens)
    return groups


def run_budgets(run_dir: Path) -> list[int]:
    """The token budgets a run measured its configs at: a frontier run's list, a one-budget run's
    budget, or none."""
    with RunStore(run_dir, read_only=True) as store:
        spec = store.manifest().get("spec")
    if not isinstance(spec, dict):
        raise ConfigError(f"{run_dir}: not an evolve run (no spec in its manifest)")
    budgets = spec.get("budgets") or []
    tokens = spec.get("token_budget")
    return [int(b) for b in budgets] if budgets else ([tokens] if isinstance(tokens, int) else [])


def point_config_file(run_dir: str | Path, tokens: int) -> Path:
    """The exported best config of a run at `tokens` (`--config RUN --budget N`): a frontier run's
    `best_config.<N>.toml`, a one-budget run's own file at its budget; any other budget is one
    error naming the run's budgets."""
    run_dir = Path(run_dir)
    budgets = run_budgets(run_dir)
    if tokens not in budgets:
        have = ", ".join(map(str, budgets)) if budgets else "none (it ran without a token budget)"
        raise ConfigError(f"{run_dir} has no point at {tokens} tokens; its budgets: {have}")
    path = run_dir / (frontier_config_name(tokens) if len(budgets) > 1 else "best_config.toml")
    if not path.is_file():
        raise ConfigError(f"{run_dir}: no {path.name} (is the run finished?)")
    return path
