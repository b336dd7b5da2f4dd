"""Run the AutoResearch loop: evaluate → diagnose → propose → guard, one versioned round at a time.

Round 0 evaluates the starting config; rounds 1..N evaluate the configs the guard produced.
Everything a resume needs is in the run store: a finished round is read back, a half-finished
one continues from its last recorded question, and the next config of every decided round is
stored with the decision. With screening on (loop/screening.py) a round's candidate is first
scored on a minibatch of dev questions and evaluated in full only when it passes; otherwise the
round keeps the incumbent; a candidate that passed is evaluated on dev in looks and stopped
when it clearly cannot win (loop/sequential.py). At the end the start config and the best dev config are each scored
once on the held-out test conversations."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from evolvemem.contracts.vocab import CONTEXTS_PREFIX, FINAL_DECISIONS, SCREEN_PREFIX, Decision, Phase, budget_phase
from evolvemem.contracts.diagnosis import Proposal
from evolvemem.data.models import Dataset, Question
from evolvemem.data.split import split_dataset
from evolvemem.contracts.diagnosis import DiagnosisInput, DiagnosisResult
from evolvemem.diagnosers import DIAGNOSERS, make_diagnoser
from evolvemem.loop.evidence_check import flag_proposal
from evolvemem.errors import DataError
from evolvemem.loop.diagnosis_input import build_diagnosis_input
from evolvemem.loop.emergence import emerge
from evolvemem.loop.frontier import budget_bests, frontier_points, test_groups
from evolvemem.loop.held_out import held_out
from evolvemem.loop.guard import RoundScore, check_regression, decide, incumbent_of
from evolvemem.loop.paired import Comparison, Verdict, accept, compare
from evolvemem.loop.pruning import next_lever, pruning_verdict, without_lever
from evolvemem.loop.reextract import reextract, uncovered_sessions
from evolvemem.loop.candidates import alternative_candidates, choose_among, corrected, screened_candidates
from evolvemem.loop.outcome import RoundFacts, RoundOutcome, round_outcome
from evolvemem.loop.result import RunResult
from evolvemem.loop.retrieval_cost import time_retrieval, timed_sample
from evolvemem.loop.ladder import LadderInputs
from evolvemem.loop.screening import PASSED, Screener, estimated_score
from evolvemem.loop.sequential import futility, looks, stop_text
from evolvemem.loop.snapshots import write_final, write_frontier_configs, write_round_snapshot
from evolvemem.loop.scorer import ProgressFn, RoundJob, RoundScorer, round_progress
from evolvemem.loop.spec import CONTEXTS_ONLY, RunSpec, objective_column, screening_enabled
from evolvemem.space.action_space import ActionSpace
from evolvemem.space.budget import TokenBudget
from evolvemem.space.dimensions import Dimension
from evolvemem.space.config import RetrievalConfig, parse_config
from evolvemem.space.ops import diff_configs
from evolvemem.store.costs import round_costs, total_cost
from evolvemem.store.rows import DecisionRow, DiagnosisRow, JSONObject, RoundSummary
from evolvemem.store.run_store import RunStore
from evolvemem.workspace import Workspace


@dataclass
class Hooks:
    """Callbacks for the CLI (progress bars, the per-round table); all optional."""

    stage: Callable[[str, int, int], None] | None = None
    record: ProgressFn | None = None
    round_done: Callable[[RoundOutcome], None] | None = None
    message: Callable[[str], None] | None = None


RAW_RESPONSE_LIMIT = 64_000  # characters of a diagnosis reply kept in the store


def bounded_raw(text: str) -> str:
    """A diagnosis reply as stored: at most RAW_RESPONSE_LIMIT characters, a cut one marked."""
    if len(text) <= RAW_RESPONSE_LIMIT:
        return text
    return text[:RAW_RESPONSE_LIMIT] + f"\n[… {len(text) - RAW_RESPONSE_LIMIT} more characters not kept]"


def objective_of(summary: RoundSummary, objective: str) -> float:
    """The round's headline number for `objective` (balanced: all F1; decisions are paired)."""
    return summary.column(objective_column(objective)) or 0.0


def headline(summary: RoundSummary | None) -> dict[str, float | int | None]:
    """An evaluation's headline figures as `result.json` holds them ({} when it was not made)."""
    return summary.headline() if summary is not None else {}


class EvolutionRunner:
    def __init__(
        self,
        spec: RunSpec,
        store: RunStore,
        workspace: Workspace,
        scorer: RoundScorer,
        init_config: RetrievalConfig,
        hooks: Hooks | None = None,
    ):
        self.spec = spec
        self.store = store
        self.ws = workspace
        self.scorer = scorer
        dataset: Dataset = workspace.dataset
        self.init_config = init_config.with_budget(spec.budget)  # every config of the run is measured at it
        # the run's action space: the files' dimensions and the run's levers; replaced (never
        # changed in place) when a lever emerges from a diagnosis
        self.space: ActionSpace = init_config.space
        self.hooks = hooks or Hooks()
        self._retried: set[tuple[int, str]] = set()  # finished evaluations whose failed questions were asked again
        self.dev = split_dataset(dataset, "dev")
        self.timed_questions = timed_sample(self.dev.questions, spec.seed)  # every round's retrieval is timed on them
        try:
            self.test = split_dataset(dataset, "test")
        except DataError:  # one conversation: nothing is held out, and reports say so
            self.test = dataset.subset(set())
        self.diagnoser = make_diagnoser(
            spec.diagnoser, seed=spec.seed, client=workspace.roles.diagnosis_client, mode=spec.diagnosis_mode
        )
        self.rubric = make_diagnoser("rubric", seed=spec.seed)  # the fallback of a model's diagnosis
        # the ladder (loop/ladder.py, loop/screening.py) screens candidates before a full evaluation;
        # under the evidence objective a full evaluation is itself only contexts: nothing to screen
        self.contexts_only = spec.objective == CONTEXTS_ONLY
        self.screener = (
            Screener(LadderInputs(spec, store, scorer, self.dev.questions, self.hooks.record))
            if screening_enabled(spec.screen_fraction) and not self.contexts_only
            else None
        )

    # ---- helpers -----------------------------------------------------------------------------
    def _say(self, text: str) -> None:
        if self.hooks.message:
            self.hooks.message(text)

    def _evaluate(
        self,
        config: RetrievalConfig,
        questions: list[Question],
        round_no: int,
        phase: str,
        cuts: tuple[tuple[str, TokenBudget], ...] = (),
    ) -> RoundSummary:
        """`config` on `questions` as (round, phase), read back when finished; `cuts`: the same
        ranking also cut at a frontier run's further budgets, each its own phase."""
        row = self.store.round_row(round_no, phase)
        if row and row.done and not (row.n_failed and (round_no, phase) not in self._retried):
            return row
        if row and row.done:
            # a finished evaluation with failed questions (a faulty server): a resume asks them
            # again — once per process — so that every table compares evaluations of equal n
            self._retried.add((round_no, phase))
        on_record = round_progress(self.hooks.record, round_no, phase, len(questions))
        job = RoundJob(config, questions, round_no, phase, on_record, contexts_only=self.contexts_only, cuts=cuts)
        return self.scorer.score_round(job, self.hooks.stage)

    def _timed(self, summary: RoundSummary, config: RetrievalConfig) -> RoundSummary:
        """A dev evaluation with its config's retrieval ms beside BM25 alone (timed once; a resume
        reads them back): loop/retrieval_cost.py."""
        if summary.retrieval_ms is not None or not summary.done:
            return summary
        cost = time_retrieval(self.ws, config, self.timed_questions)
        if cost is None:
            return summary
        self.store.note_retrieval_cost(summary.round, summary.phase, cost.ms, cost.bm25_ms)
        if summary.round == 0 and (over := self.spec.guard.over_max_ms(cost.ms)):
            self._say(f"the start config is over --max-ms: {over} (it is the first best all the same)")
        return replace(summary, retrieval_ms=cost.ms, bm25_ms=cost.bm25_ms)

    def _complete_screenings(self) -> None:
        """On resume, ask the failed questions of finished screenings again (a faulty server's), so
        that no phase keeps a failed record; dev and test evaluations are re-asked as the loop reaches
        them (`_evaluate`). A screening's verdict was recorded when it was made and stands; only its
        records and scores are completed."""
        dev = {q.question_id: q for q in self.dev.questions}
        for row in self.store.finished_with_failures():
            if not row.phase.startswith((SCREEN_PREFIX, CONTEXTS_PREFIX)):
                continue
            asked = self.store.question_ids(row.round, row.phase)
            questions = [q for qid, q in dev.items() if qid in asked]
            config = self._config_from_json(row.config or {})
            contexts_only = row.phase.startswith(CONTEXTS_PREFIX)
            self.scorer.score_round(RoundJob(config, questions, row.round, row.phase, contexts_only=contexts_only))

    def _config_from_json(self, data: dict[str, Any]) -> RetrievalConfig:
        """A config the run store kept, at the run's token budget (stored values hold no budget)."""
        return parse_config(data, source="run store", space=self.space)[0].with_budget(self.spec.budget)

    # ---- the loop ----------------------------------------------------------------------------
    def run(self) -> RunResult:
        spec = self.spec
        scores: list[RoundScore] = []
        seen: set[str] = set()
        config = self.init_config
        result = RunResult(self.store.run_dir)
        self._complete_screenings()
        for round_no in range(spec.rounds + 1):
            others: list[JSONObject] = []  # --candidates: the configs screened beside next_config
            if round_no > 0:
                previous = self.store.decision(round_no - 1)
                if previous is None or previous.decision in FINAL_DECISIONS:
                    break
                config = self._config_from_json(previous.next_config or {})
                others = previous.candidates or []
            started = time.perf_counter()
            if round_no > 0 and self.screener is not None:
                config = self._screen(self.screener, round_no, config, others, scores, seen)
            if self._in_looks(round_no, config, scores):
                summary = self._sequential(config, round_no, incumbent_of(scores).round)
            else:
                summary = self._evaluate(config, self.dev.questions, round_no, Phase.DEV, self._cuts(Phase.DEV))
            summary = self._timed(summary, config)
            score = objective_of(summary, spec.objective)
            decision = self.store.decision(round_no)
            comparison, verdict = None, None
            if round_no == 0:
                accepted, loss = True, False
            elif decision is not None and decision.accepted is not None:
                accepted, loss = bool(decision.accepted), bool(decision.significant_loss)
            else:
                comparison, verdict = self._judge(round_no, incumbent_of(scores).round, summary.retrieval_ms)
                if summary.stopped_at:  # judged on the questions it asked; a stopped round is never kept
                    why = f"{verdict.reason}; stopped early: {summary.stopped_at}"
                    verdict = replace(verdict, accepted=False, reason=why)
                accepted, loss = verdict.accepted, verdict.significant_loss
            scores.append(
                RoundScore(round_no, score, config, accepted, loss, summary.retrieval_ms, summary.stopped_at or "")
            )
            seen.add(config.fingerprint())
            self.diagnoser.observe(config, score)
            stale = round_no - incumbent_of(scores).round
            if decision is None:
                self._decide(round_no, scores, seen, stale, comparison, verdict)
            self._round_done(result, summary, time.perf_counter() - started, accepted)
        if spec.guard.parsimony:
            self._prune(scores, result)
        best = incumbent_of(scores)
        result.best_round = best.round
        result.dev = {
            "start": headline(self.store.round_row(0, Phase.DEV)),
            "best": headline(self.store.round_row(best.round, Phase.DEV)),
        }
        bests = budget_bests(self.store, spec, best.round) if spec.cuts else {}
        groups = test_groups(frontier_points(self.store, spec, best.round, bests)) if spec.cuts else {}
        result.test = self._score_on_test(scores[0], best, groups.pop(best.round, []))
        for round_no, budgets in groups.items():
            self._score_point_on_test(round_no, budgets)
        result.cost = total_cost(round_costs(self.store))
        if spec.cuts:
            result.frontier = frontier_points(self.store, spec, best.round, bests)
        result.best_config_path = write_final(self.store.run_dir, best, scores[0], result)
        if spec.cuts:
            write_frontier_configs(self.store.run_dir, result.frontier, self._point_config)
        return result

    def _prune(self, scores: list[RoundScore], result: RunResult) -> None:
        """End-of-run pruning (loop/pruning.py): each lever the best kept, switched off in turn, as
        a dev round of its own after the last one; a pruned variant becomes the best. A resume reads
        the decided pruning rounds back and goes on from the first undecided one."""
        spec = self.spec
        tried: set[str] = set()
        round_no = scores[-1].round
        while (lever := next_lever(incumbent_of(scores).config, scores[0].config, tried)) is not None:
            tried.add(lever)
            round_no += 1
            best = incumbent_of(scores)
            config = without_lever(best.config, lever)
            started = time.perf_counter()
            # at the primary budget only: pruning judges the loop's own best, which is decided there
            dev = self._evaluate(config, self.dev.questions, round_no, Phase.DEV)
            summary = self._timed(dev, config)
            decided = self.store.decision(round_no)  # read back on resume, else judged now
            comparison = None if decided else self._paired(round_no, best.round)
            verdict = (
                pruning_verdict(lever, comparison, spec.objective, spec.guard, round_no)
                if comparison is not None
                else None
            )
            accepted = verdict.pruned if verdict else bool(decided and decided.accepted)
            score = objective_of(summary, spec.objective)
            scores.append(RoundScore(round_no, score, config, accepted, False, summary.retrieval_ms))
            if verdict is not None:
                row = replace(
                    self._decision_row(round_no, scores, comparison, None, verdict.decision, verdict.reason),
                    verdict=verdict.reason,
                    base_round=best.round,
                    base_score=best.score,
                    changes=[c.as_dict() for c in diff_configs(best.config, config)],
                )
                self.store.record_decision(row)
                write_round_snapshot(self.store.run_dir, round_no, config, row, None, None)
            self._round_done(result, summary, time.perf_counter() - started, accepted)

    def _round_done(self, result: RunResult, summary: RoundSummary, seconds: float, accepted: bool) -> None:
        """A decided round's outcome into the result and to the CLI's round table."""
        levers = {d.name for d in self.space.added()}
        info = round_outcome(
            summary, RoundFacts.read(self.store), self.spec.objective, levers, seconds=seconds, judged=accepted
        )
        result.rounds.append(info)
        if self.hooks.round_done:
            self.hooks.round_done(info)

    def _in_looks(self, round_no: int, config: RetrievalConfig, scores: list[RoundScore]) -> bool:
        """Whether round `round_no` evaluates its config on dev in looks (loop/sequential.py): a
        screened candidate of a run with a model answering and --sequential on (a round that
        carries the incumbent reuses its records: nothing to stop)."""
        return (
            round_no > 0
            and self.screener is not None
            and self.spec.sequential
            and self.ws.roles.model_answers
            and config.fingerprint() != incumbent_of(scores).config.fingerprint()
        )

    def _sequential(self, config: RetrievalConfig, round_no: int, incumbent_round: int) -> RoundSummary:
        """`config` on dev look by look, stopped for futility after any look but the last
        (loop/sequential.py). A resume reads a stopped row back as final and goes on from the
        first look whose questions are not all answered; the row's wall time adds up the looks."""
        assert self.screener is not None
        plan = looks(self.dev.questions, self.screener.batch, self.spec.seed)
        incumbent = self.store.round_records(incumbent_round, Phase.DEV)
        min_effect = self.spec.guard.min_effect
        for number, questions in enumerate(plan, start=1):
            row = self.store.round_row(round_no, Phase.DEV)
            if row is not None and row.done and row.stopped_at:
                return row
            asked = self.store.finished_question_ids(round_no, Phase.DEV) if row is not None else set()
            # a look finished before an interruption is not scored again (its check is made again)
            if row is None or not row.done or not all(q.question_id in asked for q in questions):
                earlier = (row.wall_seconds or 0.0) if row is not None and row.done else 0.0
                self._evaluate_look(config, questions, round_no)
                if earlier:
                    self.store.add_wall_seconds(round_no, Phase.DEV, earlier)
            if number == len(plan):
                break
            candidate = self.store.round_records(round_no, Phase.DEV)
            stop, bounds = futility(candidate, incumbent, self.spec.objective, min_effect)
            if stop:
                why = stop_text(
                    f"look {number}", len(questions), f"{len(self.dev.questions)} dev questions", bounds, min_effect
                )
                self.store.note_stopped(round_no, Phase.DEV, why)
                break
        final = self.store.round_row(round_no, Phase.DEV)
        assert final is not None  # begun by the first look
        return final

    def _evaluate_look(self, config: RetrievalConfig, questions: list[Question], round_no: int) -> RoundSummary:
        """One look of a sequential dev evaluation: the look's questions not answered yet."""
        on_record = round_progress(self.hooks.record, round_no, Phase.DEV, len(questions))
        job = RoundJob(config, questions, round_no, Phase.DEV, on_record)
        return self.scorer.score_round(job, self.hooks.stage)

    def _cuts(self, phase: str, budgets: list[int] | None = None) -> tuple[tuple[str, TokenBudget], ...]:
        """A frontier run's further budgets (or `budgets` of them) as `phase`'s cuts."""
        wanted = self.spec.budgets[1:] if budgets is None else budgets
        return tuple((budget_phase(phase, tokens), cut) for tokens, cut in self.spec.cuts if tokens in wanted)

    def _point_config(self, round_no: int, tokens: int) -> RetrievalConfig:
        """Round `round_no`'s config at `tokens` of the run's budgets (one ranking's cut)."""
        row = self.store.round_row(round_no, Phase.DEV)
        return self._config_from_json((row.config if row else None) or {}).with_budget(self.spec.budget.cut_at(tokens))

    def _score_point_on_test(self, round_no: int, budgets: list[int]) -> None:
        """The held-out test scores of a round that is the best at further `budgets` only (one
        ranking, cut at each; the first budget's phase leads)."""
        if not self.test.questions:
            return
        first, *rest = budgets
        phase = budget_phase(Phase.TEST_BEST, first)
        config = self._point_config(round_no, first)
        self._evaluate(config, self.test.questions, round_no, phase, self._cuts(Phase.TEST_BEST, rest))

    def _screen(
        self,
        screener: Screener,
        round_no: int,
        config: RetrievalConfig,
        others: list[JSONObject],
        scores: list[RoundScore],
        seen: set[str],
    ) -> RetrievalConfig:
        """The config the round evaluates in full: the proposal (or, with --candidates, the best of
        the candidates) if it passes its minibatch screening, else the incumbent's. The diagnoser
        learns the estimated score of every candidate screened out."""
        incumbent = incumbent_of(scores)
        chosen = (
            choose_among(
                screener,
                round_no,
                [(config, "proposal"), *screened_candidates(others, config)],
                incumbent,
                seen,
            )
            if others
            else screener.choose(round_no, config, incumbent, seen, self._exploration_dims())
        )
        for row in self.store.screenings(round_no):  # read back on resume too: told once per process
            if row.outcome != PASSED and row.config is not None:
                self.diagnoser.observe(
                    self._config_from_json(row.config), estimated_score(row, incumbent.score, self.spec.objective)
                )
        return chosen

    def _judge(self, round_no: int, incumbent_round: int, retrieval_ms: float | None) -> tuple[Comparison, Verdict]:
        """The paired comparison of a dev round with the incumbent, and the guard's verdict (for
        the best of K parallel candidates, at alpha / K: loop/candidates.py)."""
        spec = self.spec
        comparison = self._paired(round_no, incumbent_round)
        k = self._comparisons(round_no)
        verdict = accept(comparison, spec.objective, corrected(spec.guard, k))
        if verdict.accepted and (over := spec.guard.over_max_ms(retrieval_ms)):
            verdict = replace(verdict, accepted=False, reason=f"{verdict.reason}; not kept: {over}")
        if k > 1:
            verdict = replace(
                verdict,
                reason=f"{verdict.reason} (best of {k} candidates: gains tested at "
                f"alpha {spec.guard.alpha:g} / {k}, Holm's first step)",
            )
        return comparison, verdict

    def _paired(self, round_no: int, incumbent_round: int) -> Comparison:
        """Dev round `round_no` paired with `incumbent_round` on the same questions (the run's objective)."""
        return compare(
            self.store.round_records(round_no, Phase.DEV),
            self.store.round_records(incumbent_round, Phase.DEV),
            round_no,
            incumbent_round,
            self.spec.objective,
            folds=self.spec.guard.folds,
            seed=self.spec.seed,
        )

    def _comparisons(self, round_no: int) -> int:
        """How many candidates the round's config was chosen among (1 unless --candidates)."""
        return max(1, len(self.store.screenings(round_no))) if self.spec.candidates > 1 else 1

    def _decide(
        self,
        round_no: int,
        scores: list[RoundScore],
        seen: set[str],
        stale: int,
        comparison: Comparison | None,
        verdict: Verdict | None,
    ) -> DecisionRow:
        """The guard's decision after a round (recorded, with the round's snapshot): stop at the
        round limit or when patience runs out; else diagnose the round the next config builds on
        and let the guard apply, revert or explore."""
        spec = self.spec
        current = scores[-1]
        if round_no >= spec.rounds or (spec.patience and stale >= spec.patience):
            final = round_no >= spec.rounds
            row = self._decision_row(
                round_no,
                scores,
                comparison,
                verdict,
                Decision.STOPPED if final else Decision.CONVERGED,
                "round limit reached" if final else f"no significant gain for {stale} rounds",
            )
            self.store.record_decision(row)
            write_round_snapshot(self.store.run_dir, round_no, current.config, row, None, None)
            return row
        regression = check_regression(scores, spec.guard, "" if verdict is None else verdict.reason)
        base = regression.base
        inp = self._diagnosis_input(base, scores, comparison)
        with self.store.journal.phase(round_no, "diagnose"):  # the diagnosis's calls, re-extraction's too
            diagnosis = self.diagnoser.diagnose(inp, base.config)
            self._drop_fixed(diagnosis.proposal)
            free_dims = self._exploration_dims()  # of the space before a lever emerges from this diagnosis
            proposal, fallback = self._checked_proposal(diagnosis, inp, base.config)
            self._record_diagnosis(round_no, inp, diagnosis, scores)
            sessions: list[str] = []
            added = 0
            if spec.reextract and inp.taxonomy.get("extraction_gap", 0):
                sessions, added = self._reextract(base.round, round_no)
            rng = random.Random(f"guard-{spec.seed}-{round_no}")
            decision = decide(scores, regression, proposal, spec.guard, rng, seen, free_dims)
            candidates = None
            if spec.candidates > 1:  # the next round screens K candidates at once (loop/candidates.py)
                candidates = alternative_candidates(
                    self.diagnoser,
                    inp,
                    base.config,
                    decision.next_config,
                    spec.candidates,
                    seen,
                    lambda alternative: self._check_alternative(alternative, inp),
                    random.Random(f"candidates-{spec.seed}-{round_no}"),
                    spec.guard.explore_dims,
                    free_dims,
                )
        self.store.fold_usage_journal()
        if fallback:
            self._say(f"round {round_no}: {fallback}")
        row = replace(
            self._decision_row(round_no, scores, comparison, verdict, decision.decision, decision.reason),
            base_round=base.round,
            base_score=base.score,
            changes=[c.as_dict() for c in decision.changes],
            next_config=decision.next_config.model_dump(),
            reextracted_sessions=sessions,
            memories_added=added,
            flags=proposal.flags,
            fallback=fallback or None,
            candidates=candidates,
        )
        self.store.record_decision(row)
        write_round_snapshot(self.store.run_dir, round_no, current.config, row, inp.as_dict(), diagnosis)
        return row

    def _decision_row(
        self,
        round_no: int,
        scores: list[RoundScore],
        comparison: Comparison | None,
        verdict: Verdict | None,
        decision: str,
        reason: str,
    ) -> DecisionRow:
        """A `decisions` row with the round's scores and verdict (a stop's whole row; a diagnosed
        round's next config, changes and what re-extraction added are filled in by `_decide`)."""
        current = scores[-1]
        best = incumbent_of(scores)
        return DecisionRow(
            round=round_no,
            decision=decision,
            reason=reason,
            score=current.score,
            delta=current.score - scores[-2].score if len(scores) > 1 else None,
            base_round=current.round,
            base_score=current.score,
            best_round=best.round,
            best_score=best.score,
            changes=[],
            next_config=None,
            reextracted_sessions=[],
            memories_added=0,
            accepted=current.accepted,
            significant_loss=current.significant_loss,
            compared_with=None if comparison is None else comparison.incumbent_round,
            verdict="starting config" if verdict is None else verdict.reason,
            paired=None if comparison is None else comparison.as_dict(),
            comparisons=self._comparisons(round_no),
        )

    def _diagnosis_input(
        self, base: RoundScore, scores: list[RoundScore], comparison: Comparison | None
    ) -> DiagnosisInput:
        """What the diagnoser reads of the round the next config builds on (the incumbent after a
        revert), with the latest round's outcome in its history and what this run keeps fixed."""
        current = scores[-1]
        inp = build_diagnosis_input(
            self.store,
            base.round,
            Phase.DEV,
            base.config,
            self.spec.objective,
            base.score,
            previous_round=scores[-2].round if len(scores) > 1 else None,
            current_round=current.round,
            current_score=current.score,
            current_accepted=current.accepted,
            current_paired=None if comparison is None else comparison.as_dict(),
        )
        inp.token_budget = int(base.config.budget.tokens or 0)
        free = self._free_dims()
        inp.fixed = () if free is None else tuple(name for name in self.space if name not in free)
        return inp

    def _record_diagnosis(
        self, round_no: int, inp: DiagnosisInput, diagnosis: DiagnosisResult, scores: list[RoundScore]
    ) -> None:
        """Store what the diagnoser read and replied; a new dimension it defined becomes a lever
        of the run's space from now on (loop/emergence.py)."""
        grown, proposed_dimensions = emerge(self.store.run_dir, round_no, diagnosis.proposal.new_dimensions, self.space)
        self._grow(grown, scores)
        self.store.record_diagnosis(
            DiagnosisRow(
                round=round_no,
                diagnoser=self.diagnoser.name,
                input=inp.as_dict(),
                prompt=diagnosis.prompt,
                raw_response=bounded_raw(diagnosis.raw_response),
                parse_error=diagnosis.parse_error or None,
                proposal=diagnosis.proposal.as_dict(),
                calls=diagnosis.cost.calls,
                prompt_tokens=diagnosis.cost.prompt_tokens,
                completion_tokens=diagnosis.cost.completion_tokens,
                prompt_trimmed=diagnosis.trimmed,
            ),
            proposed_dimensions,
        )
        if diagnosis.parse_error:
            self._say(f"round {round_no}: diagnosis reply rejected in part: {diagnosis.parse_error}")

    def _reextract(self, base_round: int, round_no: int) -> tuple[list[str], int]:
        """Extract again the dev sessions whose evidence no memory covers (each once per run); the
        sessions re-extracted and the memories they added (none when no session is left)."""
        done = self.store.reextracted_sessions()
        targets = uncovered_sessions(self.store, self.ws, base_round, set(self.dev.conversations), done)
        if not targets:
            return [], 0
        extra = reextract(self.ws, targets, round_no + 1)
        self.store.record_memories(extra.units)
        return list(extra.sessions), extra.added

    def _grow(self, space: ActionSpace, scores: list[RoundScore]) -> None:
        """A lever emerged: the run's space from now on is `space`, and the configs the run keeps
        (every round's) are read in it, so the guard's next config and an exploration may use
        the new lever (at its default it changes no config's fingerprint)."""
        if space is self.space:
            return
        self.space = space
        for kept in scores:
            kept.config = kept.config.with_space(space)

    def _checked_proposal(
        self, diagnosis: DiagnosisResult, inp: DiagnosisInput, config: RetrievalConfig
    ) -> tuple[Proposal, str]:
        """The proposal checked against the round's evidence (loop/evidence_check.py): flags are
        recorded for every diagnoser; a model's contradicted changes are rejected, and when a
        model's diagnosis leaves nothing to apply (a failed call, a garbled reply, only rejected
        changes) the round falls back to the rubric's best action — a weak model can never do
        worse than the rubric. Returns the proposal to apply and why it fell back ("" if not)."""
        proposal = diagnosis.proposal
        from_model = DIAGNOSERS[self.diagnoser.name].needs_model
        flag_proposal(proposal, inp, config.space, reject=from_model)
        if not from_model or not proposal.is_empty:
            return proposal, ""
        why = diagnosis.parse_error or "; ".join(proposal.rejected) or "the model proposed no change"
        fallback = self.rubric.diagnose(inp, config).proposal
        self._drop_fixed(fallback)
        flag_proposal(fallback, inp, config.space, reject=False)
        fallback.rationale = f"rubric fallback: {fallback.rationale}"
        return fallback, f"the {self.diagnoser.name} diagnosis left nothing to apply ({why[:300]}); rubric fallback"

    def _check_alternative(self, proposal: Proposal, inp: DiagnosisInput) -> None:
        """A further candidate's proposal checked as the first one is: fixed settings dropped, a
        model's changes that the round's evidence contradicts rejected (others flagged)."""
        self._drop_fixed(proposal)
        flag_proposal(proposal, inp, self.space, reject=DIAGNOSERS[self.diagnoser.name].needs_model)

    def _unusable(self) -> list[tuple[set[str], str]]:
        """Settings this run cannot use, each group with why: those that act only through a model
        the run lacks — an answer-side model (roles answering offline), a cross-encoder, a second
        embedding model — and, under the evidence objective, the answer stage. Changing them would change nothing (and a config that turns on a stage
        without its model is refused)."""
        needs: tuple[tuple[object, Callable[[Dimension], bool], str], ...] = (
            (
                self.ws.roles.mechanism_client,
                lambda d: d.needs_model,
                "only has an effect with an answer model; this run answers offline",
            ),
            (self.ws.reranker, lambda d: d.needs_reranker, "needs a cross-encoder; this run has none (--rerank-model)"),
            (
                self.ws.second_embedder,
                lambda d: d.needs_second_embedder,
                "needs a second embedding model; this run has none (--second-embedding-model)",
            ),
        )
        groups = [
            ({n for n, d in self.space.items() if needs_it(d)}, why) for model, needs_it, why in needs if model is None
        ]
        if self.contexts_only:  # its rounds build contexts and ask no reader: the answer stage acts on nothing
            groups.append((set(self.space.answer_stage()), "acts on the answer; the evidence objective asks for none"))
        return [(names, why) for names, why in groups if names]

    def _free_dims(self) -> list[str] | None:
        """The dimensions this run may change (None: all): not --freeze'd, and not settings that
        need a model the run lacks."""
        fixed = set(self.spec.frozen).union(*(names for names, _ in self._unusable()))
        return [name for name in self.space if name not in fixed] if fixed else None

    def _exploration_dims(self) -> list[str] | None:
        """The dimensions a random exploration may draw (None: all): the free ones, less — while a
        model answers — those that can ask it again for a question (`model_calls`): an exploration
        is a gamble, and one that switches on an LLM walk or a verification pass costs its round
        several calls a question (the diagnoser still proposes them when the failures ask)."""
        free = self._free_dims()
        if self.ws.roles.mechanism_client is None:
            return free
        return [name for name in (free or list(self.space)) if not self.space[name].model_calls]

    def _drop_fixed(self, proposal: Proposal) -> None:
        """Drop changes to dimensions this run keeps fixed (--freeze; settings that need a model
        the run lacks)."""
        if self.spec.frozen:
            proposal.drop_fields(set(self.spec.frozen), "frozen for this run (--freeze)")
        for names, why in self._unusable():
            proposal.drop_fields(names, why)

    def _score_on_test(self, start: RoundScore, best: RoundScore, also: list[int]) -> dict[str, Any]:
        """The start and the best config on the test questions, paired (a frontier run: the start
        at every budget, the best at the further budgets `also` it is best at too)."""
        if not self.test.questions:
            return {}
        start_cuts = self._cuts(Phase.TEST_START)
        start_summary = self._evaluate(start.config, self.test.questions, 0, Phase.TEST_START, start_cuts)
        best_cuts = self._cuts(Phase.TEST_BEST, also)
        best_summary = self._evaluate(best.config, self.test.questions, best.round, Phase.TEST_BEST, best_cuts)
        held = held_out(self.store, best.round, self.spec.objective, self.spec.seed)
        return {
            "start": headline(start_summary),
            "best": headline(best_summary),
            "paired": held.as_dict(),
            "objective": self.spec.objective,
        }
