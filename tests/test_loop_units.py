"""Proposal validation, the guard's decisions, and the rubric's rules on hand-made inputs."""

from __future__ import annotations

import random

from evolvemem.diagnosers.llm import diagnosis_variants
from evolvemem.diagnosers.rubric import RULES, RubricDiagnoser, RuleContext, candidate_actions
from evolvemem.diagnosers.random_search import RandomDiagnoser
from evolvemem.diagnosers.tpe import TPEDiagnoser
from evolvemem.contracts.diagnosis import DiagnosisInput, HistoryEntry, ScoreSummary, TypeRow
from evolvemem.space.changes import Change
from evolvemem.space.ops import perturb
from evolvemem.loop.guard import RoundScore, check_regression, decide
from evolvemem.loop.spec import GuardSettings
from evolvemem.store.rows import DecisionRow
from evolvemem.contracts.diagnosis import Proposal, proposal_from_raw
from evolvemem.space.config import RetrievalConfig, load_config
from evolvemem.space.action_space import files_space


# a run without --rerank-model or --second-embedding-model
WITHOUT_EXTRA_MODELS = tuple(
    name for name, dim in files_space().items() if dim.needs_reranker or dim.needs_second_embedder
)


def make_input(taxonomy, by_type=None, config=None, history=None, mean_context=8.0) -> DiagnosisInput:
    config = config or load_config("weak")[0]
    inp = DiagnosisInput(
        round=1,
        objective="all",
        score=0.3,
        overall=ScoreSummary(),
        by_type=by_type or [],
        by_category=[],
        taxonomy=taxonomy,
        taxonomy_by_type={},
        worst_cases=[],
        config=config.values(),
        overrides=config.overrides(),
        history=history or [],
        mean_context=mean_context,
    )
    inp.fixed = WITHOUT_EXTRA_MODELS  # as the runner fixes them for a run without either model
    return inp


def test_proposal_validation_clamps_rejects_and_keeps_new_dimensions():
    p = proposal_from_raw(
        {
            "changes": {"max_context": 999, "fusion_mode": "magic", "semantic_top_k": "12", "graph_hops": 2},
            "overrides": {"temporal": {"answer_style": "temporal", "rrf_k": 20}, "nonsense": {"max_context": 9}},
            "missing_topics": ["pets"],
            "rationale": "why not",
            "new_dimensions": [{"name": "cue_graph", "description": "walk a cue graph", "rationale": "multi-hop"}],
        },
        files_space(),
    )
    assert p.changes == {"max_context": 200, "semantic_top_k": 12}
    assert p.overrides == {"temporal": {"answer_style": "temporal"}}
    assert {d.name for d in p.new_dimensions} == {"graph_hops", "cue_graph"}
    assert any("fusion_mode" in r for r in p.rejected)
    assert any("rrf_k cannot be overridden" in r for r in p.rejected)
    assert any("nonsense" in r for r in p.rejected)
    assert proposal_from_raw("garbage", files_space()).is_empty and proposal_from_raw("garbage", files_space()).rejected


def test_guard_reverts_on_a_paired_loss_and_builds_on_the_incumbent():
    weak = load_config("weak")[0]
    better, _ = weak.with_changes({"max_context": 12})
    worse, _ = better.with_changes({"keyword_top_k": 3})
    scores = [
        RoundScore(0, 0.30, weak, accepted=True),
        RoundScore(1, 0.40, better, accepted=True),
        RoundScore(2, 0.35, worse, significant_loss=True),
    ]
    reg = check_regression(scores, GuardSettings())
    assert reg.reverted and reg.base.round == 1 and reg.best.round == 1
    d = decide(scores, reg, Proposal(changes={"semantic_top_k": 10}), GuardSettings(), random.Random(0), set())
    assert d.decision == "reverted"
    assert d.next_config.keyword_top_k == better.keyword_top_k and d.next_config.semantic_top_k == 10
    # a higher score that is not a paired gain is not the incumbent, and not a loss either
    noise = [RoundScore(0, 0.30, weak, accepted=True), RoundScore(1, 0.31, better)]
    reg = check_regression(noise, GuardSettings())
    assert not reg.reverted and reg.best.round == 0 and reg.base.round == 1


def test_guard_explores_after_rounds_without_a_significant_gain_and_on_empty_or_repeated_proposals():
    weak = load_config("weak")[0]
    a, _ = weak.with_changes({"max_context": 10})
    b, _ = a.with_changes({"max_context": 11})
    flat = [RoundScore(0, 0.300, weak, accepted=True), RoundScore(1, 0.330, a), RoundScore(2, 0.360, b)]
    reg = check_regression(flat, GuardSettings())
    d = decide(flat, reg, Proposal(changes={"semantic_top_k": 10}), GuardSettings(), random.Random(0), set())
    assert d.decision == "explored" and d.changes and "no significant gain" in d.reason
    gaining = [
        RoundScore(0, 0.300, weak, accepted=True),
        RoundScore(1, 0.301, a),
        RoundScore(2, 0.302, b, accepted=True),
    ]
    reg = check_regression(gaining, GuardSettings())
    assert (
        decide(
            gaining,
            reg,
            Proposal(changes={"semantic_top_k": 10}, rationale="r"),
            GuardSettings(),
            random.Random(0),
            set(),
        ).decision
        == "applied"
    )
    moving = [RoundScore(0, 0.30, weak, accepted=True), RoundScore(1, 0.35, a, accepted=True)]
    reg = check_regression(moving, GuardSettings())
    assert decide(moving, reg, Proposal(), GuardSettings(), random.Random(0), set()).decision == "explored"
    seen = {a.with_changes({"max_context": 20})[0].fingerprint()}
    d = decide(moving, reg, Proposal(changes={"max_context": 20}), GuardSettings(), random.Random(0), seen)
    assert d.decision == "explored" and "repeat" in d.reason
    d = decide(
        moving, reg, Proposal(changes={"max_context": 20}, rationale="r"), GuardSettings(), random.Random(0), set()
    )
    assert d.decision == "applied" and d.next_config.max_context == 20


def test_guard_never_applies_adversarial_overrides():
    weak = load_config("weak")[0]
    scores = [RoundScore(0, 0.3, weak, accepted=True)]
    p = Proposal(overrides={"adversarial": {"answer_style": "cautious"}, "temporal": {"answer_style": "temporal"}})
    d = decide(scores, check_regression(scores, GuardSettings()), p, GuardSettings(), random.Random(0), set())
    assert "adversarial" not in d.next_config.overrides() and "temporal" in d.next_config.overrides()


def test_rubric_rules_follow_the_taxonomy():
    # retrieval misses with the dense view off -> turn it on first
    inp = make_input({"retrieval_miss": 60, "answer_error": 20, "correct": 100})
    result = RubricDiagnoser().diagnose(inp, load_config("weak")[0])
    assert result.proposal.changes == {"semantic_top_k": 10}
    # budget cuts dominate -> larger max_context
    inp = make_input({"budget_cut": 50, "answer_error": 10})
    assert RubricDiagnoser().diagnose(inp, load_config("weak")[0]).proposal.changes == {"max_context": 12}
    # one lagging type -> a per-type override that keeps the others
    by_type = [TypeRow("temporal", 50, 0.1), TypeRow("single_fact", 50, 0.5)]
    inp = make_input({"answer_error": 5, "correct": 95}, by_type=by_type)
    p = RubricDiagnoser().diagnose(inp, load_config("weak")[0]).proposal
    assert p.overrides == {"temporal": {"answer_style": "temporal"}} and not p.changes
    # hallucinations -> verification
    inp = make_input({"hallucination": 40, "answer_error": 10})
    assert (
        RubricDiagnoser().diagnose(inp, load_config("weak")[0]).proposal.changes["enable_answer_verification"] is True
    )


def test_rubric_skips_changes_that_failed_before():
    history = [
        HistoryEntry(
            round=0,
            decision="applied",
            changes=(Change("max_context", 8, 12),),
            outcome_delta=-0.02,
            score=0.3,
            reason="",
        )
    ]
    inp = make_input({"budget_cut": 50, "retrieval_miss": 30}, history=history)
    p = RubricDiagnoser().diagnose(inp, load_config("weak")[0]).proposal
    assert p.changes != {"max_context": 12} and not p.is_empty
    assert candidate_actions(make_input({}), files_space()) == []


def test_every_rule_of_the_table_fires_on_its_signal_and_proposes_settings_of_the_space():
    rng, space = random.Random(0), files_space()
    fired = set()
    for preset in ("weak", "default", "hybrid"):
        for _ in range(15):
            config, _ = perturb(load_config(preset)[0], rng, 8)
            for signal in {rule.signal for rule in RULES}:
                inp = make_input(
                    {cls: 100 for cls, _ in signal.parts} | {"correct": 100}, config=config, mean_context=20.0
                )
                for budget in (0, 1500):
                    inp.token_budget = budget
                    for rule in RULES:
                        action = rule.fire(RuleContext(inp, space))
                        if action is not None:
                            assert (
                                action.rule == rule.name and action.changes and all(k in space for k in action.changes)
                            )
                            fired.add((rule.name, rule.signal.name))
    assert fired == {(rule.name, rule.signal.name) for rule in RULES}
    # below its signal's threshold (a share of the failures) no rule fires
    quiet = make_input({"correct": 100, "unknown": 96, "retrieval_miss": 1, "answer_error": 1, "budget_cut": 2})
    assert [r.name for r in RULES if r.fire(RuleContext(quiet, space))] == []


def test_the_diagnosis_prompt_shows_the_typed_rows_as_the_dicts_it_had():
    by_type = [TypeRow("temporal", 50, 0.1, 0.5, 3, 0.0), TypeRow("single_fact", 50, 0.5, 0.9, 1, 0.02, delta=0.05)]
    history = [HistoryEntry(0, "applied", "kept", 0.3, None, (Change("max_context", 8, 12),), 0.01, True)]
    inp = make_input({"answer_error": 5, "correct": 95}, by_type=by_type, history=history)
    prompt = next(diagnosis_variants(inp, files_space()))[1]
    # a type's delta only when it has one; a change with its keys sorted, as the run store keeps it
    assert (
        '{"question_type": "temporal", "n": 50, "f1": 0.1, "evidence_recall": 0.5, "zero_f1": 3, "abstain_rate": 0.0}\n'
        in prompt
    )
    assert '"abstain_rate": 0.02, "delta": 0.05}' in prompt
    assert (
        '- round 0: applied (kept); score 0.3; changes [{"field": "max_context", "new": 12, "old": 8, "scope": "global"}]; '
        "next round moved the score by 0.01 (a paired gain)" in prompt
    )
    stored = inp.as_dict()
    assert "delta" not in stored["by_type"][0] and stored["by_type"][1]["delta"] == 0.05
    assert stored["history"][0]["changes"] == [{"field": "max_context", "new": 12, "old": 8, "scope": "global"}]
    assert stored["overall"] == {"n": None, "f1": None, "evidence_recall": None, "zero_f1": None, "mean_context": None}


def test_random_and_tpe_propose_valid_changes():
    cfg = RetrievalConfig()
    inp = make_input({}, config=cfg)
    r1 = RandomDiagnoser(seed=1).diagnose(inp, cfg).proposal
    assert r1.changes == RandomDiagnoser(seed=1).diagnose(inp, cfg).proposal.changes and r1.changes
    tpe = TPEDiagnoser(seed=0)
    tpe.observe(cfg, 0.3)
    p = tpe.diagnose(inp, cfg).proposal
    new, _ = p.apply_to(cfg)
    tpe.observe(new, 0.4)
    assert len(tpe.study.trials) == 2 and tpe.study.best_value == 0.4


def test_the_store_reads_back_the_best_round_the_guard_chose(tmp_path):
    """One best-round rule: the guard's incumbent while a run goes and the store's best read back from
    the decisions agree, and a later round that won its paired comparison moves it (not a higher mean)."""
    from evolvemem.loop.guard import incumbent_of
    from evolvemem.store.run_store import RunStore

    config = RetrievalConfig()
    verdicts = [(0, True, 0.30), (1, True, 0.35), (2, False, 0.50), (3, True, 0.33), (4, False, 0.40)]
    scores = [RoundScore(n, score, config, accepted=won) for n, won, score in verdicts]
    with RunStore(tmp_path / "run") as store:
        assert store.best_round() == 0  # nothing decided yet: the start
        for i, (n, won, score) in enumerate(verdicts):
            store.record_decision(
                DecisionRow(
                    round=n,
                    decision="applied",
                    reason="-",
                    score=score,
                    accepted=won,
                    best_round=incumbent_of(scores[: i + 1]).round,
                )
            )
            assert store.best_round() == incumbent_of(scores[: i + 1]).round
        assert store.best_round() == 3  # round 2 had the highest mean but lost its comparison
