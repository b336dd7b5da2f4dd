"""Parsimony (loop/parsimony.py): a round that switches a lever on and gains nothing significant is
not built on; a change that switches nothing on, or a gain, is."""

import random

from evolvemem.contracts.diagnosis import Proposal
from evolvemem.loop.guard import RoundScore, check_regression, decide
from evolvemem.loop.parsimony import levers_switched_on
from evolvemem.loop.spec import GuardSettings
from evolvemem.space.config import load_config


def test_levers_switched_on_reads_mechanisms_model_calls_and_overrides_from_the_registry():
    weak = load_config("weak")[0]
    prior, _ = weak.with_changes({"session_prior_weight": 0.3, "max_context": 12})
    assert levers_switched_on(prior, weak) == ["session_prior_weight"]  # max_context has no off state
    assert levers_switched_on(weak, prior) == []  # switching off costs nothing
    stronger, _ = prior.with_changes({"session_prior_weight": 0.6})
    assert levers_switched_on(stronger, prior) == []  # already on: a new weight is not a new lever
    per_type, _ = weak.with_changes({"enable_query_decomposition": True}, question_type="temporal")
    assert levers_switched_on(per_type, weak) == ["enable_query_decomposition"]


def test_a_no_gain_round_that_switches_a_lever_on_is_not_built_on():
    weak = load_config("weak")[0]
    free_ride, _ = weak.with_changes({"neighbour_weight": 0.2})
    scores = [RoundScore(0, 0.30, weak, accepted=True), RoundScore(1, 0.31, free_ride)]
    reg = check_regression(scores, GuardSettings())
    assert reg.reverted and reg.base.round == 0
    assert "switches on neighbour_weight" in reg.reason and "parsimony" in reg.reason
    d = decide(scores, reg, Proposal(changes={"semantic_top_k": 10}), GuardSettings(), random.Random(0), set())
    assert d.decision == "reverted" and d.next_config.neighbour_weight == weak.neighbour_weight
    assert d.next_config.semantic_top_k == 10

    # off: the old behaviour, the next round builds on the no-gain round
    assert not check_regression(scores, GuardSettings(parsimony=False)).reverted
    # the same lever with a significant gain is the new best
    gained = [RoundScore(0, 0.30, weak, accepted=True), RoundScore(1, 0.36, free_ride, accepted=True)]
    assert not check_regression(gained, GuardSettings()).reverted
    # a no-gain change that switches nothing on is still built on
    wider, _ = weak.with_changes({"max_context": 12})
    plain = [RoundScore(0, 0.30, weak, accepted=True), RoundScore(1, 0.31, wider)]
    assert not check_regression(plain, GuardSettings()).reverted


def test_a_run_started_before_parsimony_goes_on_without_it():
    assert GuardSettings.from_dict({"alpha": 0.05}).parsimony is False
    assert GuardSettings.from_dict(GuardSettings().as_dict()).parsimony is True


def _run(tmp_path, *extra: str):
    """Two evidence rounds on synth from a start so narrow (one keyword line) that the rubric's
    first move (the late view) gains significantly."""
    from typer.testing import CliRunner

    from evolvemem.cli.main import app

    tmp_path.mkdir(parents=True, exist_ok=True)
    start = tmp_path / "narrow.toml"
    start.write_text("semantic_top_k = 0\nkeyword_top_k = 1\nmax_context = 1\n", encoding="utf-8")
    out = tmp_path / "run"
    args = ["run", "--benchmark", "synth", "--rounds", "2", "--diagnoser", "rubric", "--init", str(start)]
    args += ["--objective", "evidence", "--context-tokens", "600", "--out", str(out), "-q", *extra]
    return out, CliRunner().invoke(app, args)


def _json(args: list[str]) -> dict:
    import json

    from typer.testing import CliRunner

    from evolvemem.cli.main import app

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output.strip().splitlines()[-1])


def _rounds(out) -> list[dict]:
    return _json(["show", str(out), "--json"])["rounds"]


def test_every_dev_round_is_timed_and_a_round_over_max_ms_is_refused(tmp_path):
    free, result = _run(tmp_path / "free")
    assert result.exit_code == 0, result.output
    rounds = _rounds(free)
    assert all(r["retrieval_ms"] > 0 and r["bm25_ms"] > 0 for r in rounds)
    assert rounds[1]["accepted"]  # without a limit the late view is the new best
    ablated = _json(["ablate", str(free), "--split", "dev", "-q", "--json"])["rows"]
    late = next(r for r in ablated if r["mechanism"] == "late_top_k")
    assert ablated[0]["retrieval_ms"] > 0 and late["retrieval_ms"] > 0 and late["lever_ms"] is not None

    limited, result = _run(tmp_path / "limited", "--max-ms", "0.000001")
    assert result.exit_code == 0, result.output
    assert "the start config is over --max-ms" in result.output
    rounds = _rounds(limited)
    assert not any(r["accepted"] for r in rounds[1:])  # nothing under the limit can become the best
    assert "over --max-ms" in rounds[1]["verdict"] and "over --max-ms" in rounds[1]["reason"]
    assert rounds[1]["decision"] == "reverted"


def test_a_max_ms_that_is_not_positive_is_one_line(tmp_path):
    _, result = _run(tmp_path, "--max-ms", "0")
    assert result.exit_code == 2
    assert "--max-ms must be more than 0" in result.output
