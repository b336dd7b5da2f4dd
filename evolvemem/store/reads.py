"""The run store's typed readers: every query the report, the inspection commands and the diagnosis
input need, returning the frozen rows of store/rows.py. `RunStore` (run_store.py) inherits them."""

from __future__ import annotations

from typing import Any, Sequence

from evolvemem.contracts.records import RIGHT_F1
from evolvemem.contracts.vocab import TEST_PHASES, ContextMode, EvidenceInContext, FailureClass
from evolvemem.qtypes import ADVERSARIAL_SQL
from evolvemem.contracts.usage import Usage
from evolvemem.scoring.judge_summary import JudgeTally
from evolvemem.store.rows import (
    DecisionRow,
    DiagnosisSummary,
    FlippedQuestion,
    NO_EVIDENCE,
    ReaderSplitCounts,
    RoleUsage,
    HistoryRow,
    ProposedDimension,
    RoundBreakdown,
    RoundSummary,
    RoundUsage,
)

# records that are not failures of the answer: right ones and failed calls
_NOT_WRONG = (FailureClass.CORRECT, FailureClass.CALL_FAILED)


class RunReads:
    """Readers over a run's tables (mixed into `RunStore`, which provides `query`)."""

    def query(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    # ---- rounds and decisions ----------------------------------------------------------------
    def round_summaries(self, phases: Sequence[str], done_only: bool = False) -> list[RoundSummary]:
        """The evaluations of the given phases, by round."""
        marks = ", ".join("?" for _ in phases)
        status = " AND status = 'done'" if done_only else ""
        return [
            RoundSummary.from_row(r)
            for r in self.query(
                f"SELECT * FROM rounds WHERE phase IN ({marks}){status} ORDER BY round, phase", list(phases)
            )
        ]

    def phases_present(self) -> set[str]:
        return {r["phase"] for r in self.query("SELECT DISTINCT phase FROM rounds")}

    def test_scores(self) -> dict[str, RoundSummary]:
        """The finished test evaluations (test_start, test_best) by phase: empty before a run's end."""
        return {s.phase: s for s in self.round_summaries(TEST_PHASES, done_only=True)}

    def decisions(self) -> dict[int, DecisionRow]:
        """Every decision by round."""
        return {r["round"]: DecisionRow.from_row(r) for r in self.query("SELECT * FROM decisions ORDER BY round")}

    def decision_history(self, through: int) -> list[HistoryRow]:
        """Decisions up to round `through`, oldest first, with scores rounded as the diagnosis input shows them."""
        rows = self.query(
            """SELECT round, decision, reason, round(score, 4) AS score, round(delta, 4) AS delta,
                                    changes, base_score, accepted, paired
                             FROM decisions WHERE round <= ? ORDER BY round""",
            [through],
        )
        return [HistoryRow(**r) for r in rows]

    def usage_by_round(self) -> dict[int, RoundUsage]:
        """LLM calls, cache hits, tokens and cost of each round, over its phases and roles."""
        rows = self.query("""SELECT round, coalesce(sum(calls), 0) AS calls, coalesce(sum(cache_hits), 0) AS cache_hits,
                                    coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
                                    coalesce(sum(completion_tokens), 0) AS completion_tokens,
                                    coalesce(sum(cost_usd), 0) AS cost_usd
                             FROM usage GROUP BY round""")
        return {
            r["round"]: RoundUsage(
                int(r["round"]),
                int(r["calls"]),
                int(r["cache_hits"]),
                int(r["prompt_tokens"]),
                int(r["completion_tokens"]),
                float(r["cost_usd"]),
            )
            for r in rows
        }

    def proposed_dimensions(self) -> list[ProposedDimension]:
        return [
            ProposedDimension.from_row(r)
            for r in self.query(
                """SELECT round, name, description, rationale, maps_to, status, reason, file
               FROM proposed_dimensions ORDER BY round"""
            )
        ]

    def ablation_rounds(self) -> list[RoundSummary]:
        """Finished `evolve ablate` evaluations (phase "ablate" and "ablate:<variant>"), in the order run."""
        return [
            RoundSummary.from_row(r)
            for r in self.query(
                """SELECT * FROM rounds WHERE (phase = 'ablate' OR phase LIKE 'ablate:%') AND status = 'done'
               ORDER BY round, started_at"""
            )
        ]

    def diagnosis_summaries(self) -> dict[int, DiagnosisSummary]:
        """Each round's diagnoser, proposal and parse error, by round."""
        return {
            r["round"]: DiagnosisSummary.from_row(r)
            for r in self.query("SELECT round, diagnoser, proposal, parse_error FROM diagnoses ORDER BY round")
        }

    def usage_by_role(self) -> list[RoleUsage]:
        """Usage per (round, phase, role), in that order."""
        rows = self.query("""SELECT round, phase, role, sum(calls) AS calls, sum(cache_hits) AS cache_hits,
                                    sum(failures) AS failures, sum(prompt_tokens) AS prompt_tokens,
                                    sum(completion_tokens) AS completion_tokens, sum(cost_usd) AS cost_usd
                             FROM usage GROUP BY round, phase, role ORDER BY round, phase, role""")
        return [RoleUsage(r["round"], r["phase"], r["role"], Usage.from_dict(r)) for r in rows]

    def reader_splits(self) -> dict[tuple[int, str], ReaderSplitCounts]:
        """(round, phase) -> the reader failure split of that evaluation, for every evaluation a
        model answered (none in a store from before the split)."""
        rows = self.query(
            """SELECT round, phase, coalesce(evidence_in_context, ?) AS evidence, answer_right, reader_failure,
                      coalesce(context_mode, ?) AS context, count(*) AS n
               FROM question_records WHERE answer_right IS NOT NULL
               GROUP BY ALL ORDER BY round, phase""",
            [NO_EVIDENCE, str(ContextMode.RETRIEVED)],
        )
        grouped: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for row in rows:
            grouped.setdefault((row["round"], row["phase"]), []).append(row)
        return {key: _split_counts(group) for key, group in grouped.items()}

    def failure_counts(self, phase: str) -> dict[int, dict[str, int]]:
        """round -> failure class (and `correct`) -> questions, over one phase's evaluations."""
        out: dict[int, dict[str, int]] = {}
        for row in self.query(
            """SELECT round, failure, count(*) AS n FROM question_failures
                                 WHERE phase = ? GROUP BY round, failure""",
            [phase],
        ):
            out.setdefault(row["round"], {})[row["failure"]] = row["n"]
        return out

    def flipped_questions(self, a: tuple[str, int], b: tuple[str, int]) -> list[FlippedQuestion]:
        """Questions right under (phase, round) `a` and wrong under `b`, or the reverse ("right" as the
        `question_failures` view says: F1 >= RIGHT_F1), fixed ones first, largest F1 change first."""
        rows = self.query(
            """
            SELECT fa.question_id, fa.question_type, fa.question, fa.gold,
                   fa.prediction AS prediction_a, fb.prediction AS prediction_b, fa.f1 AS f1_a, fb.f1 AS f1_b,
                   fa.failure AS failure_a, fb.failure AS failure_b,
                   CASE WHEN fb.failure = ? THEN 'fixed' ELSE 'broken' END AS flip
            FROM question_failures fa JOIN question_failures fb ON fa.question_id = fb.question_id
            WHERE fa.phase = ? AND fa.round = ? AND fb.phase = ? AND fb.round = ?
              AND (fa.failure = ?) <> (fb.failure = ?)
            ORDER BY flip DESC, abs(coalesce(fb.f1, 0) - coalesce(fa.f1, 0)) DESC, fa.question_type, fa.question_id""",
            [FailureClass.CORRECT, a[0], a[1], b[0], b[1], FailureClass.CORRECT, FailureClass.CORRECT],
        )
        return [FlippedQuestion(**row) for row in rows]

    def failed_evidence(self, round_no: int, phase: str, failure: str) -> list[tuple[str, tuple[str, ...]]]:
        """(conversation id, gold evidence ids) of each question of one evaluation that failed as `failure`."""
        rows = self.query(
            """SELECT conversation_id, evidence_ids FROM question_failures
                             WHERE round = ? AND phase = ? AND failure = ?""",
            [round_no, phase, failure],
        )
        return [(r["conversation_id"], tuple(r["evidence_ids"] or ())) for r in rows]

    def judge_tallies(self, phases: Sequence[str]) -> dict[tuple[int, str], JudgeTally]:
        """The LLM judge's verdicts per evaluation (round, phase) of the given phases, over scored
        answers (an evaluation without a judge has none judged)."""
        marks = ", ".join("?" for _ in phases)
        rows = self.query(
            f"""SELECT round, phase, count(*) AS answered, count(judge) AS judged,
                       count(*) FILTER (WHERE judge = 1) AS correct,
                       count(judge) FILTER (WHERE NOT ({ADVERSARIAL_SQL})) AS main_judged,
                       count(*) FILTER (WHERE judge = 1 AND NOT ({ADVERSARIAL_SQL})) AS main_correct,
                       avg(f1) FILTER (WHERE judge IS NOT NULL AND NOT ({ADVERSARIAL_SQL})) AS main_f1
                FROM question_records
                WHERE phase IN ({marks}) AND NOT failed AND f1 IS NOT NULL
                GROUP BY round, phase ORDER BY round, phase""",
            list(phases),
        )
        return {
            (r["round"], r["phase"]): JudgeTally(
                r["answered"], r["judged"], r["correct"], r["main_judged"], r["main_correct"], r["main_f1"]
            )
            for r in rows
        }

    # ---- one evaluation's records, as the diagnosis input reads them -------------------------
    def type_f1(self, round_no: int, phase: str) -> dict[str, float | None]:
        """Mean F1 per question type of one evaluation (failed questions left out)."""
        return {
            r["question_type"]: r["f1"]
            for r in self.query(
                """SELECT question_type, avg(f1) AS f1 FROM question_records
               WHERE round = ? AND phase = ? AND NOT failed GROUP BY question_type""",
                [round_no, phase],
            )
        }

    def round_breakdown(self, round_no: int, phase: str, worst_per_type: int) -> RoundBreakdown:
        """Scores per type and category, the failure taxonomy, the worst cases per type and the
        views that reached right answers, of one evaluation (failed questions left out of scores)."""
        q, params = self.query, [round_no, phase]
        overall = q(
            """SELECT count(*) AS n, avg(f1) AS f1, avg(evidence_recall) AS evidence_recall,
                              sum(CASE WHEN f1 = 0 THEN 1 ELSE 0 END) AS zero_f1, avg(len(context_ids)) AS mean_context
                       FROM question_records WHERE round = ? AND phase = ? AND NOT failed""",
            params,
        )[0]
        by_type = q(
            """SELECT question_type, count(*) AS n, round(avg(f1), 4) AS f1,
                              round(avg(evidence_recall), 4) AS evidence_recall,
                              sum(CASE WHEN f1 = 0 THEN 1 ELSE 0 END) AS zero_f1,
                              round(avg(CASE WHEN abstained THEN 1.0 ELSE 0.0 END), 4) AS abstain_rate
                       FROM question_records WHERE round = ? AND phase = ? AND NOT failed
                       GROUP BY question_type ORDER BY question_type""",
            params,
        )
        by_category = q(
            """SELECT category, count(*) AS n, round(avg(f1), 4) AS f1,
                                  sum(CASE WHEN f1 = 0 THEN 1 ELSE 0 END) AS zero_f1
                           FROM question_records WHERE round = ? AND phase = ? AND NOT failed
                           GROUP BY category ORDER BY category""",
            params,
        )
        taxonomy = {
            r["failure"]: r["n"]
            for r in q(
                """SELECT failure, count(*) AS n FROM question_failures
               WHERE round = ? AND phase = ? GROUP BY failure""",
                params,
            )
        }
        taxonomy_by_type: dict[str, dict[str, int]] = {}
        for r in q(
            """SELECT question_type, failure, count(*) AS n FROM question_failures
                      WHERE round = ? AND phase = ? AND failure NOT IN (?, ?)
                      GROUP BY question_type, failure""",
            [*params, *_NOT_WRONG],
        ):
            taxonomy_by_type.setdefault(r["question_type"], {})[r["failure"]] = r["n"]
        worst = q(
            f"""SELECT question_type, category, question, gold, prediction, round(f1, 3) AS f1, failure,
                             evidence_ids, context_ids[1:5] AS context_ids, context_views[1:5] AS context_views
                      FROM (SELECT *, row_number() OVER (PARTITION BY question_type ORDER BY f1, question_id) AS rk
                            FROM question_failures WHERE round = ? AND phase = ? AND failure NOT IN (?, ?))
                      WHERE rk <= {int(worst_per_type)} ORDER BY question_type, rk""",
            [*params, *_NOT_WRONG],
        )
        view_credit = {
            r["view"]: r["n"]
            for r in q(
                f"""SELECT split_part(label, ':', 1) AS view, count(DISTINCT question_id) AS n
                FROM (SELECT question_id, unnest(string_split(memory_views, '|')) AS label
                      FROM (SELECT question_id, unnest(context_views) AS memory_views FROM question_records
                            WHERE round = ? AND phase = ? AND NOT failed AND f1 >= {RIGHT_F1}
                              AND NOT ({ADVERSARIAL_SQL})))
                GROUP BY view""",
                params,
            )
        }
        return RoundBreakdown(
            overall=overall,
            by_type=tuple(by_type),
            by_category=tuple(by_category),
            taxonomy=taxonomy,
            taxonomy_by_type=taxonomy_by_type,
            worst_cases=tuple(worst),
            view_credit=view_credit,
        )


def _split_counts(rows: list[dict[str, Any]]) -> ReaderSplitCounts:
    """One evaluation's split rows (evidence, answer_right, reader_failure, context, n) counted."""
    counts: dict[tuple[str, bool], int] = {}
    classes: dict[str, int] = {}
    contexts: dict[str, int] = {}
    for r in rows:
        key = (r["evidence"], bool(r["answer_right"]))
        counts[key] = counts.get(key, 0) + r["n"]
        contexts[r["context"]] = contexts.get(r["context"], 0) + r["n"]
        if r["reader_failure"]:
            classes[r["reader_failure"]] = classes.get(r["reader_failure"], 0) + r["n"]
    buckets = (*(str(e) for e in EvidenceInContext), NO_EVIDENCE)
    return ReaderSplitCounts(
        context=max(contexts.items(), key=lambda kv: kv[1])[0],
        cells=tuple((b, counts.get((b, True), 0), counts.get((b, False), 0)) for b in buckets),
        full_wrong=tuple(sorted(classes.items(), key=lambda kv: (-kv[1], kv[0]))),
    )
