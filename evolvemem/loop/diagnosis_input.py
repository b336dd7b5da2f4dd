"""What a diagnoser reads, built by SQL over the run store (dev records only).

Scores per category and question type with zero-score counts and deltas against the previous
round, the failure taxonomy (view `question_failures`, which uses the gold evidence), the worst
cases stratified by question type, the current config, the action space, and the history of
earlier proposals with their true outcomes."""
from __future__ import annotations

import json

from evolvemem.contracts.diagnosis import DiagnosisInput
from evolvemem.space.config import RetrievalConfig
from evolvemem.store.run_store import RunStore

WORST_PER_TYPE = 3


def outcome_groups(paired: dict | str | None) -> dict[str, dict[str, float]] | None:
    """{group: {diff, p_gain, p_loss}} of a stored paired comparison (None when there is none)."""
    stored: dict = json.loads(paired) if isinstance(paired, str) else (paired or {})
    if not stored.get("groups"):
        return None
    return {name: {k: round(float(stat[k]), 4) for k in ("diff", "p_gain", "p_loss")}
            for name, stat in stored["groups"].items() if stat.get("n")}


def build_diagnosis_input(store: RunStore, round_no: int, phase: str, config: RetrievalConfig, objective: str, score: float,
                          previous_round: int | None, current_round: int | None = None,
                          current_score: float | None = None, current_accepted: bool | None = None,
                          current_paired: dict | None = None) -> DiagnosisInput:
    """`round_no` is the round diagnosed (the base of the next config: the incumbent after a
    revert); the history covers every decision before `current_round` (the latest round), so a
    change tried after the incumbent is remembered with its outcome."""
    current_round = round_no if current_round is None else current_round
    current_score = score if current_score is None else current_score
    q = store.query
    params = [round_no, phase]
    overall = q("""SELECT count(*) AS n, avg(f1) AS f1, avg(evidence_recall) AS evidence_recall,
                          sum(CASE WHEN f1 = 0 THEN 1 ELSE 0 END) AS zero_f1, avg(len(context_ids)) AS mean_context
                   FROM question_records WHERE round = ? AND phase = ? AND NOT failed""", params)[0]
    by_type = q("""SELECT question_type, count(*) AS n, round(avg(f1), 4) AS f1,
                          round(avg(evidence_recall), 4) AS evidence_recall,
                          sum(CASE WHEN f1 = 0 THEN 1 ELSE 0 END) AS zero_f1,
                          round(avg(CASE WHEN abstained THEN 1.0 ELSE 0.0 END), 4) AS abstain_rate
                   FROM question_records WHERE round = ? AND phase = ? AND NOT failed
                   GROUP BY question_type ORDER BY question_type""", params)
    by_category = q("""SELECT category, count(*) AS n, round(avg(f1), 4) AS f1,
                              sum(CASE WHEN f1 = 0 THEN 1 ELSE 0 END) AS zero_f1
                       FROM question_records WHERE round = ? AND phase = ? AND NOT failed
                       GROUP BY category ORDER BY category""", params)
    if previous_round is not None:
        prev = {r["question_type"]: r["f1"] for r in q(
            """SELECT question_type, avg(f1) AS f1 FROM question_records
               WHERE round = ? AND phase = ? AND NOT failed GROUP BY question_type""", [previous_round, phase])}
        for row in by_type:
            if row["question_type"] in prev and prev[row["question_type"]] is not None:
                row["delta"] = round(row["f1"] - prev[row["question_type"]], 4)
    taxonomy = {r["failure"]: r["n"] for r in q(
        """SELECT failure, count(*) AS n FROM question_failures
           WHERE round = ? AND phase = ? GROUP BY failure""", params)}
    taxonomy_by_type: dict[str, dict[str, int]] = {}
    for r in q("""SELECT question_type, failure, count(*) AS n FROM question_failures
                  WHERE round = ? AND phase = ? AND failure NOT IN ('correct', 'call_failed')
                  GROUP BY question_type, failure""", params):
        taxonomy_by_type.setdefault(r["question_type"], {})[r["failure"]] = r["n"]
    worst = q(f"""SELECT question_type, category, question, gold, prediction, round(f1, 3) AS f1, failure,
                         evidence_ids, context_ids[1:5] AS context_ids, context_views[1:5] AS context_views
                  FROM (SELECT *, row_number() OVER (PARTITION BY question_type ORDER BY f1, question_id) AS rk
                        FROM question_failures WHERE round = ? AND phase = ? AND failure NOT IN ('correct', 'call_failed'))
                  WHERE rk <= {WORST_PER_TYPE} ORDER BY question_type, rk""", params)
    # the true outcome of each earlier change: the score of the round it produced minus the
    # score of the config it was applied to
    history = q("""SELECT round, decision, reason, round(score, 4) AS score, round(delta, 4) AS delta,
                          changes, base_score, accepted FROM decisions WHERE round < ? ORDER BY round""", [current_round])
    paired = {r["round"]: r["paired"] for r in q("SELECT round, paired FROM decisions WHERE round <= ?", [current_round])}
    paired[current_round] = current_paired
    scores = {h["round"]: h["score"] for h in history}
    scores[current_round] = current_score
    accepted = {h["round"]: h.pop("accepted") for h in history}
    accepted[current_round] = current_accepted
    for item in history:
        produced = scores.get(item["round"] + 1)
        base = item.pop("base_score")
        item["outcome_delta"] = round(produced - base, 4) if produced is not None and base is not None else None
        # did the config this change produced beat the incumbent on paired evidence?
        item["outcome_accepted"] = accepted.get(item["round"] + 1)
        # per group: what the produced round gained or lost against the incumbent (paired)
        item["outcome_groups"] = outcome_groups(paired.get(item["round"] + 1))
    return DiagnosisInput(
        round=round_no, objective=objective, score=score,
        overall={k: (round(v, 4) if isinstance(v, float) else v) for k, v in overall.items()},
        by_type=by_type, by_category=by_category, taxonomy=taxonomy, taxonomy_by_type=taxonomy_by_type,
        worst_cases=worst, config=config.values(), overrides=config.overrides(), history=history,
        mean_context=float(overall.get("mean_context") or 0.0),
        view_credit={r["view"]: r["n"] for r in q(
            """SELECT split_part(label, ':', 1) AS view, count(DISTINCT question_id) AS n
               FROM (SELECT question_id, unnest(string_split(memory_views, '|')) AS label
                     FROM (SELECT question_id, unnest(context_views) AS memory_views FROM question_records
                           WHERE round = ? AND phase = ? AND NOT failed AND f1 >= 0.5
                             AND question_type <> 'adversarial'))
               GROUP BY view""", params)},
    )
