"""The screening ladder and the `evidence` objective, through the CLI (fake OpenAI server for the
answering runs, offline roles for the evidence objective), and the pieces they rest on: the token
budget, the by-session layout, the contexts-only failure split and the rubric's reader-aware rules.

The fake model answers with the last word of the first memory in the context (test_llm_pipeline),
so every answer call is counted exactly: rung 0 must make none."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.records import QuestionRecord
from evolvemem.data.split import split_dataset
from evolvemem.data.synth import generate_synth
from evolvemem.diagnosers.rubric import RubricDiagnoser
from evolvemem.loop.ladder import RungZero, evidence_questions
from evolvemem.loop.paired import PairedStat, compare
from evolvemem.loop.screening import screen_verdict
from evolvemem.loop.spec import RunSpec
from evolvemem.retrieval.retriever import RetrievedItem, memory_tokens, within_budget
from evolvemem.roles.answer_llm import context_token_share
from evolvemem.roles.context_format import format_context
from evolvemem.space.config import load_config
from evolvemem.space.action_space import files_space
from tests.fake_llm_server import FakeLLMServer
from tests.test_llm_pipeline import MODEL, evolve, make_responder, new_cache, query, seed_cache  # noqa: F401 (fixtures)
from tests.test_loop_units import make_input
from tests.test_screening import _records, answer_calls, llm_run, proposing


LOSES_EVIDENCE = {"recency_weight": 1.0, "time_decay_half_life_days": 1.0}


def ladder_run(server: FakeLLMServer, out: Path, *extra: str):
    return llm_run(server, out, "--screen-fraction", "0.25", "--screen-budget", "1", "--no-cache", *extra)


def evidence_count() -> int:
    ds = generate_synth()
    return len(evidence_questions(split_dataset(ds, "dev").questions))


def test_a_candidate_whose_contexts_lose_evidence_stops_at_rung_0_without_an_answer_call(tmp_path: Path) -> None:
    run = tmp_path / "run"
    # ranked by recency above all: the context keeps the latest candidates, not the relevant ones
    with FakeLLMServer(make_responder(proposing(LOSES_EVIDENCE))) as server:
        assert ladder_run(server, run, "--init", "default").exit_code == 0
        calls = answer_calls(server)
    (screening,) = query(run, "SELECT * FROM screenings")
    assert (screening["outcome"], screening["rung"], screening["phase"]) == ("screened_out", 0, "contexts1")
    evidence = screening["evidence"]
    assert (
        evidence["diff"] < 0 and evidence["n"] == evidence_count() and evidence["tokens"] < evidence["incumbent_tokens"]
    )
    assert "stopped at rung 0" in screening["reason"] and screening["paired"] is None
    # the contexts of both configs are rounds of the store, with no answer and no call
    contexts = query(
        run,
        "SELECT phase, count(*) AS n, count(f1) AS scored, sum(calls) AS calls, "
        "min(context_tokens) AS tokens FROM question_records WHERE round = 1 AND phase LIKE "
        "'contexts%' GROUP BY phase ORDER BY phase",
    )
    assert [(c["phase"], c["n"], c["scored"], c["calls"]) for c in contexts] == [
        ("contexts0", evidence_count(), 0, 0),
        ("contexts1", evidence_count(), 0, 0),
    ]
    assert all(c["tokens"] > 0 for c in contexts)
    # nothing was answered in round 1: the round carried the incumbent's records
    round_0 = query(run, "SELECT count(*) AS n FROM question_records WHERE phase = 'dev' AND round = 0")[0]["n"]
    test = query(run, "SELECT count(*) AS n FROM question_records WHERE phase = 'test_start'")[0]["n"]
    assert calls == round_0 + test
    shown = evolve("show", str(run))
    assert "at rung 0 (contexts' evidence)" in shown.output


def test_rung_0_shows_progress_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    """A retrieval-stage model (decomposition, an LLM walk) makes rung 0 slow: its contexts are
    counted in the log like any evaluation, not silent until the verdict."""
    with FakeLLMServer(make_responder(proposing(LOSES_EVIDENCE))) as server:
        result = evolve(
            "run",
            "--benchmark",
            "synth",
            "--rounds",
            "1",
            "--model",
            MODEL,
            "--api-base",
            server.url,
            "--extract-model",
            "offline",
            "--diagnoser",
            "llm",
            "--out",
            str(tmp_path / "run"),
            "--screen-fraction",
            "0.25",
            "--screen-budget",
            "1",
            "--no-cache",
            "--init",
            "default",
        )
    assert result.exit_code == 0, result.output
    n = evidence_count()
    for phase in ("contexts0", "contexts1"):
        assert re.search(rf"^round 1 {phase}: {n}/{n} questions", result.output, re.MULTILINE), result.output[-3000:]


def test_an_answer_stage_change_skips_rung_0_and_says_why(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with FakeLLMServer(make_responder(proposing({"answer_style": "extractive"}))) as server:
        assert ladder_run(server, run).exit_code == 0
    (screening,) = query(run, "SELECT * FROM screenings")
    assert screening["rung"] in (1, 2) and screening["phase"] == "screen1"
    assert screening["evidence"] == {"skipped": "the change acts only on a built context (answer-stage settings)"}
    assert "rung 0 skipped" in screening["reason"]
    assert query(run, "SELECT count(*) AS n FROM rounds WHERE phase LIKE 'contexts%'")[0]["n"] == 0


def test_a_candidate_that_keeps_its_evidence_climbs_to_the_minibatch(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with FakeLLMServer(make_responder(proposing({"keyword_top_k": 12, "max_context": 12}))) as server:
        assert ladder_run(server, run).exit_code == 0
    (screening,) = query(run, "SELECT * FROM screenings")
    assert screening["rung"] in (1, 2) and screening["evidence"]["diff"] >= 0
    assert "rung 0 held" in screening["reason"] and screening["paired"]["groups"]["all"]["n"] > 0


def test_no_evidence_rung_turns_rung_0_off(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with FakeLLMServer(make_responder(proposing(LOSES_EVIDENCE))) as server:
        assert ladder_run(server, run, "--init", "default", "--no-evidence-rung").exit_code == 0
    (screening,) = query(run, "SELECT * FROM screenings")
    assert screening["rung"] in (1, 2) and screening["evidence"] == {"skipped": "off"}


def test_the_evidence_objective_scores_contexts_at_a_token_budget_without_a_model(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cap = 120
    result = evolve(
        "run",
        "--benchmark",
        "synth",
        "--rounds",
        "2",
        "--objective",
        "evidence",
        "--context-tokens",
        str(cap),
        "--out",
        str(run),
        "--quiet",
        "--json",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    records = query(run, "SELECT * FROM question_records")
    assert records and all(r["f1"] is None and r["prediction"] == "" for r in records)
    # every context fits the budget (a first memory larger than the budget is kept alone)
    assert all(r["context_tokens"] <= cap or len(r["context_ids"]) == 1 for r in records)
    assert query(run, "SELECT coalesce(sum(calls), 0) AS calls FROM usage")[0]["calls"] == 0
    rounds = query(
        run, "SELECT round, phase, main_evidence_recall, main_f1 FROM rounds WHERE phase = 'dev' ORDER BY round"
    )
    assert all(r["main_evidence_recall"] is not None and r["main_f1"] is None for r in rounds)
    assert {p["phase"] for p in query(run, "SELECT DISTINCT phase FROM rounds")} >= {"dev", "test_start", "test_best"}
    assert out["test"]["best"]["main_evidence_recall"] is not None
    # the decisions pair the contexts on evidence recall, answerable questions judged
    decision = query(run, "SELECT paired FROM decisions WHERE round = 1")[0]["paired"]
    assert decision["groups"]["main"]["n"] == evidence_count()
    # a contexts-only record is right when its context holds all its evidence, else it failed for
    # the reason the evidence figures give; unanswerable questions are not judged
    split = query(
        run,
        "SELECT failure, evidence_recall, evidence_retrieved, evidence_covered, question_type "
        "FROM question_failures WHERE round = 0 AND phase = 'dev'",
    )
    for row in split:
        if row["question_type"] == "adversarial" or row["evidence_recall"] is None:
            assert row["failure"] == "unknown"
        elif row["evidence_recall"] >= 1:
            assert row["failure"] == "correct"
        elif row["evidence_covered"] < 1:
            assert row["failure"] == "extraction_gap"
        elif row["evidence_retrieved"] < 1:
            assert row["failure"] == "retrieval_miss"
        else:
            assert row["failure"] == "budget_cut"
    assert {r["failure"] for r in split} & {"retrieval_miss", "budget_cut", "extraction_gap"}
    shown = evolve("show", str(run))
    assert shown.exit_code == 0 and "evidence recall" in shown.output
    # show reports what an evidence run measured (recall, context size), not empty F1 columns
    as_json = json.loads(evolve("show", str(run), "--json").stdout.strip().splitlines()[-1])
    start = as_json["rounds"][0]
    assert start["main_evidence_recall"] == rounds[0]["main_evidence_recall"]
    assert 0 < start["context_tokens"] and any(v is not None for v in start["by_category"].values())
    assert "tokens" in shown.output and "recall (answerable)" in shown.output


def test_the_evidence_objective_defaults_to_the_answer_window_share_and_rejects_a_bad_budget(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert (
        evolve(
            "run", "--benchmark", "synth", "--rounds", "0", "--objective", "evidence", "--out", str(run), "--quiet"
        ).exit_code
        == 0
    )
    manifest = query(run, "SELECT value FROM manifest WHERE key = 'spec'")[0]["value"]
    assert manifest["token_budget"] == context_token_share(None) > 1000
    bad = evolve(
        "run",
        "--benchmark",
        "synth",
        "--objective",
        "evidence",
        "--context-tokens",
        "0",
        "--out",
        str(tmp_path / "bad"),
    )
    assert bad.exit_code != 0 and "--context-tokens must be 1 or more" in bad.output
    assert not (tmp_path / "bad").exists()


def unit(memory_id: str, content: str, session: str, day: int) -> MemoryUnit:
    return MemoryUnit(memory_id, "c1", content, session_id=session, timestamp=datetime(2023, 5, day))


def test_the_token_budget_cuts_the_ranked_context_and_keeps_at_least_one() -> None:
    memories = [unit(f"m{i}", "Priya: " + "word " * 20, "s1", 1) for i in range(6)]
    items = [RetrievedItem(m, 1.0, i + 1, {}) for i, m in enumerate(memories)]
    each = memory_tokens(memories[0])
    assert within_budget(items, 5, 0) == 5  # no token budget: the item count alone
    assert within_budget(items, 5, each * 3) == 3
    assert within_budget(items, 2, each * 3) == 3  # with a token budget the item cap does not cut below it
    assert within_budget(items, 5, 1) == 1
    dim = files_space()["context_token_budget"]
    assert dim.off == 0 and dim.default == 0


def test_the_session_layout_groups_memories_under_dated_headers_in_time_order() -> None:
    context = [
        unit("a", "[9 May 2023] Tomasz: I sold the old bike.", "s2", 9),
        unit("b", "[1 May 2023] Priya: I started a pottery class.", "s1", 1),
        unit("c", "[9 May 2023] Priya: The kiln was broken again.", "s2", 9),
    ]
    text = format_context(context, "sessions")
    first, second = text.split("\n\n")
    assert first.startswith("Session of 1 May 2023:") and "Priya: I started a pottery class." in first
    assert second.startswith("Session of 9 May 2023:")
    assert second.index("Tomasz: I sold") < second.index("Priya: The kiln")  # context order inside a session
    assert format_context(context) == format_context(context, "list")
    assert files_space()["context_layout"].choices == ("list", "sessions")


def test_paired_comparisons_can_pair_on_evidence_recall() -> None:
    def rec(qid: str, recall: float | None, f1: float | None) -> QuestionRecord:
        return QuestionRecord(1, "dev", qid, "c1", "1", "single_fact", "?", "", "", f1=f1, evidence_recall=recall)

    base = [rec(f"q{i}", 0.0, None) for i in range(10)]
    better = [rec(f"q{i}", 1.0, None) for i in range(10)]
    comparison = compare(better, base, 1, 0, "evidence")
    assert comparison.groups["main"].diff == 1.0 and comparison.groups["main"].p_gain < 0.01
    assert compare(better, base, 1, 0, "balanced").groups["main"].n == 0  # no F1 to pair


def test_the_rubric_targets_reader_errors_with_the_context_format_and_budget_cuts_with_the_budget() -> None:
    weak = load_config("weak")[0]
    reader_errors = make_input({"answer_error": 40, "correct": 60})
    assert RubricDiagnoser().diagnose(reader_errors, weak).proposal.changes == {"context_layout": "sessions"}
    # answering offline, the layout is fixed (it needs a model): the next lever, time order
    reader_errors.fixed = tuple(
        name
        for name, dim in files_space().items()
        if dim.needs_model or dim.needs_reranker or dim.needs_second_embedder
    )
    assert RubricDiagnoser().diagnose(reader_errors, weak).proposal.changes == {"context_order": "chronological"}
    budgeted = weak.with_changes({"context_token_budget": 400})[0]
    cut = make_input({"budget_cut": 50, "correct": 50}, config=budgeted)
    assert RubricDiagnoser().diagnose(cut, budgeted).proposal.changes == {"context_token_budget": 800}


def test_a_significant_evidence_gain_carries_a_candidate_past_a_minibatch_too_small_to_show_its_gain(
    tmp_path: Path,
) -> None:
    """A candidate whose contexts hold significantly more evidence passes rung 1 when the reader
    answers no worse there; the full dev evaluation (rung 2) then decides."""
    run = tmp_path / "run"
    wider = {"semantic_top_k": 10, "keyword_top_k": 12, "max_context": 15}
    with FakeLLMServer(make_responder(proposing(wider))) as server:
        assert ladder_run(server, run, "--init", "weak").exit_code == 0
    (screening,) = query(run, "SELECT * FROM screenings")
    evidence = screening["evidence"]
    assert evidence["diff"] > 0 and evidence["p_gain"] < 0.05, evidence
    assert "rung 0 gained" in screening["reason"]
    # the fake reader answers the same with either context: no gain on the minibatch, and no loss
    assert screening["paired"]["groups"]["main"]["diff"] == 0
    assert (screening["outcome"], screening["rung"]) == ("passed", 2)
    assert "after an evidence gain at rung 0" in screening["reason"]
    full = query(
        run, "SELECT round, count(*) AS n FROM question_records WHERE phase = 'dev' GROUP BY round ORDER BY round"
    )
    # round 1 went on to dev (rung 2) beyond its minibatch; answering exactly as the start does, it
    # cannot gain and stopped for futility at the first look (loop/sequential.py)
    assert screening["n_questions"] < full[1]["n"] < full[0]["n"]
    (stopped,) = query(run, "SELECT stopped_at FROM rounds WHERE round = 1 AND phase = 'dev'")
    assert stopped["stopped_at"].startswith(f"futility at look 1 ({full[1]['n']} of {full[0]['n']} dev questions)")
    # without rung 0 the same candidate has only its minibatch to show, and shows no gain there
    blind = tmp_path / "blind"
    with FakeLLMServer(make_responder(proposing(wider))) as server:
        assert ladder_run(server, blind, "--init", "weak", "--no-evidence-rung").exit_code == 0
    (screening,) = query(blind, "SELECT * FROM screenings")
    assert (screening["outcome"], screening["rung"]) == ("screened_out", 1) and "no gain" in screening["reason"]


def test_an_evidence_gain_passes_a_minibatch_that_shows_no_loss_but_never_one_that_shows_a_loss() -> None:
    spec = RunSpec(benchmark="synth", data=None, diagnoser="rubric")
    incumbent = _records([0.5] * 30)

    def verdict(f1s: list[float]):
        return screen_verdict(
            compare(_records(f1s), incumbent, 1, 0, "balanced"), "balanced", spec, evidence_gained=True
        )

    assert verdict([0.5] * 30).passed
    assert not verdict([0.0] * 10 + [0.5] * 20).passed
    gained = RungZero(False, "", {}, PairedStat(30, 0.6, 0.4, 0.2, 0.1, 0.3, 0.01, 0.99))
    assert gained.gained(spec.guard) and not gained.gained(spec.guard, alpha=0.005)
    assert not RungZero(False, "", {}, PairedStat(30, 0.402, 0.4, 0.002, 0.0, 0.004, 0.01, 0.99)).gained(
        spec.guard
    )  # below min effect
    assert not RungZero(False, "", {"skipped": "off"}).gained(spec.guard)
