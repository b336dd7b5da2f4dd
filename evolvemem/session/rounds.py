"""`RoundBracket`: how one evaluation becomes one finished (round, phase) of the run store.

Begin the round → build the memory stores its config reads (their cost is the round's) → evaluate
the questions not answered yet, here or sharded on a remote executor → fold the usage journal →
score every record the round holds and finish it. It is the `RoundScorer` the loop, the ladder,
the ablation and `evolve eval` all score through; it also holds what a run already paid for
(whole records of an identical effective config, answers to an identical context), refilled from
the store on open so a resume re-asks nothing."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from evolvemem.answering.context_reuse import AnswerMemo
from evolvemem.answering.contexts import evaluate_contexts
from evolvemem.answering.evaluate import ReuseMap, evaluate, remember
from evolvemem.answering.stores import stores_needed
from evolvemem.contracts.records import QuestionRecord
from evolvemem.contracts.vocab import ContextMode
from evolvemem.data.models import Question
from evolvemem.errors import EvolveMemError
from evolvemem.executor import Executor
from evolvemem.loop.scorer import RoundJob, Scoring, StageFn
from evolvemem.scoring.aggregate import EvaluationScores, summarise
from evolvemem.session.sharded import evaluate_sharded
from evolvemem.store.rows import RoundSummary
from evolvemem.store.run_store import RunStore
from evolvemem.workspace import Workspace


class RoundBracket:
    """Scores jobs as (round, phase) of `store`, in `workspace`, on `executor`."""

    def __init__(
        self,
        store: RunStore,
        workspace: Workspace,
        executor: Executor,
        scoring: Scoring,
    ):
        self.store = store
        self.workspace = workspace
        self.executor = executor
        self.scoring = scoring
        self.reuse: ReuseMap = {}
        self.answers: AnswerMemo | None = AnswerMemo() if scoring.context_reuse else None
        stored = store.scored_records()
        remember(self.reuse, stored)
        if self.answers is not None:
            self.answers.restore(stored)

    def score_round(self, job: RoundJob, on_stage: StageFn | None = None) -> RoundSummary:
        """Score `job.config` on `job.questions` as (round, phase): builds the memory stores it
        reads (`on_stage` reports their progress), resumes a half-finished evaluation (failed
        questions are asked again), records usage, returns the finished round. `contexts_only`:
        record each question's answer context and its evidence figures without an answer
        (answering/contexts.py); every context is cut at the token budget the config carries."""
        return self.score_rounds([job], on_stage)[0]

    def score_rounds(self, jobs: list[RoundJob], on_stage: StageFn | None = None) -> list[RoundSummary]:
        """Several evaluations, each as `score_round` scores one: in this process one after
        another; on a remote executor all at once, split by conversation (session/sharded.py).
        Contexts-only evaluations make no answer call (milliseconds a question): always here."""
        return [row for _, row in self.score_with_scores(jobs, on_stage)]

    def score_with_scores(
        self, jobs: list[RoundJob], on_stage: StageFn | None = None
    ) -> list[tuple[EvaluationScores, RoundSummary]]:
        """`score_rounds` with each round's full scores (per group and question type too)."""
        # contexts-only and oracle evaluations (`evolve eval` only) always run here
        sharded = [
            i
            for i, job in enumerate(jobs)
            if self.executor.remote and not job.contexts_only and job.context is ContextMode.RETRIEVED
        ]
        scored = {i: self._score_here(job, on_stage) for i, job in enumerate(jobs) if i not in sharded}
        if sharded:
            started = time.perf_counter()
            batch = [jobs[i] for i in sharded]
            todos = [self._begin(job, on_stage) for job in batch]
            outcomes = evaluate_sharded(
                self.executor,
                self.store,
                self.workspace,
                batch,
                todos,
                reuse=self.reuse,
                memo=self.answers,
                protocol=self.scoring.protocol,
                concurrency=self.scoring.concurrency,
            )
            setup = max(0.0, time.perf_counter() - started - max(o.seconds for o in outcomes))
            for i, job, outcome in zip(sharded, batch, outcomes):
                scored[i] = self._finish(job, setup + outcome.seconds, outcome.stopped)
        return [scored[i] for i in range(len(jobs))]

    def _begin(self, job: RoundJob, on_stage: StageFn | None) -> list[Question]:
        """Open (round, phase), build the stores its config reads (their cost is the round's) and
        return the questions not answered yet (failed ones are asked again)."""
        store, ws = self.store, self.workspace
        store.begin_round(job.round_no, job.phase, job.config)
        ws.expect(job.config)
        with store.journal.phase(job.round_no, job.phase):
            built = ws.ensure_stores(
                stores_needed(job.config), progress=on_stage, conversations={q.conversation_id for q in job.questions}
            )
        if built:
            store.note_stores_built(job.round_no, job.phase, "; ".join(b.describe() for b in built))
        store.fold_usage_journal()
        done = self._done_ids(job)
        # a question is asked again while any of its phases lacks it (`--budgets`: its cuts)
        return [q for q in job.questions if not all(q.question_id in ids for ids in done.values())]

    def _done_ids(self, job: RoundJob) -> dict[str, set[str]]:
        """The questions each phase of `job` (its own and its cuts') holds, failed ones dropped."""
        done: dict[str, set[str]] = {}
        for phase in [job.phase, *(cut for cut, _ in job.cuts)]:
            self.store.begin_round(job.round_no, phase, job.config)
            self.store.drop_failed(job.round_no, phase)
            done[phase] = self.store.finished_question_ids(job.round_no, phase)
        return done

    def _score_here(self, job: RoundJob, on_stage: StageFn | None) -> tuple[EvaluationScores, RoundSummary]:
        """One evaluation in this process, its records flushed batch by batch (it is scored by
        `_finish`, from the store: a resumed round's earlier records count too)."""
        store, ws = self.store, self.workspace
        round_no, phase = job.round_no, job.phase
        started = time.perf_counter()
        todo = self._begin(job, on_stage)
        done = self._done_ids(job) if job.cuts else {}
        # each call's usage is journaled as it returns (store/usage_journal.py); the journal is
        # folded into the usage table with every flushed batch of records, so a killed process
        # loses neither the answers it paid for nor their cost; one lock keeps the store's
        # connection to one writer at a time
        writing = threading.Lock()

        def record(batch: list[QuestionRecord]) -> None:
            if done:  # a resumed `--budgets` round: what a phase holds already is not written twice
                batch = [r for r in batch if r.question_id not in done.get(r.phase, ())]
            with writing:
                store.record_questions(batch)
                store.fold_usage_journal()

        with store.journal.phase(round_no, phase):
            if job.contexts_only:
                evaluate_contexts(
                    ws,
                    job.config,
                    todo,
                    round_no=round_no,
                    phase=phase,
                    on_record=job.on_record,
                    sink=record,
                    cuts=job.cuts,
                )
            else:
                evaluate(
                    ws,
                    job.config,
                    todo,
                    round_no=round_no,
                    phase=phase,
                    concurrency=self.scoring.concurrency,
                    protocol=self.scoring.protocol,
                    on_record=job.on_record,
                    sink=record,
                    # a whole earlier record answered from another context is no oracle answer
                    reuse=self.reuse if job.context is ContextMode.RETRIEVED else None,
                    memo=self.answers,
                    mode=job.context,
                )
        store.fold_usage_journal()
        seconds = time.perf_counter() - started
        for phase, budget in job.cuts:  # the cuts of one ranking: each finished as its own phase
            self._finish(replace(job, phase=phase, config=job.config.with_budget(budget), cuts=()), seconds, None)
        return self._finish(job, seconds, ws.roles.stopped_model())

    def _finish(self, job: RoundJob, seconds: float, stopped: str | None) -> tuple[EvaluationScores, RoundSummary]:
        """Score every record (round, phase) holds — those of an earlier, interrupted process too,
        and those a remote executor wrote — and close it; a model that stopped answering or a
        round without one scored question is an error (the round stays open for a resume)."""
        store, ds = self.store, self.workspace.dataset
        round_no, phase = job.round_no, job.phase
        records = store.round_records(round_no, phase)
        if stopped:  # a model stopped answering mid-round: the round is not scored on what was left
            raise EvolveMemError(f"round {round_no} ({phase}) stopped: {stopped}")
        if job.questions and not any(not r.failed for r in records):
            cause, n = (store.failure_causes(round_no, phase) or [("no reason recorded", len(job.questions))])[0]
            raise EvolveMemError(
                f"round {round_no} ({phase}): every one of its {len(records)} questions failed; {n} with: {cause}"
            )
        if not job.contexts_only:  # a record without an answer is no answer to reuse
            remember(self.reuse, records)
        scores = summarise(records, category_names=ds.category_names)
        return scores, store.finish_round(round_no, phase, scores, seconds)
