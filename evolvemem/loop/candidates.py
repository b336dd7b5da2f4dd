"""Parallel candidates (`--candidates K`): a round screens K configs at once instead of one.

Candidate 1 is the guard's next config, as in a round of one candidate. The diagnoser's
alternatives fill candidates 2..K (`Diagnoser.alternatives`: the rubric's next-ranked actions,
TPE's further trials asked under the constant liar, further random draws, a model's further
picks from the menu), each applied to the base config the guard built on, checked like the
first (frozen settings dropped, a model's contradicted changes rejected) and different from each
other and from every config evaluated or screened before; seeded explorations fill what is left.
They are recorded with the decision, so a resume screens the same ones.

In the round all K climb the ladder together: rung 0 (their contexts' evidence, no answer call)
one after another in this process, rung 1 as one batch of minibatch evaluations that a remote
executor runs in parallel. The K minibatch comparisons are K tests of one question ("does this
round have a better config?"), so a candidate passes rung 1 only when it loses nothing and its
gain survives Holm's step-down over the K (the i-th smallest one-sided p below
screen_alpha / (K − i + 1)) — or when it loses nothing and its rung-0 evidence gain is
significant at alpha / K (Bonferroni over the K rung-0 tests). Of those that pass, the one with the largest minibatch gain in the
objective's group gets the full dev evaluation — the others are recorded as outranked — and the
guard tests its gain at alpha / K, Holm's first step, since it is the best of K comparisons."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any, Callable

from evolvemem.contracts.diagnosis import DiagnosisInput, Diagnoser, Proposal
from evolvemem.loop.guard import RoundScore
from evolvemem.loop.ladder import RungZero
from evolvemem.loop.paired import Comparison, judged_groups
from evolvemem.loop.screening import (
    OUTRANKED,
    PASSED,
    SCREENED_OUT,
    Screener,
    ScreenVerdict,
    screen_verdict,
)
from evolvemem.loop.spec import GuardSettings, objective_group
from evolvemem.store.rows import ScreeningRow
from evolvemem.space.config import RetrievalConfig, parse_config
from evolvemem.space.ops import perturb

ALTERNATIVE, EXPLORATION = "alternative", "exploration"


def alternative_candidates(
    diagnoser: Diagnoser,
    inp: DiagnosisInput,
    base: RetrievalConfig,
    first: RetrievalConfig,
    k: int,
    seen: set[str],
    check: Callable[[Proposal], None],
    rng: random.Random,
    explore_dims: int,
    free_dims: list[str] | None,
) -> list[dict[str, Any]]:
    """Candidates 2..k of the next round as rows {config, source, rationale} (see the module
    docstring); `check` drops and flags a proposal's changes as the loop does the first's."""
    taken = set(seen) | {first.fingerprint(), base.fingerprint()}
    rows: list[dict[str, Any]] = []

    def add(config: RetrievalConfig, source: str, rationale: str) -> None:
        if config.fingerprint() not in taken and len(rows) < k - 1:
            taken.add(config.fingerprint())
            rows.append({"config": config.model_dump(), "source": source, "rationale": rationale})

    for proposal in diagnoser.alternatives(inp, base, k - 1):
        check(proposal)
        if not proposal.is_empty:
            add(proposal.apply_to(base)[0], ALTERNATIVE, proposal.rationale)
    for _ in range(10 * k):
        if len(rows) >= k - 1:
            break
        explored, changes = perturb(base, rng, explore_dims, names=free_dims)
        add(explored, EXPLORATION, f"random perturbation of {len(changes)} dimensions")
    return rows


def holm_levels(p_values: list[float], alpha: float, comparisons: int) -> list[tuple[float, bool]]:
    """(level, reached) per p-value under Holm's step-down over `comparisons` tests: the i-th
    smallest is tested at alpha / (comparisons − i + 1), and only while every smaller one passed
    its own level (after the first failure the rest are not reached: they cannot pass)."""
    levels = [(0.0, False)] * len(p_values)
    reached = True
    for rank, index in enumerate(sorted(range(len(p_values)), key=lambda i: p_values[i])):
        level = alpha / (comparisons - rank)
        levels[index] = (level, reached)
        reached = reached and p_values[index] < level
    return levels


def corrected(settings: GuardSettings, comparisons: int) -> GuardSettings:
    """The guard's settings for the best of `comparisons` candidates: alpha / comparisons."""
    return settings if comparisons <= 1 else replace(settings, alpha=settings.alpha / comparisons)


def gain_p(paired: dict[str, Any] | None, objective: str, min_effect: float) -> float:
    """A screened candidate's one-sided p for its best judged gain of at least the minimum
    effect on the minibatch (1 when none gains that much, or it never reached the minibatch)."""
    if paired is None:
        return 1.0
    groups = paired["groups"]
    return min(
        (groups[g]["p_gain"] for g in judged_groups(objective) if groups[g]["n"] and groups[g]["diff"] >= min_effect),
        default=1.0,
    )


def choose_among(
    screener: Screener,
    round_no: int,
    candidates: list[tuple[RetrievalConfig, str]],
    incumbent: RoundScore,
    seen: set[str],
) -> RetrievalConfig:
    """The config round `round_no` evaluates on every dev question: the best of `candidates`
    that passes (see the module docstring), or the incumbent's when none does. Every candidate
    not chosen joins `seen`."""
    done, started = screener.resume(round_no, seen, candidates[0][0])
    if started is not None:  # decided before an interruption: the round goes on with it
        return started
    spec = screener.spec
    todo = [
        (attempt, config, source)
        for attempt, (config, source) in enumerate(candidates, 1)
        if config.fingerprint() != incumbent.config.fingerprint()
    ]
    if not todo:
        return incumbent.config
    rows = {attempt: done[attempt] for attempt, _, _ in todo if attempt in done}
    climbing: dict[int, tuple[RetrievalConfig, ScreeningRow, RungZero]] = {}
    for attempt, config, source in todo:
        if attempt not in rows:
            row, rung0 = screener.climb_rung0(round_no, attempt, config, source, incumbent)
            if rung0.stopped:
                rows[attempt] = row
            else:
                climbing[attempt] = (config, row, rung0)
    jobs = [screener.minibatch_job(round_no, attempt, config) for attempt, (config, _, _) in climbing.items()]
    scored = dict(zip(climbing, screener.scorer.score_rounds(jobs)))
    comparisons: dict[int, Comparison] = {a: screener.minibatch_comparison(round_no, a, incumbent) for a in climbing}
    # Holm over every candidate of the round: one stopped at rung 0 was a test too (p = 1)
    attempts = [attempt for attempt, _, _ in todo]
    paired = {a: (comparisons[a].as_dict() if a in comparisons else rows[a].paired) for a in attempts}
    p_values = [gain_p(paired[a], spec.objective, spec.guard.min_effect) for a in attempts]
    levels = dict(zip(attempts, holm_levels(p_values, spec.screen_alpha, len(attempts))))
    verdicts = {}
    for attempt, (_, _, rung0) in climbing.items():
        level, reached = levels[attempt]
        promoted = rung0.gained(spec.guard, spec.guard.alpha / len(attempts))
        verdict = screen_verdict(comparisons[attempt], spec.objective, spec, alpha=level, evidence_gained=promoted)
        if verdict.passed and not reached and not promoted:
            verdict = ScreenVerdict(
                False, f"{verdict.reason}; but Holm's step-down stopped at a smaller p-value of the round's candidates"
            )
        verdicts[attempt] = verdict
    group = objective_group(spec.objective)
    passing = [a for a in climbing if verdicts[a].passed]
    chosen = max(passing, key=lambda a: (comparisons[a].groups[group].diff, -a), default=None)
    for attempt, (config, row, rung0) in climbing.items():
        outcome = PASSED if attempt == chosen else OUTRANKED if attempt in passing else SCREENED_OUT
        verdict = verdicts[attempt]
        if outcome == OUTRANKED:
            verdict = ScreenVerdict(False, f"{verdict.reason}; outranked by candidate {chosen}")
        rows[attempt] = screener.record_minibatch(
            row, rung0, comparisons[attempt], verdict, outcome, scored[attempt], alpha=levels[attempt][0]
        )
    for attempt, config, _ in todo:
        if rows[attempt].outcome == PASSED:
            return config
        seen.add(config.fingerprint())
    return incumbent.config


def screened_candidates(rows: list[dict[str, Any]] | None, like: RetrievalConfig) -> list[tuple[RetrievalConfig, str]]:
    """The further candidates a decision recorded, with their sources: configs in the space of
    `like` (the run's) and at its token budget."""
    return [
        (parse_config(row["config"], source="run store", space=like.space)[0].with_budget(like.budget), row["source"])
        for row in rows or []
    ]
