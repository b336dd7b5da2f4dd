"""Paired screening: a candidate config earns a full dev evaluation by climbing a ladder.

Rung 0 (loop/ladder.py) compares the evidence recall of the candidate's contexts with the
incumbent's, without an answer call, and stops a candidate whose contexts hold significantly less
evidence; rung 1 is the minibatch below; rung 2 the full dev evaluation. The screening row
records the rung each candidate stopped at.

On rung 1 every round's candidate is scored on a fixed minibatch of dev questions — a seeded, stratified
share (`screen_fraction`) of every (question type, conversation) cell — and compared, paired,
with the incumbent's records of the same questions (loop/paired.py). It passes when no judged
group is worse (the guard's loss test: significantly worse, or by more than the tolerance) and
some judged group gains at least the guard's minimum effect with a one-sided p-value below
`screen_alpha` — looser than the guard's alpha, since a minibatch of a quarter of the questions
doubles the standard error: a candidate that would just pass the guard on every question shows
p ≈ 0.2 on the minibatch. A candidate whose contexts gained evidence significantly at rung 0
passes when it loses nothing: on a few conversations the minibatch cannot show the answer gain
that more evidence brings a real reader, only whether the reader refuses it. Only a candidate that passes is evaluated on
every dev question (its minibatch records are reused, not asked again). One that does not is
recorded as `screened_out` with its minibatch scores and cost, and the round goes on with an
exploration around the incumbent, at most `screen_budget` screenings per round; when none
passes, the round carries the incumbent, whose records are reused without a call (unless a
re-extraction changed the memories since: then the incumbent is scored again on them).

The minibatch is asked in two looks: first half of every cell (`first_half`), then the rest. After
the first, a candidate that no judged group can still carry to the minimum effect (the futility
test of the sequential dev evaluation, loop/sequential.py) is screened out there: a change that
leaves every answer as it was costs half a minibatch, not a whole one. A stop is never a pass, so
this cannot let a worse candidate through; a candidate carried by a rung-0 evidence gain is asked
the whole minibatch (it passes unless it loses, and no early look can settle that). `--no-sequential`
asks every minibatch whole, as it evaluates every passing candidate on all of dev.

A round's screenings are rows of the run store, written once their verdict is known: a resume
reads them back (a half-finished screening continues from its last recorded question), so the
round picks the same candidate and nothing is asked twice."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Iterable

from evolvemem.contracts.vocab import Phase, contexts_phase, screen_phase
from evolvemem.data.models import Question
from evolvemem.loop.guard import RoundScore
from evolvemem.loop.ladder import ContextRung, LadderInputs, RungZero
from evolvemem.loop.scorer import RoundJob, round_progress
from evolvemem.loop.sequential import futility, stop_text
from evolvemem.loop.paired import Comparison, compare, gains, judged_groups, loses
from evolvemem.loop.spec import RunSpec, objective_group
from evolvemem.space.config import RetrievalConfig, parse_config
from evolvemem.space.ops import diff_configs, perturb
from evolvemem.store.rows import RoundSummary, ScreeningRow

PASSED, SCREENED_OUT = "passed", "screened_out"
OUTRANKED = "outranked"  # passed its minibatch, but another of the round's parallel candidates gained more


def minibatch(questions: Iterable[Question], fraction: float, seed: int) -> list[Question]:
    """A fixed share of every (question type, conversation) cell, at least one question each,
    drawn with `seed`; in the questions' order."""
    cells: dict[tuple[str, str], list[Question]] = defaultdict(list)
    ordered = list(questions)
    for question in ordered:
        cells[(question.question_type or "", question.conversation_id)].append(question)
    chosen: set[str] = set()
    for cell in sorted(cells):
        members = sorted(cells[cell], key=lambda q: q.question_id)
        rng = random.Random(f"minibatch-{seed}-{cell[0]}-{cell[1]}")
        take = max(1, round(fraction * len(members)))
        chosen.update(q.question_id for q in rng.sample(members, take))
    return [q for q in ordered if q.question_id in chosen]


@dataclass(frozen=True)
class ScreenVerdict:
    passed: bool
    reason: str


def screen_verdict(
    comparison: Comparison, objective: str, spec: RunSpec, alpha: float | None = None, evidence_gained: bool = False
) -> ScreenVerdict:
    """Pass when no judged group loses (the guard's loss test) and one gains more than the margin
    with a one-sided p below `alpha` (default `screen_alpha`; lower among parallel candidates) —
    or, after a significant evidence gain at rung 0, when no judged group loses."""
    level = spec.screen_alpha if alpha is None else alpha
    groups = comparison.groups
    judged = judged_groups(objective)
    losing = [name for name in judged if loses(groups[name], spec.guard)]
    margin = spec.guard.min_effect
    gaining = [name for name in judged if gains(groups[name], spec.guard, level)]
    detail = "; ".join(
        f"{name} {groups[name].diff:+.4f} [{groups[name].ci_low:+.4f}, {groups[name].ci_high:+.4f}] "
        f"p(better) {groups[name].p_gain:.3f} n={groups[name].n}"
        for name in judged
        if groups[name].n
    )
    where = f"on the minibatch vs round {comparison.incumbent_round} ({detail})"
    if losing:
        return ScreenVerdict(False, f"worse on {', '.join(losing)} {where}")
    if not gaining and evidence_gained:
        return ScreenVerdict(True, f"no loss {where}, after an evidence gain at rung 0: the full evaluation decides")
    if not gaining:
        return ScreenVerdict(False, f"no gain of {margin:g} or more with p < {level:.4g} {where}")
    return ScreenVerdict(True, f"gains on {', '.join(gaining)} {where}")


def estimated_score(row: ScreeningRow, incumbent_score: float, objective: str) -> float:
    """What a screened-out config would score on every dev question, as far as its screening
    tells: the incumbent's score plus the paired minibatch difference in the objective's group —
    or, for a candidate stopped at rung 0, plus its (negative) evidence-recall difference, a
    rough stand-in in other units that at least points the right way. A model-based diagnoser
    (tpe) learns from it instead of never hearing of the config."""
    if row.paired is None:
        return incumbent_score + float((row.evidence or {}).get("diff") or 0.0)
    group = objective_group(objective)
    return incumbent_score + float(row.paired["groups"][group]["diff"])


class Screener:
    """Picks the config a round evaluates in full (see the module docstring)."""

    def __init__(self, inputs: LadderInputs):
        self.spec, self.store, self.scorer = inputs.spec, inputs.store, inputs.scorer
        self.batch = minibatch(inputs.dev, self.spec.screen_fraction, self.spec.seed)
        self.first_half = minibatch(self.batch, 0.5, self.spec.seed)  # the minibatch's first look
        self.rung0 = ContextRung(inputs)
        self.on_record = inputs.on_record

    def choose(
        self, round_no: int, first: RetrievalConfig, incumbent: RoundScore, seen: set[str], free_dims: list[str] | None
    ) -> RetrievalConfig:
        """The config round `round_no` evaluates on every dev question: the first candidate that
        passes its screening, or the incumbent's config when none does within the budget. Every
        screened-out config is added to `seen` (never proposed again)."""
        done, started = self.resume(round_no, seen, first)
        if started is not None:  # decided before an interruption: the round goes on with it
            return started
        candidate, source = first, "proposal"
        for attempt in range(1, self.spec.screen_budget + 1):
            if candidate.fingerprint() == incumbent.config.fingerprint():
                return candidate  # nothing to screen: the incumbent's records are reused
            row = done.get(attempt) or self._screen(round_no, attempt, candidate, source, incumbent)
            if row.outcome == PASSED:
                return candidate
            seen.add(candidate.fingerprint())
            if attempt < self.spec.screen_budget:
                candidate, source = self._explore(round_no, attempt, incumbent.config, seen, free_dims), "exploration"
        return incumbent.config

    def resume(
        self, round_no: int, seen: set[str], like: RetrievalConfig
    ) -> tuple[dict[int, ScreeningRow], RetrievalConfig | None]:
        """The round's screenings recorded so far, by attempt (the configs they screened out join
        `seen`), and the config of its full evaluation if one had begun (None otherwise), read in
        the space of `like` and at its token budget."""
        done = {row.attempt: row for row in self.store.screenings(round_no)}
        seen.update(row.config_fingerprint for row in done.values() if row.outcome != PASSED and row.config_fingerprint)
        started = self.store.round_row(round_no, Phase.DEV)
        if started is None:
            return done, None
        return done, parse_config(started.config or {}, source="run store", space=like.space)[0].with_budget(
            like.budget
        )

    def _screen(
        self, round_no: int, attempt: int, candidate: RetrievalConfig, source: str, incumbent: RoundScore
    ) -> ScreeningRow:
        """The candidate up the ladder: rung 0 (its contexts' evidence), then rung 1 (the minibatch)."""
        row, rung0 = self.climb_rung0(round_no, attempt, candidate, source, incumbent)
        if rung0.stopped:
            return row
        evidence_gained = rung0.gained(self.spec.guard)
        earlier = 0.0
        if self.spec.sequential and not evidence_gained and len(self.first_half) < len(self.batch):
            first = self.scorer.score_round(self.minibatch_job(round_no, attempt, candidate, self.first_half))
            stopped = self._futile_at_first_look(round_no, attempt, incumbent)
            if stopped is not None:
                comparison = self.minibatch_comparison(round_no, attempt, incumbent)
                return self.record_minibatch(row, rung0, comparison, stopped, SCREENED_OUT, first)
            earlier = first.wall_seconds or 0.0
        summary = self.scorer.score_rounds([self.minibatch_job(round_no, attempt, candidate)])[0]
        if earlier:  # the row's wall time is the last look's: add the first's
            self.store.add_wall_seconds(round_no, screen_phase(attempt), earlier)
            summary = replace(summary, wall_seconds=(summary.wall_seconds or 0.0) + earlier)
        comparison = self.minibatch_comparison(round_no, attempt, incumbent)
        verdict = screen_verdict(comparison, self.spec.objective, self.spec, evidence_gained=evidence_gained)
        return self.record_minibatch(
            row, rung0, comparison, verdict, PASSED if verdict.passed else SCREENED_OUT, summary
        )

    def _futile_at_first_look(self, round_no: int, attempt: int, incumbent: RoundScore) -> ScreenVerdict | None:
        """The screened-out verdict when, on the minibatch's first half, no judged group can still
        reach the minimum effect (loop/sequential.py `futility`); None to ask the rest."""
        min_effect = self.spec.guard.min_effect
        first = {q.question_id for q in self.first_half}
        asked = self.store.round_records(round_no, screen_phase(attempt))
        stop, bounds = futility(
            # the first half's records only: a resume after the whole minibatch was answered (its
            # verdict not yet recorded) must decide as the run it resumes did
            [r for r in asked if r.question_id in first],
            self.store.round_records(incumbent.round, Phase.DEV),
            self.spec.objective,
            min_effect,
        )
        if not stop:
            return None
        where = stop_text(
            "the minibatch's first half", len(self.first_half), f"{len(self.batch)} questions", bounds, min_effect
        )
        return ScreenVerdict(False, f"{where}, vs round {incumbent.round}")

    def climb_rung0(
        self, round_no: int, attempt: int, candidate: RetrievalConfig, source: str, incumbent: RoundScore
    ) -> tuple[ScreeningRow, RungZero]:
        """The screening row so far and rung 0's verdict; a candidate stopped there is recorded."""
        row = ScreeningRow(
            round=round_no,
            attempt=attempt,
            source=source,
            config_fingerprint=candidate.fingerprint(),
            config=candidate.model_dump(),
            changes=[c.as_dict() for c in diff_configs(incumbent.config, candidate)],
            compared_with=incumbent.round,
        )
        rung0 = self.rung0.judge(round_no, attempt, candidate, incumbent.config, incumbent.round)
        if rung0.stopped:
            phase = contexts_phase(attempt)
            usage = self.store.phase_usage(round_no, phase)
            row = replace(
                row,
                phase=phase,
                outcome=SCREENED_OUT,
                rung=0,
                reason=rung0.reason,
                evidence=rung0.evidence,
                paired=None,
                n_questions=rung0.evidence["n"],
                calls=usage.calls,
                tokens=usage.tokens,
                wall_seconds=_wall_seconds(self.store.round_row(round_no, phase)),
            )
            self.store.record_screening(row)
        return row, rung0

    def minibatch_job(
        self, round_no: int, attempt: int, candidate: RetrievalConfig, questions: list[Question] | None = None
    ) -> RoundJob:
        """The candidate on the minibatch (or on `questions` of it: a look)."""
        phase = screen_phase(attempt)
        asked = self.batch if questions is None else questions
        return RoundJob(candidate, asked, round_no, phase, round_progress(self.on_record, round_no, phase, len(asked)))

    def minibatch_comparison(self, round_no: int, attempt: int, incumbent: RoundScore) -> Comparison:
        return compare(
            self.store.round_records(round_no, screen_phase(attempt)),
            self.store.round_records(incumbent.round, Phase.DEV),
            round_no,
            incumbent.round,
            self.spec.objective,
            seed=self.spec.seed,
        )

    def record_minibatch(
        self,
        row: ScreeningRow,
        rung0: RungZero,
        comparison: Comparison,
        verdict: ScreenVerdict,
        outcome: str,
        summary: RoundSummary,
        alpha: float | None = None,
    ) -> ScreeningRow:
        """Record a screening that reached rung 1 (passed on to rung 2 when `outcome` is PASSED)."""
        phase = screen_phase(row.attempt)
        usage = self.store.phase_usage(row.round, phase)
        row = replace(
            row,
            phase=phase,
            outcome=outcome,
            rung=2 if outcome == PASSED else 1,
            reason=f"{verdict.reason}; {rung0.reason}",
            evidence=rung0.evidence,
            paired=comparison.as_dict(),
            n_questions=summary.n_questions,
            main_f1=summary.main_f1,
            adversarial_f1=summary.adversarial_f1,
            all_f1=summary.all_f1,
            calls=usage.calls,
            tokens=usage.tokens,
            wall_seconds=summary.wall_seconds,
            alpha=self.spec.screen_alpha if alpha is None else alpha,
        )
        self.store.record_screening(row)
        return row

    def _explore(
        self, round_no: int, attempt: int, base: RetrievalConfig, seen: set[str], free_dims: list[str] | None
    ) -> RetrievalConfig:
        """A random perturbation of the incumbent not evaluated or screened before (seeded by
        round and attempt, so a resume draws the same one)."""
        rng = random.Random(f"screen-{self.spec.seed}-{round_no}-{attempt}")
        explored = base
        for _ in range(10):
            explored, _changes = perturb(base, rng, self.spec.guard.explore_dims, names=free_dims)
            if explored.fingerprint() not in seen:
                break
        return explored


def _wall_seconds(row: RoundSummary | None) -> float | None:
    return None if row is None else row.wall_seconds
