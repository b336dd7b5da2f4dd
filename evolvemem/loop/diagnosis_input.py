"""What a diagnoser reads, from the run store's typed readers (dev records only).

Scores per category and question type with zero-score counts and deltas against the previous
round, the failure taxonomy (view `question_failures`, which uses the gold evidence), the worst
cases stratified by question type, the current config, the action space, and the history of
earlier proposals with their true outcomes."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Iterable

import json

from evolvemem.contracts.diagnosis import (
    CategoryRow,
    DiagnosisInput,
    GroupOutcome,
    HistoryEntry,
    ScoreSummary,
    TypeRow,
    WorstCase,
)
from evolvemem.space.config import RetrievalConfig
from evolvemem.space.changes import Change
from evolvemem.store.rows import HistoryRow, JSONObject
from evolvemem.store.run_store import RunStore

WORST_PER_TYPE = 3


def outcome_groups(paired: dict[str, Any] | str | None) -> dict[str, GroupOutcome] | None:
    """{group: its diff, p_gain, p_loss} of a stored paired comparison (None when there is none)."""
    stored: dict[str, Any] = json.loads(paired) if isinstance(paired, str) else (paired or {})
    if not stored.get("groups"):
        return None
    return {
        name: GroupOutcome(*(round(float(stat[k]), 4) for k in ("diff", "p_gain", "p_loss")))
        for name, stat in stored["groups"].items()
        if stat.get("n")
    }


def _strings(values: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


def type_rows(rows: Iterable[JSONObject], previous: dict[str, float | None] | None) -> list[TypeRow]:
    """Scores per question type, each with its F1's move since the previous round when both have one."""
    out = []
    for row in rows:
        before = (previous or {}).get(row["question_type"])
        delta = round(row["f1"] - before, 4) if before is not None else None
        out.append(TypeRow(**row, delta=delta))
    return out


_ID_LISTS = ("evidence_ids", "context_ids", "context_views")  # lists in the row, tuples in the case


def worst_case(row: JSONObject) -> WorstCase:
    """A worst-case row of the store (its columns are the case's fields)."""
    values: dict[str, Any] = {f.name: row[f.name] for f in fields(WorstCase)}
    values.update({name: _strings(row[name]) for name in _ID_LISTS})
    return WorstCase(**values)


def score_summary(overall: JSONObject) -> ScoreSummary:
    """The evaluation's headline scores, floats to 4 decimals as the prompt shows them."""

    def shown(name: str) -> float | None:
        value = overall[name]
        return round(value, 4) if isinstance(value, float) else value

    return ScoreSummary(
        n=overall["n"],
        f1=shown("f1"),
        evidence_recall=shown("evidence_recall"),
        zero_f1=overall["zero_f1"],
        mean_context=shown("mean_context"),
    )


def history_entries(
    decided: list[HistoryRow],
    current_round: int,
    current_score: float,
    current_accepted: bool | None,
    current_paired: dict[str, Any] | None,
) -> list[HistoryEntry]:
    """Every decision before `current_round`, each with the true outcome of its change: the score
    of the round it produced minus the score of the config it was applied to, and whether (and per
    group, how) that round beat the incumbent on paired evidence."""
    paired = {d.round: d.paired for d in decided}
    paired[current_round] = current_paired
    earlier = [d for d in decided if d.round < current_round]
    scores = {d.round: d.score for d in earlier}
    scores[current_round] = current_score
    accepted = {d.round: d.accepted for d in earlier}
    accepted[current_round] = current_accepted
    history = []
    for d in earlier:
        produced = scores.get(d.round + 1)
        history.append(
            HistoryEntry(
                round=d.round,
                decision=d.decision,
                reason=d.reason,
                score=d.score,
                delta=d.delta,
                changes=tuple(
                    Change(c["field"], c.get("old"), c["new"], c.get("scope", "global")) for c in d.changes or []
                ),
                outcome_delta=(
                    round(produced - d.base_score, 4) if produced is not None and d.base_score is not None else None
                ),
                outcome_accepted=accepted.get(d.round + 1),
                outcome_groups=outcome_groups(paired.get(d.round + 1)),
            )
        )
    return history


def build_diagnosis_input(
    store: RunStore,
    round_no: int,
    phase: str,
    config: RetrievalConfig,
    objective: str,
    score: float,
    previous_round: int | None,
    current_round: int | None = None,
    current_score: float | None = None,
    current_accepted: bool | None = None,
    current_paired: dict[str, Any] | None = None,
) -> DiagnosisInput:
    """`round_no` is the round diagnosed (the base of the next config: the incumbent after a
    revert); the history covers every decision before `current_round` (the latest round), so a
    change tried after the incumbent is remembered with its outcome."""
    current_round = round_no if current_round is None else current_round
    current_score = score if current_score is None else current_score
    seen = store.round_breakdown(round_no, phase, WORST_PER_TYPE)
    previous = store.type_f1(previous_round, phase) if previous_round is not None else None
    decided = store.decision_history(current_round)
    overall = seen.overall
    split = store.reader_splits().get((round_no, phase))
    return DiagnosisInput(
        round=round_no,
        objective=objective,
        score=score,
        overall=score_summary(overall),
        by_type=type_rows(seen.by_type, previous),
        by_category=[CategoryRow(**row) for row in seen.by_category],
        taxonomy=dict(seen.taxonomy),
        taxonomy_by_type=seen.taxonomy_by_type,
        worst_cases=[worst_case(row) for row in seen.worst_cases],
        config=config.values(),
        overrides=config.overrides(),
        history=history_entries(decided, current_round, current_score, current_accepted, current_paired),
        mean_context=float(overall.get("mean_context") or 0.0),
        view_credit=dict(seen.view_credit),
        reader_evidence={b: {"right": r, "wrong": w} for b, r, w in split.cells if r or w} if split else {},
        reader_failures=dict(split.full_wrong) if split else {},
    )
