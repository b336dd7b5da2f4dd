"""Paired decisions (evolvemem/loop/paired.py): statistics on invented per-question records."""

from __future__ import annotations

from evolvemem.space.config import RetrievalConfig

import random

from evolvemem.contracts.records import QuestionRecord
from evolvemem.loop.paired import accept, compare
from evolvemem.space.action_space import files_space
from evolvemem.loop.spec import GuardSettings
from dataclasses import replace

from evolvemem.contracts.diagnosis import GroupOutcome, HistoryEntry, ScoreSummary
from evolvemem.space.changes import Change


def record(question_id: str, conversation: str, qtype: str, f1: float) -> QuestionRecord:
    return QuestionRecord(1, "dev", question_id, conversation, qtype, qtype, "?", "", "", f1=f1)


def records(scores: dict[str, list[float]], adversarial: dict[str, list[float]] | None = None) -> list[QuestionRecord]:
    """Records of invented questions: conversation -> F1 per answerable question (then adversarial)."""
    out = []
    for conv, values in scores.items():
        for i, f1 in enumerate(values):
            out.append(record(f"{conv}-q{i}", conv, "single_fact", f1))
    for conv, values in (adversarial or {}).items():
        for i, f1 in enumerate(values):
            out.append(record(f"{conv}-a{i}", conv, "adversarial", f1))
    return out


def flips(n: int, right: int, seed: int) -> list[float]:
    values = [1.0] * right + [0.0] * (n - right)
    random.Random(seed).shuffle(values)
    return values


CONVS = ("c1", "c2", "c3", "c4")


def test_a_clear_gain_on_answerable_questions_is_accepted_and_recorded_with_its_statistics():
    base = records({c: [0.0] * 100 for c in CONVS}, {c: [1.0] * 20 for c in CONVS})
    better = records({c: flips(100, 10, i) for i, c in enumerate(CONVS)}, {c: [1.0] * 20 for c in CONVS})
    comparison = compare(better, base, 3, 1, "balanced")
    main = comparison.groups["main"]
    assert main.n == 400 and abs(main.diff - 0.10) < 1e-9 and main.p_gain < 0.001 and main.ci_low > 0
    assert comparison.groups["adversarial"].diff == 0 and set(comparison.by_conversation) == set(CONVS)
    verdict = accept(comparison, "balanced", GuardSettings())
    assert verdict.accepted and not verdict.significant_loss and "main" in verdict.reason
    assert comparison.as_dict()["groups"]["main"]["p_gain"] == main.p_gain


def test_abstaining_more_is_not_a_gain_under_the_balanced_objective():
    """More traps declined (+adversarial) bought with answered questions lost (−main)."""
    base = records({c: [1.0] * 40 + [0.0] * 60 for c in CONVS}, {c: [0.0] * 25 for c in CONVS})
    traded = records({c: [1.0] * 36 + [0.0] * 64 for c in CONVS}, {c: [1.0] * 10 + [0.0] * 15 for c in CONVS})
    comparison = compare(traded, base, 2, 0, "balanced")
    assert comparison.groups["adversarial"].diff > 0.3 and comparison.groups["all"].diff > 0
    verdict = accept(comparison, "balanced", GuardSettings())
    assert not verdict.accepted and "loses on main" in verdict.reason
    # the `all` objective would have taken it: that is why balanced is the default
    assert accept(compare(traded, base, 2, 0, "all"), "all", GuardSettings()).accepted


def test_noise_is_not_a_gain():
    base = records({c: flips(200, 60, i) for i, c in enumerate(CONVS)})
    noisy = records({c: flips(200, 61, i + 10) for i, c in enumerate(CONVS)})
    comparison = compare(noisy, base, 1, 0, "balanced")
    assert comparison.groups["main"].p_gain > 0.05
    assert not accept(comparison, "balanced", GuardSettings()).accepted


def test_one_conversation_cannot_carry_a_gain():
    """A big gain in one conversation, small losses in the three others: significant overall,
    but only 1 of 4 conversations holds."""
    base = records({"c1": [0.0] * 100, **{c: [1.0] * 2 + [0.0] * 98 for c in CONVS[1:]}})
    lopsided = records({"c1": [1.0] * 60 + [0.0] * 40, **{c: [0.0] * 100 for c in CONVS[1:]}})
    comparison = compare(lopsided, base, 1, 0, "balanced")
    assert comparison.groups["main"].diff > 0 and comparison.groups["main"].p_gain < 0.05
    assert comparison.by_conversation["c1"] == 0.6 and comparison.by_conversation["c2"] == -0.02
    verdict = accept(comparison, "balanced", GuardSettings())
    assert not verdict.accepted and "only 1/4 conversations hold" in verdict.reason
    assert verdict.reason.startswith("not better than round 0")


def test_failed_questions_are_left_out_of_the_pairs_and_folds_must_all_hold():
    base = records({c: [0.0] * 50 for c in CONVS})
    better = records({c: [1.0] * 10 + [0.0] * 40 for c in CONVS})
    better[0] = replace(better[0], failed=True, f1=None)
    comparison = compare(better, base, 1, 0, "balanced", folds=2)
    assert comparison.groups["main"].n == 199 and len(comparison.by_fold) == 2
    assert accept(comparison, "balanced", GuardSettings(folds=2)).accepted


# ----------------------------------------------------------------------------- proposals vs evidence
def _input(taxonomy: dict[str, int], history: list[HistoryEntry] | None = None, view_credit: dict | None = None):
    from evolvemem.contracts.diagnosis import DiagnosisInput
    from evolvemem.space.config import load_config

    from evolvemem.space.action_space import files_space

    config = load_config("default")[0]
    return DiagnosisInput(
        round=2,
        objective="balanced",
        score=0.3,
        overall=ScoreSummary(),
        by_type=[],
        by_category=[],
        taxonomy=taxonomy,
        taxonomy_by_type={},
        worst_cases=[],
        config=config.values(),
        overrides={},
        history=history or [],
        view_credit=view_credit or {},
        # as the runner fixes them for a run without --rerank-model or --second-embedding-model
        fixed=tuple(name for name, dim in files_space().items() if dim.needs_reranker or dim.needs_second_embedder),
    )


def test_shrinking_the_context_while_budget_cuts_dominate_is_flagged_and_rejected_for_a_model():
    from evolvemem.contracts.diagnosis import Proposal
    from evolvemem.loop.evidence_check import flag_proposal

    inp = _input({"budget_cut": 120, "retrieval_miss": 40, "answer_error": 30})
    recorded = Proposal(changes={"max_context": 6, "answer_style": "concise"})
    flags = flag_proposal(recorded, inp, files_space(), reject=False)
    assert len(flags) == 1 and "shrinks max_context" in flags[0] and "budget_cut" in flags[0]
    assert recorded.changes == {"max_context": 6, "answer_style": "concise"}  # random/tpe: recorded only
    rejected = Proposal(changes={"max_context": 6, "answer_style": "concise"})
    flag_proposal(rejected, inp, files_space(), reject=True)
    assert rejected.changes == {"answer_style": "concise"} and "max_context (global): rejected" in rejected.rejected[0]
    # the same change is fine when answers, not retrieval, fail
    assert (
        flag_proposal(Proposal(changes={"max_context": 6}), _input({"answer_error": 200}), files_space(), reject=True)
        == []
    )


def test_switching_off_the_view_that_found_the_evidence_and_repeating_a_failed_move_are_flagged():
    from evolvemem.contracts.diagnosis import Proposal
    from evolvemem.loop.evidence_check import flag_proposal

    history = [
        HistoryEntry(
            round=0,
            decision="applied",
            changes=(Change("rrf_k", 60, 30),),
            outcome_delta=0.004,
            outcome_accepted=False,
        )
    ]
    inp = _input({"answer_error": 50}, history, view_credit={"semantic": 90, "keyword": 40})
    p = Proposal(changes={"semantic_top_k": 0, "rrf_k": 20})
    flags = flag_proposal(p, inp, files_space(), reject=True)
    assert any("switches off the semantic view" in f for f in flags)
    assert any("repeats rrf_k" in f for f in flags) and p.is_empty


def _traded(field: str, old, new, main: float, adversarial: float, p_gain: float = 0.01) -> HistoryEntry:
    """A history item: a change whose round gained one group and lost the other (paired)."""
    groups = {
        "main": GroupOutcome(main, p_gain if main > 0 else 0.9, 0.9 if main > 0 else 0.01),
        "adversarial": GroupOutcome(adversarial, p_gain if adversarial > 0 else 0.9, 0.9 if adversarial > 0 else 0.01),
    }
    return HistoryEntry(
        round=1,
        decision="applied",
        changes=(Change(field, old, new),),
        outcome_delta=0.0,
        outcome_accepted=False,
        outcome_groups=groups,
    )


def test_the_rubric_keeps_a_change_that_traded_groups_together_with_a_counterweight():
    from evolvemem.contracts.diagnosis import Proposal
    from evolvemem.diagnosers.rubric import RubricDiagnoser
    from evolvemem.loop.evidence_check import flag_proposal

    # more context helped answerable questions but answered unanswerable ones: keep it, verify answers
    inp = _input({"retrieval_miss": 100, "hallucination": 40}, [_traded("keyword_top_k", 10, 20, 0.012, -0.06)])
    inp.config["enable_answer_verification"] = False
    proposal = RubricDiagnoser().diagnose(inp, RetrievalConfig()).proposal
    assert proposal.changes == {"keyword_top_k": 20, "enable_answer_verification": True}  # strict already in effect
    assert "counterweight for adversarial" in proposal.rationale
    assert (
        flag_proposal(proposal, inp, files_space(), reject=True) == [] and "keyword_top_k" in proposal.changes
    )  # a new experiment
    # alone, the tried move is still a repeat
    assert any(
        "repeats keyword_top_k" in f
        for f in flag_proposal(Proposal(changes={"keyword_top_k": 20}), inp, files_space(), reject=False)
    )
    # the other way round: abstaining more lost answerable questions, so give the reader more evidence
    inp = _input({"retrieval_miss": 100}, [_traded("answer_style", "concise", "cautious", -0.02, 0.1)])
    proposal = RubricDiagnoser().diagnose(inp, RetrievalConfig()).proposal
    assert (
        proposal.changes["answer_style"] == "cautious" and proposal.changes["max_context"] > inp.config["max_context"]
    )
    # a gain that is not significant is no trade: the rubric's usual rules decide
    inp = _input({"retrieval_miss": 100}, [_traded("keyword_top_k", 10, 20, 0.012, -0.06, p_gain=0.4)])
    assert "counterweight" not in RubricDiagnoser().diagnose(inp, RetrievalConfig()).proposal.rationale


def test_a_counterweight_for_answerable_questions_gives_back_all_their_evidence_at_once_and_is_judged_whole():
    from evolvemem.diagnosers.rubric import RubricDiagnoser
    from evolvemem.space.config import load_config

    def weak_input(history: list[HistoryEntry]):
        inp = _input({"retrieval_miss": 100}, history)
        inp.config.update(load_config("weak")[0].values())
        return inp

    # verification won unanswerable questions but withdrew answerable ones; the dense view and a
    # wider budget had each failed alone before (no gain), which does not stop them as a counterweight
    failed_alone = [
        HistoryEntry(
            round=0,
            decision="reverted",
            outcome_delta=-0.001,
            outcome_accepted=False,
            changes=(Change(field, old, new),),
        )
        for field, old, new in (("semantic_top_k", 0, 10), ("max_context", 8, 10))
    ]
    traded = replace(_traded("enable_answer_verification", False, True, -0.02, 0.15), round=2)
    proposal = RubricDiagnoser().diagnose(weak_input(failed_alone + [traded]), RetrievalConfig()).proposal
    assert proposal.changes == {
        "enable_answer_verification": True,
        "semantic_top_k": 10,
        "max_context": 15,  # keyword 5 + semantic 10: every candidate fits
        "judge_retries": 1,
    }  # answers are gated: a withdrawn one may retry
    assert "counterweight for main" in proposal.rationale
    # the same bundle tried (and lost) once is not proposed again: the next, smaller counterweight is
    tried = HistoryEntry(
        round=3,
        decision="reverted",
        outcome_delta=-0.001,
        outcome_accepted=False,
        changes=tuple(Change(k, None, val) for k, val in proposal.changes.items()),
    )
    again = RubricDiagnoser().diagnose(weak_input(failed_alone + [traded, tried]), RetrievalConfig()).proposal
    assert again.changes and again.changes != proposal.changes


def test_a_counterweight_does_not_walk_further_along_the_settings_the_kept_change_already_moved():
    from evolvemem.diagnosers.rubric import trade_actions

    # a bundle that widened the keyword view and the budget still lost answerable questions: a
    # counterweight that only widens the keyword view again is not proposed (fresh settings are)
    bundle = _traded("enable_answer_verification", False, True, -0.02, 0.14)
    bundle = replace(
        bundle,
        changes=(
            *bundle.changes,
            Change("keyword_top_k", 10, 15),
            Change("max_context", 12, 30),
            Change("judge_retries", 0, 1),
        ),
    )
    # (the dense view is on and the budget is at its maximum: nothing fresh is left, so the
    # rubric's usual rules decide)
    assert trade_actions(_input({"retrieval_miss": 100}, [bundle]), files_space()) == []
    single = _traded("enable_answer_verification", False, True, -0.02, 0.14)
    widened = trade_actions(_input({"retrieval_miss": 100}, [single]), files_space())
    assert widened and widened[0].changes["keyword_top_k"] > 10  # alone, verification gets the wider view


def test_moves_that_failed_alone_are_a_new_experiment_together_but_not_twice():
    from evolvemem.contracts.diagnosis import Proposal
    from evolvemem.loop.evidence_check import flag_proposal

    def tried(changes: dict, round_no: int) -> HistoryEntry:
        return HistoryEntry(
            round=round_no,
            decision="reverted",
            outcome_delta=-0.002,
            outcome_accepted=False,
            changes=tuple(Change(k, DEFAULTS[k], v) for k, v in changes.items()),
        )

    DEFAULTS = {"keyword_top_k": 10, "answer_style": "concise"}  # the default preset's values

    alone = [tried({"keyword_top_k": 20}, 0), tried({"answer_style": "cautious"}, 1)]
    both = {"keyword_top_k": 20, "answer_style": "cautious"}
    assert (
        flag_proposal(Proposal(changes=dict(both)), _input({"answer_error": 50}, alone), files_space(), reject=True)
        == []
    )
    again = Proposal(changes=dict(both))
    flags = flag_proposal(again, _input({"answer_error": 50}, alone + [tried(both, 2)]), files_space(), reject=True)
    assert len(flags) == 2 and all("a move already tried without a gain" in f for f in flags) and again.is_empty


def test_retrieval_misses_widen_the_views_with_a_context_that_carries_the_extra_candidates():
    from evolvemem.diagnosers.rubric import RubricDiagnoser
    from evolvemem.space.config import load_config

    # the weak preset after the dense view came on and rank fusion was accepted: misses dominate
    inp = _input({"retrieval_miss": 100, "hallucination": 20})
    inp.config.update(load_config("weak")[0].values())
    inp.config.update({"semantic_top_k": 10, "fusion_mode": "rrf"})
    # switching the dense view on was tried first and brought no significant gain: a different
    # lever from giving it more candidates now that it is on
    inp.history = [
        HistoryEntry(
            round=0,
            decision="applied",
            outcome_delta=0.09,
            outcome_accepted=False,
            changes=(Change("semantic_top_k", 0, 10),),
        )
    ]
    proposal = RubricDiagnoser().diagnose(inp, RetrievalConfig()).proposal
    assert "widen the views" in proposal.rationale
    # 15 + 10 candidates now ranked: the budget of 8 grows by one step, or the reader sees no new one
    assert proposal.changes == {"semantic_top_k": 15, "keyword_top_k": 10, "max_context": 12}
    # widening that was tried without a gain is not walked again
    inp.history.append(
        HistoryEntry(
            round=1,
            decision="reverted",
            outcome_delta=-0.01,
            outcome_accepted=False,
            changes=tuple(Change(k, inp.config[k], v) for k, v in proposal.changes.items()),
        )
    )
    assert "widen the views" not in RubricDiagnoser().diagnose(inp, RetrievalConfig()).proposal.rationale


def test_switching_a_lever_on_is_a_different_move_from_turning_it_up():
    from evolvemem.contracts.diagnosis import move_direction

    assert move_direction("semantic_top_k", 0, 10, files_space()) == "on"
    assert move_direction("semantic_top_k", 10, 15, files_space()) == "up"
    assert move_direction("semantic_top_k", 10, 0, files_space()) == "off"
    assert move_direction("max_context", 12, 8, files_space()) == "down"  # no off value: only up and down
    assert move_direction("answer_style", "concise", "cautious", files_space()) == repr("cautious")
