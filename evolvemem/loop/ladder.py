"""Rung 0 of the screening ladder: does a candidate hand the reader its evidence?

A round's candidate climbs rungs and stops at the first one where it is significantly worse than
the incumbent: rung 0 compares the evidence recall of the contexts it builds for the answerable
dev questions with the incumbent's (no answer call: retrieval only, answering/contexts.py), rung 1
is the paired minibatch with the answer model (loop/screening.py), rung 2 the full dev
evaluation. Rung 0 stops a candidate with the guard's loss test (loop/paired.py `loses`) on the
paired recall; it never passes one on its own, because more evidence is not always a better
answer (a reader can drown in a long context) — the reader has the last word. But a significant
evidence gain (the guard's gain test on the recall) is carried up: a small minibatch rarely has
the power to show the answer gain such a change brings, so rung 1 then only has to show that the
reader does not answer worse with it, and the full dev evaluation decides (loop/screening.py).

Rung 0 is skipped, and the screening says why, when the benchmark carries no gold evidence or
when the candidate changes only settings that act on a built context (`stage = "answer"`: answer
style, verification, layout), which cannot move the context."""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass

from evolvemem.contracts.records import QuestionRecord
from evolvemem.contracts.vocab import contexts_phase
from evolvemem.data.models import Question
from evolvemem.loop.paired import PairedStat, compare, gains, loses
from evolvemem.loop.scorer import ProgressFn, RoundJob, RoundScorer, round_progress
from evolvemem.loop.spec import CONTEXTS_ONLY, GuardSettings, RunSpec
from evolvemem.qtypes import is_adversarial
from evolvemem.space.config import RetrievalConfig
from evolvemem.space.ops import diff_configs
from evolvemem.store.run_store import RunStore

# contexts_phase(0): the incumbent's contexts; contexts_phase(1..): each screening's candidate

RUNG_NAMES = {0: "contexts' evidence", 1: "paired minibatch", 2: "full dev evaluation"}


def rung_text(rung: int | None) -> str:
    """Where on the ladder a screened candidate stopped ("" for screenings recorded before the ladder)."""
    if rung is None:
        return ""
    return f" (reached rung {rung}: {RUNG_NAMES[rung]})" if rung == 2 else f" at rung {rung} ({RUNG_NAMES[rung]})"


@dataclass(frozen=True)
class RungZero:
    stopped: bool  # significantly worse: the candidate goes no further
    reason: str
    evidence: dict[str, Any]  # the screenings row's `evidence` column
    stat: PairedStat | None = None  # the paired recall (None when rung 0 was skipped)

    def gained(self, settings: GuardSettings, alpha: float | None = None) -> bool:
        """Whether the candidate's contexts hold significantly more evidence (the guard's gain
        test on the paired recall, at `alpha` when several candidates are tested at once)."""
        return not self.stopped and self.stat is not None and gains(self.stat, settings, alpha)


def moves_context(incumbent: RetrievalConfig, candidate: RetrievalConfig) -> bool:
    """Whether the candidate changes a setting that shapes the context (not only answer-stage ones)."""
    known = candidate.space
    return any(
        change.field not in known or known[change.field].stage != "answer"
        for change in diff_configs(incumbent, candidate)
    )


def evidence_questions(dev: list[Question]) -> list[Question]:
    """The answerable dev questions that carry gold evidence: what rung 0 judges."""
    return [q for q in dev if q.evidence and not is_adversarial(q.question_type)]


@dataclass(frozen=True)
class LadderInputs:
    """What every rung of the ladder works from: the run, where its rounds are scored and kept,
    and the dev questions (the rungs pick their own share of them)."""

    spec: RunSpec
    store: RunStore
    scorer: RoundScorer
    dev: list[Question]
    on_record: ProgressFn | None = None  # progress: a retrieval-stage model makes rung 0 slow


class ContextRung:
    """Rung 0 for one run: scores contexts as rounds of the store (resumable like any round)."""

    def __init__(self, inputs: LadderInputs):
        self.spec, self.store, self.scorer = inputs.spec, inputs.store, inputs.scorer
        self.questions = evidence_questions(inputs.dev)
        self.on_record = inputs.on_record

    def _records(self, config: RetrievalConfig, round_no: int, phase: str) -> list[QuestionRecord]:
        row = self.store.round_row(round_no, phase)
        if not (row and row.done):
            on_record = round_progress(self.on_record, round_no, phase, len(self.questions))
            self.scorer.score_round(RoundJob(config, self.questions, round_no, phase, on_record, contexts_only=True))
        return self.store.round_records(round_no, phase)

    def judge(
        self, round_no: int, attempt: int, candidate: RetrievalConfig, incumbent: RetrievalConfig, incumbent_round: int
    ) -> RungZero:
        if not self.spec.evidence_rung:
            return RungZero(False, "rung 0 off (--no-evidence-rung)", {"skipped": "off"})
        if not self.questions:
            why = "the benchmark carries no gold evidence"
            return RungZero(False, f"rung 0 skipped: {why}", {"skipped": why})
        if not moves_context(incumbent, candidate):
            why = "the change acts only on a built context (answer-stage settings)"
            return RungZero(False, f"rung 0 skipped: {why}", {"skipped": why})
        base = self._records(incumbent, round_no, contexts_phase(0))
        mine = self._records(candidate, round_no, contexts_phase(attempt))
        comparison = compare(mine, base, round_no, incumbent_round, CONTEXTS_ONLY, seed=self.spec.seed)
        stat = comparison.groups["main"]

        def tokens(records: list[QuestionRecord]) -> float | None:
            values = [r.context_tokens for r in records if r.context_tokens is not None]
            return sum(values) / len(values) if values else None

        evidence = {
            "recall": stat.candidate,
            "incumbent_recall": stat.incumbent,
            "diff": stat.diff,
            "ci_low": stat.ci_low,
            "ci_high": stat.ci_high,
            "p_gain": stat.p_gain,
            "p_loss": stat.p_loss,
            "n": stat.n,
            "tokens": tokens(mine),
            "incumbent_tokens": tokens(base),
        }
        size = (
            f", context {evidence['tokens']:.0f} vs {evidence['incumbent_tokens']:.0f} tokens"
            if evidence["tokens"] is not None and evidence["incumbent_tokens"] is not None
            else ""
        )

        def detail(side: str, p: float) -> str:
            return (
                f"evidence recall {stat.diff:+.4f} [{stat.ci_low:+.4f}, {stat.ci_high:+.4f}] p({side}) {p:.3f} "
                f"n={stat.n} vs round {incumbent_round}{size}"
            )

        if loses(stat, self.spec.guard):
            return RungZero(
                True,
                f"stopped at rung 0: its contexts hold less evidence ({detail('worse', stat.p_loss)})",
                evidence,
                stat,
            )
        if gains(stat, self.spec.guard):
            return RungZero(
                False,
                f"rung 0 gained: its contexts hold more evidence ({detail('better', stat.p_gain)})",
                evidence,
                stat,
            )
        return RungZero(False, f"rung 0 held ({detail('worse', stat.p_loss)})", evidence, stat)
