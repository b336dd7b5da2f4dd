"""What the run store's typed readers return (store/reads.py): frozen rows of its tables and read models.

A reader hands these to the report, `evolve runs / show / diff` and the diagnosis input, so none of
them writes SQL or guesses at a column's name."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping, TypeVar, cast

from evolvemem.contracts.usage import Usage

T = TypeVar("T", bound="StoredRow")

JSONObject = dict[str, Any]  # a JSON column read back (a config, per-category figures, a paired comparison)
SQLRow = dict[str, Any]  # one row of a query, by column name: whatever the SQL selects (`RunStore.query`)
Manifest = dict[str, Any]  # the `manifest` table: field -> its JSON value (fields differ by kind of run)


class StoredRow:
    """A frozen dataclass read from one query row: its fields by name, NULL (or a column an older run
    lacks) as None."""

    @classmethod
    def from_row(cls: type[T], row: Mapping[str, Any]) -> T:
        return cls(**{f.name: row.get(f.name) for f in fields(cast(Any, cls))})

    def as_row(self) -> JSONObject:
        """The row as a dict (what `headline`, JSON output and the report's views read)."""
        return {f.name: getattr(self, f.name) for f in fields(cast(Any, self))}


@dataclass(frozen=True)
class RoundSummary(StoredRow):
    """One evaluation of a config (a `rounds` row): scores over its questions."""

    round: int
    phase: str
    config: JSONObject | None
    status: str | None
    n_questions: int | None
    n_failed: int | None
    main_f1: float | None
    adversarial_f1: float | None
    all_f1: float | None
    evidence_recall: float | None
    main_evidence_recall: float | None
    context_tokens: float | None
    by_category: JSONObject | None
    wall_seconds: float | None
    config_fingerprint: str | None = None
    stores_built: str | None = None
    retrieval_ms: float | None = None  # dev: retrieval ms a question beyond the query embedding
    bm25_ms: float | None = None  # BM25 alone, timed beside it
    stopped_at: str | None = None  # a sequential dev evaluation stopped for futility: where and why

    def column(self, name: str) -> float | None:
        """A score column by name (an objective's headline: loop/spec.objective_column)."""
        value = getattr(self, name)
        return None if value is None else float(value)

    @property
    def done(self) -> bool:
        return self.status == "done"

    def headline(self) -> dict[str, float | int | None]:
        """The few figures `result.json`, `evolve run --json` and `evolve show --json` quote for one
        evaluation (a public format: `n` is the scored questions)."""
        return {
            "main_f1": self.main_f1,
            "adversarial_f1": self.adversarial_f1,
            "all_f1": self.all_f1,
            "evidence_recall": self.evidence_recall,
            "main_evidence_recall": self.main_evidence_recall,
            "context_tokens": self.context_tokens,
            "n": self.n_questions,
            "n_failed": self.n_failed,
        }


@dataclass(frozen=True)
class DecisionRow(StoredRow):
    """The guard's decision after one round (a `decisions` row; None where an older run lacks the column)."""

    round: int
    decision: str
    reason: str | None = None
    score: float | None = None
    delta: float | None = None
    base_round: int | None = None
    base_score: float | None = None
    best_round: int | None = None
    best_score: float | None = None
    changes: list[JSONObject] | None = None
    next_config: JSONObject | None = None
    reextracted_sessions: list[str] | None = None
    memories_added: int | None = None
    accepted: bool | None = None
    significant_loss: bool | None = None
    compared_with: int | None = None
    verdict: str | None = None
    flags: list[str] | None = None
    fallback: str | None = None
    paired: JSONObject | None = None
    candidates: list[JSONObject] | None = None
    comparisons: int | None = None


@dataclass(frozen=True)
class ScreeningRow(StoredRow):
    """One candidate screened before a round's full evaluation (a `screenings` row): made at rung 0
    with what was screened, completed with the verdict where it stopped (loop/screening.py)."""

    round: int
    attempt: int
    source: str | None
    config_fingerprint: str | None
    config: JSONObject | None
    changes: list[JSONObject] | None
    compared_with: int | None
    phase: str | None = None
    outcome: str | None = None
    rung: int | None = None
    evidence: JSONObject | None = None
    reason: str | None = None
    paired: JSONObject | None = None
    n_questions: int | None = None
    main_f1: float | None = None
    adversarial_f1: float | None = None
    all_f1: float | None = None
    calls: int | None = None
    tokens: int | None = None
    wall_seconds: float | None = None
    alpha: float | None = None


@dataclass(frozen=True)
class RoundUsage:
    """LLM calls and tokens of one round, over its phases and roles."""

    round: int
    calls: int
    cache_hits: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ProposedDimension(StoredRow):
    """A new dimension a diagnoser proposed, and its fate (a `proposed_dimensions` row)."""

    round: int
    name: str
    description: str  # a diagnoser's NewDimension always says what it would control, and why
    rationale: str
    maps_to: JSONObject | None = None  # None: a run from before levers had bundles
    status: str | None = None
    reason: str | None = None
    file: str | None = None
    per_type: bool | None = None  # whether it may be switched on for one question type


@dataclass(frozen=True)
class DiagnosisRow(StoredRow):
    """What a diagnoser read and replied for one round (a `diagnoses` row)."""

    round: int
    diagnoser: str
    proposal: JSONObject
    input: JSONObject  # the DiagnosisInput it read
    prompt: str  # "" for a diagnoser without a model
    raw_response: str  # the model's reply, bounded; "" without a model
    parse_error: str | None = None
    calls: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_trimmed: list[str] | None = None


@dataclass(frozen=True)
class UsageRow:
    """LLM usage of one role in one (round, phase), as a `usage` row adds it."""

    round: int
    phase: str
    role: str
    usage: Usage

    def as_row(self) -> JSONObject:
        return {"round": self.round, "phase": self.phase, "role": self.role, **self.usage.as_dict()}


@dataclass(frozen=True)
class PhaseCalls:
    """Calls and tokens of one (round, phase), over every role (what a screening cost)."""

    calls: int
    tokens: int


@dataclass(frozen=True)
class RoundBreakdown:
    """What the diagnosis input reads of one evaluation's records (loop/diagnosis_input.py)."""

    overall: JSONObject  # n, f1, evidence_recall, zero_f1, mean_context
    by_type: tuple[JSONObject, ...]
    by_category: tuple[JSONObject, ...]
    taxonomy: dict[str, int]  # failure class -> questions
    taxonomy_by_type: dict[str, dict[str, int]]
    worst_cases: tuple[JSONObject, ...]
    view_credit: dict[str, int]  # view -> right answers its memories reached


@dataclass(frozen=True)
class HistoryRow:
    """An earlier decision as the diagnosis input's history reads it."""

    round: int
    decision: str
    reason: str | None
    score: float | None
    delta: float | None
    changes: list[JSONObject] | None
    base_score: float | None
    accepted: bool | None
    paired: JSONObject | None


@dataclass(frozen=True)
class DiagnosisSummary(StoredRow):
    """Who diagnosed a round and what it proposed (a `diagnoses` row without its prompt and reply)."""

    round: int
    diagnoser: str | None
    proposal: JSONObject | None
    parse_error: str | None


@dataclass(frozen=True)
class RoleUsage:
    """LLM usage of one role in one (round, phase)."""

    round: int
    phase: str
    role: str
    usage: Usage


@dataclass(frozen=True)
class FlippedQuestion:
    """A question right under one evaluation and wrong under another, or the reverse."""

    question_id: str
    question_type: str
    question: str
    gold: str
    prediction_a: str
    prediction_b: str
    f1_a: float | None
    f1_b: float | None
    failure_a: str
    failure_b: str
    flip: str  # "fixed" (now right) or "broken" (now wrong)


NO_EVIDENCE = "no evidence"  # the split's row for questions without gold evidence ids


@dataclass(frozen=True)
class ReaderSplitCounts:
    """One evaluation's reader failure split (scoring/failure_split.py), counted: per evidence
    bucket (full, partial, none, no evidence) the right and wrong answers, and the classes of the
    wrong answers with the full evidence in context. Only questions a model answered count."""

    context: str  # what the reader was handed: retrieved, oracle or oracle+distractors
    cells: tuple[tuple[str, int, int], ...]  # (evidence bucket, right, wrong): full, partial, none, no evidence
    full_wrong: tuple[tuple[str, int], ...]  # (reader failure class, questions), largest first

    @property
    def answered(self) -> int:
        return sum(right + wrong for _, right, wrong in self.cells)

    def as_dict(self) -> dict[str, Any]:
        """The `reader_split` block of `show --json`."""
        return {
            "context": self.context,
            "evidence": {bucket: {"right": right, "wrong": wrong} for bucket, right, wrong in self.cells},
            "full_wrong": dict(self.full_wrong),
        }
