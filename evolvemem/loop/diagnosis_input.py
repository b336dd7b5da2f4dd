"""What a diagnoser reads, from the run store's typed readers (dev records only).

Scores per category and question type with zero-score counts and deltas against the previous
round, the failure taxonomy (view `question_failures`, which uses the gold evidence), the worst
cases stratified by question type, the current config, the action space, and the history of
earlier proposals with their true outcomes."""

from __future__ import annotations

from typing import Any

import json

from evolvemem.contracts.diagnosis import DiagnosisInput
from evolvemem.space.config import RetrievalConfig
from evolvemem.store.run_store import RunStore

WORST_PER_TYPE = 3


def outcome_groups(paired: dict[str, Any] | str | None) -> dict[str, dict[str, float]] | None:
    """{group: {diff, p_gain, p_loss}} of a stored paired comparison (None when there is none)."""
    stored: dict[str, Any] = json.loads(paired) if isinstance(paired, str) else (paired or {})
    if not stored.get("groups"):
        return None
    return {
        name: {k: round(float(stat[k]), 4) for k in ("diff", "p_gain", "p_loss")}
        for name, stat in stored["groups"].items()
        if stat.get("n")
    }


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
    by_type = [dict(row) for row in seen.by_type]
    if previous_round is not None:
        prev = store.type_f1(previous_round, phase)
        for row in by_type:
            if row["question_type"] in prev and prev[row["question_type"]] is not None:
                row["delta"] = round(row["f1"] - prev[row["question_type"]], 4)
    # the true outcome of each earlier change: the score of the round it produced minus the
    # score of the config it was applied to
    decided = store.decision_history(current_round)
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
            {
                "round": d.round,
                "decision": d.decision,
                "reason": d.reason,
                "score": d.score,
                "delta": d.delta,
                "changes": d.changes,
                "outcome_delta": (
                    round(produced - d.base_score, 4) if produced is not None and d.base_score is not None else None
                ),
                # did the config this change produced beat the incumbent on paired evidence?
                "outcome_accepted": accepted.get(d.round + 1),
                # per group: what the produced round gained or lost against the incumbent (paired)
                "outcome_groups": outcome_groups(paired.get(d.round + 1)),
            }
        )
    overall = seen.overall
    return DiagnosisInput(
        round=round_no,
        objective=objective,
        score=score,
        overall={k: (round(v, 4) if isinstance(v, float) else v) for k, v in overall.items()},
        by_type=by_type,
        by_category=[dict(row) for row in seen.by_category],
        taxonomy=dict(seen.taxonomy),
        taxonomy_by_type=seen.taxonomy_by_type,
        worst_cases=[dict(row) for row in seen.worst_cases],
        config=config.values(),
        overrides=config.overrides(),
        history=history,
        mean_context=float(overall.get("mean_context") or 0.0),
        view_credit=dict(seen.view_credit),
    )
