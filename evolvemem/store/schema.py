"""Tables of the run store; users query them with SQL.

Each table is (column, DuckDB type, description); `create_statements()` and the docs' run-store
reference (docs/reference/run-store.md, by `python docs/gen_reference.py`) are generated from this
one definition (`question_records` from the `QuestionRecord` contract)."""

from __future__ import annotations

from evolvemem.contracts.records import RIGHT_F1, record_columns
from evolvemem.contracts.vocab import FailureClass
from evolvemem.qtypes import ADVERSARIAL_SQL

SCHEMA_VERSION = 1

TABLES: dict[str, list[tuple[str, str, str]]] = {
    "manifest": [
        ("key", "VARCHAR", "manifest field (benchmark, data_hash, models, diagnoser, seed, version, command, ...)"),
        ("value", "JSON", "its value"),
    ],
    "rounds": [
        ("round", "INTEGER", "round number (0 = starting config); `evolve eval` writes round 0"),
        (
            "phase",
            "VARCHAR",
            "dev, screen1.. (minibatch screenings), contexts1.. (rung 0: contexts only), test_start, test_best, eval or transfer; a --budgets run adds dev@<tokens>, test_start@<tokens>, test_best@<tokens> for its further budgets",
        ),
        ("config_fingerprint", "VARCHAR", "hash of the config that produced this round's score"),
        ("config", "JSON", "that config, in full"),
        ("status", "VARCHAR", "running or done"),
        ("n_questions", "INTEGER", "questions scored (failed ones excluded)"),
        ("n_failed", "INTEGER", "questions whose LLM calls all failed (retried on --resume)"),
        ("main_f1", "DOUBLE", "mean F1 over non-adversarial categories (LoCoMo 1-4)"),
        ("adversarial_f1", "DOUBLE", "mean F1 over adversarial questions"),
        ("all_f1", "DOUBLE", "mean F1 over all questions"),
        ("evidence_recall", "DOUBLE", "mean evidence recall over questions with gold evidence"),
        (
            "main_evidence_recall",
            "DOUBLE",
            "mean evidence recall over the answerable questions (the `evidence` objective)",
        ),
        ("context_tokens", "DOUBLE", "mean estimated tokens of the answer context"),
        ("by_category", "JSON", "per-category n, F1, BLEU-1, evidence recall"),
        ("wall_seconds", "DOUBLE", "wall time of the evaluation"),
        (
            "stores_built",
            "VARCHAR",
            "memory stores first built for this evaluation's config, with their time (inside wall_seconds)",
        ),
        (
            "retrieval_ms",
            "DOUBLE",
            "dev: the config's retrieval ms a question beyond the query embedding (best of 3 passes on a fixed sample of up to 60 dev questions; loop/retrieval_cost.py)",
        ),
        (
            "bm25_ms",
            "DOUBLE",
            "BM25 alone timed beside it in the same passes (retrieval_ms / bm25_ms travels between machines)",
        ),
        (
            "stopped_at",
            "VARCHAR",
            "dev of a screened candidate evaluated in looks (loop/sequential.py): where it stopped for futility and why; NULL when it was not stopped (a done row on part of dev without it goes on with the next look on resume)",
        ),
        ("started_at", "TIMESTAMP", "start time (UTC)"),
        ("finished_at", "TIMESTAMP", "end time (UTC)"),
    ],
    "question_records": record_columns(),
    "usage": [
        ("round", "INTEGER", "round number (-1 = run setup: extraction and indexing)"),
        ("phase", "VARCHAR", "phase"),
        ("role", "VARCHAR", "extract, decompose, answer, verify, judge or diagnose"),
        ("calls", "INTEGER", "LLM calls made"),
        ("cache_hits", "INTEGER", "calls answered from the cache"),
        ("retries", "INTEGER", "extra attempts after a retryable fault"),
        ("failures", "INTEGER", "calls that failed after retries"),
        ("prompt_tokens", "BIGINT", "prompt tokens"),
        ("completion_tokens", "BIGINT", "completion tokens"),
        ("cost_usd", "DOUBLE", "cost where litellm knows the price"),
    ],
    "memories": [
        ("memory_id", "VARCHAR", "memory id"),
        ("conversation_id", "VARCHAR", "conversation"),
        ("added_round", "INTEGER", "0 = initial extraction; n = added by re-extraction in round n"),
        ("memory_type", "VARCHAR", "episodic, semantic, preference, ..."),
        ("content", "VARCHAR", "memory text"),
        ("source_turn_ids", "VARCHAR[]", "turns it was extracted from"),
        ("session_id", "VARCHAR", "session"),
        ("timestamp", "TIMESTAMP", "when it happened / was said"),
        ("importance", "DOUBLE", "importance after consolidation"),
        ("persons", "VARCHAR[]", "persons mentioned"),
        ("locations", "VARCHAR[]", "locations mentioned"),
        ("entities", "VARCHAR[]", "other entities"),
        ("topics", "VARCHAR[]", "topics"),
        ("keywords", "VARCHAR[]", "keywords"),
    ],
    "diagnoses": [
        ("round", "INTEGER", "round whose records were diagnosed"),
        ("diagnoser", "VARCHAR", "llm, rubric, random or tpe"),
        ("input", "JSON", "what the diagnoser read (SQL summaries, taxonomy, worst cases, history)"),
        ("prompt", "VARCHAR", "the prompt sent (llm diagnoser)"),
        ("raw_response", "VARCHAR", "the model's raw reply (llm diagnoser; at most 64,000 characters, the only copy)"),
        ("parse_error", "VARCHAR", "why the reply was (partly) rejected, if it was"),
        ("proposal", "JSON", "the validated proposal: changes, overrides, missing topics, rationale"),
        ("calls", "INTEGER", "LLM calls"),
        ("prompt_tokens", "BIGINT", "prompt tokens"),
        ("completion_tokens", "BIGINT", "completion tokens"),
        ("prompt_trimmed", "VARCHAR[]", "what the prompt left out to fit the model's context window (empty: nothing)"),
    ],
    "decisions": [
        ("round", "INTEGER", "round whose score the guard judged"),
        (
            "decision",
            "VARCHAR",
            "applied, reverted, explored, stopped (round limit) or converged (no new best for --patience rounds)",
        ),
        ("reason", "VARCHAR", "why, in words"),
        ("score", "DOUBLE", "this round's dev objective"),
        ("delta", "DOUBLE", "change against the previous round"),
        ("base_round", "INTEGER", "round whose config the next config was built from (the best one after a revert)"),
        ("base_score", "DOUBLE", "that round's dev objective"),
        ("best_round", "INTEGER", "the incumbent after this round (the last accepted one)"),
        ("best_score", "DOUBLE", "the incumbent's dev objective"),
        ("changes", "JSON", "changes from this round's config to the next round's"),
        ("next_config", "JSON", "the config the next round evaluates"),
        ("reextracted_sessions", "VARCHAR[]", "sessions re-extracted for extraction gaps"),
        ("memories_added", "INTEGER", "memories the re-extraction added (versioned with the next round)"),
        ("accepted", "BOOLEAN", "this round beat the incumbent on paired evidence and became the best"),
        ("significant_loss", "BOOLEAN", "this round was worse than the incumbent (the next config reverts)"),
        ("compared_with", "INTEGER", "the incumbent round the paired comparison was made against"),
        ("verdict", "VARCHAR", "the paired verdict in words: per-group difference, 95% interval, p-value"),
        (
            "flags",
            "JSON",
            "changes of the applied proposal that the round's own evidence contradicts (loop/evidence_check.py)",
        ),
        ("fallback", "VARCHAR", "why a model's diagnosis was replaced by the rubric's best action, when it was"),
        (
            "paired",
            "JSON",
            "per group (main, adversarial, all): n, means, difference, interval, one-sided p-values; per-conversation and per-fold differences",
        ),
        (
            "candidates",
            "JSON",
            "with --candidates K: the further configs the next round screens beside next_config, each with its source and rationale",
        ),
        (
            "comparisons",
            "INTEGER",
            "candidates this round's config was chosen among (1 unless --candidates): its gain was tested at alpha / comparisons, Holm's first step",
        ),
    ],
    "screenings": [
        ("round", "INTEGER", "round whose candidate was screened"),
        (
            "attempt",
            "INTEGER",
            "1 = the round's proposed config, 2.. = explorations after a screened-out one, or the round's further candidates (--candidates)",
        ),
        ("phase", "VARCHAR", "its minibatch evaluation in `rounds` / `question_records` (screen1, screen2, ...)"),
        (
            "source",
            "VARCHAR",
            "proposal (the guard's next config), exploration (drawn after a screened-out candidate, or to fill the round's candidates) or alternative (a further proposal of the diagnoser, --candidates)",
        ),
        ("config_fingerprint", "VARCHAR", "hash of the screened config"),
        ("config", "JSON", "the screened config, in full"),
        ("changes", "JSON", "its changes against the incumbent"),
        ("compared_with", "INTEGER", "the incumbent round it was compared with, paired, on the minibatch"),
        (
            "outcome",
            "VARCHAR",
            "passed (evaluated on every dev question), screened_out, or outranked (passed, but another of the round's candidates gained more on the minibatch)",
        ),
        (
            "rung",
            "INTEGER",
            "the ladder rung the candidate stopped at: 0 (its contexts' evidence recall), 1 (the paired minibatch), 2 (passed on to the full dev evaluation)",
        ),
        (
            "evidence",
            "JSON",
            "rung 0: the paired evidence recall of its contexts vs the incumbent's on the answerable dev questions, and their sizes in tokens; or why rung 0 was skipped",
        ),
        ("reason", "VARCHAR", "the verdict in words: per-group minibatch difference and interval"),
        ("paired", "JSON", "the paired comparison on the minibatch (as in decisions.paired)"),
        ("n_questions", "INTEGER", "minibatch questions scored"),
        ("main_f1", "DOUBLE", "minibatch main F1 of the candidate"),
        ("adversarial_f1", "DOUBLE", "minibatch adversarial F1 of the candidate"),
        ("all_f1", "DOUBLE", "minibatch all F1 of the candidate"),
        ("calls", "INTEGER", "LLM calls the screening made"),
        ("tokens", "BIGINT", "tokens the screening used"),
        ("wall_seconds", "DOUBLE", "wall time of the screening"),
        (
            "alpha",
            "DOUBLE",
            "the one-sided level its minibatch gain was tested at: --screen-alpha, or its Holm step-down level among the round's candidates (--candidates)",
        ),
    ],
    "proposed_dimensions": [
        ("round", "INTEGER", "round whose diagnosis proposed it"),
        ("name", "VARCHAR", "the proposed new dimension"),
        ("description", "VARCHAR", "what it would control"),
        ("rationale", "VARCHAR", "why the diagnoser wants it"),
        ("maps_to", "JSON", "the bundle of existing settings it switches on"),
        ("per_type", "BOOLEAN", "whether it may be switched on for one question type"),
        ("status", "VARCHAR", "materialised (a lever of the run from the next round on) or refused"),
        (
            "reason",
            "VARCHAR",
            "why it was refused (unknown dimension, out-of-range value, duplicate bundle, name clash, copied example, ...)",
        ),
        (
            "file",
            "VARCHAR",
            "its definition, relative to the run directory (rounds/round_NN/new_dimensions/<name>.toml)",
        ),
    ],
}

# A view over question_records: why each wrong answer went wrong, using the gold evidence. The labels
# are FailureClass members (contracts/vocab.py), spelled once; which questions are adversarial is
# the one rule of qtypes.py.
FAILURE_VIEW = """
CREATE OR REPLACE VIEW question_failures AS
SELECT *,
  CASE
    WHEN failed THEN '{f.CALL_FAILED}'
    WHEN f1 >= {right_f1} THEN '{f.CORRECT}'
    -- contexts only (rung 0, the evidence objective): no answer; a context holding all of the
    -- question's evidence is right, one missing some fails for the reason the classes below give
    WHEN f1 IS NULL AND (category_is_adversarial OR len(evidence_ids) = 0) THEN '{f.UNKNOWN}'
    WHEN f1 IS NULL AND evidence_recall >= 1 THEN '{f.CORRECT}'
    WHEN category_is_adversarial THEN '{f.HALLUCINATION}'
    WHEN len(evidence_ids) = 0 THEN '{f.UNKNOWN}'
    WHEN evidence_covered < 1 THEN '{f.EXTRACTION_GAP}'
    WHEN evidence_retrieved < 1 THEN '{f.RETRIEVAL_MISS}'
    WHEN evidence_recall < 1 THEN '{f.BUDGET_CUT}'
    WHEN abstained THEN '{f.WRONG_ABSTENTION}'
    WHEN f1 > 0 THEN '{f.FORMAT_MISMATCH}'
    ELSE '{f.ANSWER_ERROR}'
  END AS failure
FROM (SELECT *, {adversarial} AS category_is_adversarial FROM question_records)
""".format(right_f1=RIGHT_F1, f=FailureClass, adversarial=ADVERSARIAL_SQL)


def create_statements() -> list[str]:
    statements = []
    for table, columns in TABLES.items():
        cols = ", ".join(f'"{name}" {sql_type}' for name, sql_type, _ in columns)
        statements.append(f"CREATE TABLE IF NOT EXISTS {table} ({cols})")
    statements.append(FAILURE_VIEW)
    return statements
