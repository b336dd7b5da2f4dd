"""`QuestionRecord`: what one answered question leaves behind, and the failure taxonomy.

The run store's `question_records` table is generated from this dataclass (column name, DuckDB
type and description per field), so adding a field here adds the column everywhere: the
schema, the docs' run-store reference, and older run stores on open (NULL for their rows)."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Mapping

from evolvemem.contracts.vocab import FailureClass


def column(sql_type: str, description: str, default: Any = MISSING) -> Any:
    """A record field that is also a `question_records` column."""
    metadata = {"sql_type": sql_type, "description": description}
    if default is MISSING:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)


CUT_IDS_STORED = 50  # cut candidates a stored record keeps (QuestionRecord.as_row)


@dataclass(frozen=True)
class QuestionRecord:
    """One question answered under one effective config (fields left None are stored as NULL:
    a failed question has no scores, context or evidence figures)."""

    round: int = column("INTEGER", "round number")
    phase: str = column("VARCHAR", "dev, test_start, test_best, eval or transfer")
    question_id: str = column("VARCHAR", "benchmark question id")
    conversation_id: str = column("VARCHAR", "conversation it is about")
    category: str = column("VARCHAR", "the benchmark's own category label")
    question_type: str = column("VARCHAR", "domain-agnostic type used for overrides")
    question: str = column("VARCHAR", "question text")
    gold: str = column("VARCHAR", "gold answer (adversarial: the trap answer under the paper protocol)")
    prediction: str = column("VARCHAR", "the answer given")
    f1: float | None = column("DOUBLE", "token F1 under the run's protocol (official LoCoMo by default)", None)
    bleu1: float | None = column("DOUBLE", "BLEU-1", None)
    exact_match: float | None = column("DOUBLE", "normalised exact match", None)
    mc_accuracy: float | None = column("DOUBLE", "multiple-choice accuracy (multiple-choice benchmarks only)", None)
    judge: float | None = column("DOUBLE", "LLM-judge verdict 1/0 when a judge model is configured", None)
    evidence_ids: tuple[str, ...] | None = column("VARCHAR[]", "gold evidence turn ids", None)
    evidence_recall: float | None = column(
        "DOUBLE", "share of gold evidence turns that reached the answer context", None
    )
    evidence_covered: float | None = column(
        "DOUBLE", "share of gold evidence turns covered by any memory (extraction)", None
    )
    evidence_retrieved: float | None = column(
        "DOUBLE", "share of gold evidence turns among all ranked candidates, before the budget cut", None
    )
    abstained: bool | None = column("BOOLEAN", "the prediction is an abstention", None)
    failed: bool = column("BOOLEAN", "every LLM call for this question failed; not scored", False)
    error: str | None = column("VARCHAR", "why it failed", None)
    context_ids: tuple[str, ...] | None = column(
        "VARCHAR[]", "memory ids in the answer context, in context order", None
    )
    context_views: tuple[str, ...] | None = column(
        "VARCHAR[]", "for each context memory, the views that found it with ranks, e.g. 'keyword:1|semantic:3'", None
    )
    cut_ids: tuple[str, ...] | None = column(
        "VARCHAR[]",
        f"the first {CUT_IDS_STORED} candidates ranked but cut by the context budget (max_context, context_token_budget), in rank order: the nearest misses",
        None,
    )
    sub_queries: tuple[str, ...] | None = column("VARCHAR[]", "sub-queries when decomposition ran", None)
    config_fingerprint: str | None = column("VARCHAR", "fingerprint of the effective config for this question", None)
    memory_version: int | None = column(
        "INTEGER", "memories in the conversation when answered (changes on re-extraction)", None
    )
    latency_ms: float | None = column("DOUBLE", "wall time of retrieval + answering", None)
    calls: int | None = column("INTEGER", "LLM calls made (cache hits excluded)", None)
    cache_hits: int | None = column("INTEGER", "LLM calls answered from the cache", None)
    prompt_tokens: int | None = column("INTEGER", "prompt tokens of new calls", None)
    completion_tokens: int | None = column("INTEGER", "completion tokens of new calls", None)
    granularity: str | None = column(
        "VARCHAR", "memory store the first answer read: fact, recurrence, raw or episode (`memory_granularity`)", None
    )
    route: str | None = column(
        "VARCHAR", "how that store was chosen: config, rules, llm or rules-fallback (routed granularity)", None
    )
    judge_verdicts: tuple[str, ...] | None = column(
        "VARCHAR[]", "answer-judge verdicts in order (pass, retry, refresh); empty when `judge_retries` is 0", None
    )
    retries: int | None = column(
        "INTEGER", "answers given again after a judge verdict (at most `judge_retries`); the last answer is kept", None
    )
    retry_sources: tuple[str, ...] | None = column(
        "VARCHAR[]",
        "what each retry read: a store, related (raw turns around the first context) or the same context refreshed (e.g. fact+refresh)",
        None,
    )
    refreshed_ids: tuple[str, ...] | None = column(
        "VARCHAR[]", "older memories shown as superseded by a newer conflicting one (refresher)", None
    )
    prompt_trimmed: tuple[str, ...] | None = column(
        "VARCHAR[]", "what the answer-side prompts left out to fit the model's context window (empty: nothing)", None
    )
    reused: str | None = column(
        "VARCHAR",
        "where the answer came from without a call: context (an earlier answer to the same question, context and answer settings), config (the whole record of an earlier identical effective config and memories); NULL: answered here",
        None,
    )
    context_key: str | None = column(
        "VARCHAR",
        "hash of the question, the final answer context (ids and text) and the answer-stage settings: the key of context-level reuse",
        None,
    )

    context_tokens: int | None = column(
        "INTEGER", "estimated tokens of the answer context's memories (what a token budget counts)", None
    )
    context_mode: str | None = column(
        "VARCHAR", "what the reader was handed: retrieved (NULL in older stores), oracle or oracle+distractors", None
    )
    evidence_in_context: str | None = column(
        "VARCHAR",
        "reader split, when a model answered: full, partial or none of the gold evidence in context (NULL: no evidence ids)",
        None,
    )
    answer_right: bool | None = column(
        "BOOLEAN",
        "reader split: the judge's verdict where there is one, else F1 >= 0.5 (NULL: not answered by a model)",
        None,
    )
    reader_failure: str | None = column(
        "VARCHAR",
        "reader split: why an answer with the full evidence in context is wrong: abstained, date_form, wrong_date, too_long, incomplete, entity, other",
        None,
    )

    def as_row(self) -> dict[str, Any]:
        """The `question_records` row (lists where the table holds lists). Every field is flat (a
        scalar or a tuple of strings), so a shallow read does what `dataclasses.asdict` would,
        without its deep copy. Of the cut ids, the first CUT_IDS_STORED are kept: a ranking as deep
        as a 3,000-token budget cuts hundreds, which a `--budgets` round wrote and read back three
        times a question (the store's largest cost), while what a reader of failures looks for is
        the near misses."""
        row = {name: (list(v) if isinstance(v := getattr(self, name), tuple) else v) for name in _FIELD_NAMES}
        if row["cut_ids"] is not None:
            row["cut_ids"] = row["cut_ids"][:CUT_IDS_STORED]
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> QuestionRecord:
        """A `question_records` row read back (its lists as tuples; a column an older store lacks is
        the field's default)."""
        values: dict[str, Any] = {
            name: (tuple(v) if isinstance(v := row[name], list) else v) for name in _FIELD_NAMES if name in row
        }
        return cls(**values)

    @property
    def answered(self) -> bool:
        """Scored with an answer (not failed, not a contexts-only record): what reuse can copy."""
        return not self.failed and (self.f1 is not None or self.mc_accuracy is not None)


_FIELD_NAMES = tuple(f.name for f in fields(QuestionRecord))


def record_columns() -> list[tuple[str, str, str]]:
    """(column, DuckDB type, description) of `question_records`, in field order."""
    return [(f.name, f.metadata["sql_type"], f.metadata["description"]) for f in fields(QuestionRecord)]


# An answer counts as right from this token F1 on (the `question_failures` view's "correct").
RIGHT_F1 = 0.5

# Why a wrong answer went wrong (the `question_failures` view computes one per record from the
# gold evidence); diagnosers, reports and the guard read these names.
FAILURE_CLASSES = (
    FailureClass.EXTRACTION_GAP,
    FailureClass.RETRIEVAL_MISS,
    FailureClass.BUDGET_CUT,
    FailureClass.ANSWER_ERROR,
    FailureClass.WRONG_ABSTENTION,
    FailureClass.FORMAT_MISMATCH,
    FailureClass.HALLUCINATION,
    FailureClass.UNKNOWN,
)
