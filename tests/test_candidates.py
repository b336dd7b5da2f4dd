"""Parallel candidates (`--candidates K`): K configs screened per round, Holm's correction over
them, one guard decision at alpha / K. Runs in process against the fake OpenAI server (the ray
executor runs the same batch in parallel: tests/test_ray.py, benchmarks/scale.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evolvemem.contracts.diagnosis import DiagnosisInput, ScoreSummary
from evolvemem.diagnosers.tpe import TPEDiagnoser
from evolvemem.loop.candidates import gain_p, holm_levels
from evolvemem.loop.screening import OUTRANKED, PASSED
from evolvemem.space.config import load_config
from tests.fake_llm_server import FakeLLMServer
from tests.test_llm_pipeline import MODEL, evolve, make_responder, query


def test_holm_step_down_tests_the_ith_smallest_p_at_alpha_over_k_minus_i_and_stops_at_the_first_failure() -> None:
    levels = holm_levels([0.3, 0.02, 0.07, 0.08], alpha=0.2, comparisons=4)
    assert levels[1] == (pytest.approx(0.05), True)  # smallest: 0.2 / 4, passes
    assert levels[2] == (pytest.approx(0.2 / 3), True)  # next: 0.07 ≥ 0.0667 fails — the step-down stops
    assert levels[3] == (pytest.approx(0.1), False)  # 0.08 < 0.1, but not reached: it cannot pass
    assert levels[0] == (pytest.approx(0.2), False)
    assert [reached for _, reached in holm_levels([0.01, 0.04, 0.03], alpha=0.2, comparisons=3)] == [True] * 3


def test_tpe_asks_candidates_together_and_learns_each_one() -> None:
    base = load_config("weak")[0]
    inp = DiagnosisInput(
        round=1,
        objective="balanced",
        score=0.1,
        overall=ScoreSummary(),
        by_type=[],
        by_category=[],
        taxonomy={},
        taxonomy_by_type={},
        worst_cases=[],
        config={},
        overrides={},
    )
    tpe = TPEDiagnoser(seed=0)
    first = tpe.diagnose(inp, base).proposal
    others = tpe.alternatives(inp, base, 3)
    configs = [p.apply_to(base)[0] for p in [first, *others]]
    assert len({c.fingerprint() for c in configs}) == 4
    for i, config in enumerate(configs):
        tpe.observe(config, 0.1 * i)
    states = [t.state.name for t in tpe.study.trials]
    assert states == ["COMPLETE"] * 4
    tpe.diagnose(inp, base)  # a new round: a trial still open from an unevaluated ask would be closed first
    assert [t.state.name for t in tpe.study.trials] == ["COMPLETE"] * 4 + ["RUNNING"]


def test_four_candidates_are_screened_each_round_and_the_guard_corrects_for_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    out = tmp_path / "run"
    with FakeLLMServer(make_responder()) as server:
        result = evolve(
            "run",
            "--benchmark",
            "synth",
            "--rounds",
            "2",
            "--model",
            MODEL,
            "--api-base",
            server.url,
            "--extract-model",
            "offline",
            "--diagnoser",
            "rubric",
            "--no-cache",
            "--candidates",
            "4",
            "--out",
            str(out),
            "--quiet",
        )
        assert result.exit_code == 0, result.output
    screenings = query(out, "SELECT * FROM screenings ORDER BY round, attempt")
    decisions = {d["round"]: d for d in query(out, "SELECT * FROM decisions")}
    assert sorted({s["round"] for s in screenings}) == [1, 2]
    for round_no in (1, 2):
        mine = [s for s in screenings if s["round"] == round_no]
        assert [s["attempt"] for s in mine] == [1, 2, 3, 4]
        assert mine[0]["source"] == "proposal" and {s["source"] for s in mine[1:]} <= {"alternative", "exploration"}
        incumbent = query(
            out, "SELECT config_fingerprint FROM rounds WHERE round = ? AND phase = 'dev'", [mine[0]["compared_with"]]
        )[0]["config_fingerprint"]
        assert len({s["config_fingerprint"] for s in mine} | {incumbent}) == 5  # four new configs
        assert sum(s["outcome"] == PASSED for s in mine) <= 1
        assert all(s["outcome"] != OUTRANKED or any(o["outcome"] == PASSED for o in mine) for s in mine)
        # each candidate that reached the minibatch was held to its Holm step-down level
        levels = holm_levels([gain_p(s["paired"], "balanced", 0.005) for s in mine], alpha=0.2, comparisons=4)
        for screening, (level, _) in zip(mine, levels):
            if screening["rung"] and screening["rung"] >= 1:
                assert screening["alpha"] == pytest.approx(level)
        # one guard decision, made for the best of four
        decision = decisions[round_no]
        assert decision["comparisons"] == 4 and "best of 4 candidates" in decision["verdict"]
    assert decisions[1]["candidates"] and len(decisions[1]["candidates"]) == 3
    shown = evolve("show", str(out))
    assert shown.exit_code == 0, shown.output


def test_candidates_need_a_minibatch_to_compare_them_on(tmp_path: Path) -> None:
    result = evolve(
        "run",
        "--benchmark",
        "synth",
        "--candidates",
        "4",
        "--objective",
        "balanced",
        "--screen-fraction",
        "0",
        "--out",
        str(tmp_path / "run"),
    )
    assert result.exit_code == 2 and "--screen-fraction" in result.output
    assert not (tmp_path / "run").exists()
