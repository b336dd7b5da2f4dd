"""End-of-run pruning (loop/pruning.py), end to end through the real CLI: a scripted diagnosis
switches on two levers at once, one that gains (the late view, from a start that reads a single
keyword line) and one that rides along; the guard keeps the round for its gain, and after the last
round pruning tries each lever off on dev, keeps the one whose loss is significant and drops the
other — as stored rounds with decisions that `show`, the best config and a resume agree on."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from evolvemem.loop.pruning import next_lever, without_lever
from evolvemem.space.config import load_config
from tests.fake_llm_server import FakeLLMServer, wants_json
from tests.test_llm_pipeline import (  # noqa: F401 - new_cache and seed_cache are fixtures
    MODEL,
    evolve,
    first_user_message,
    new_cache,
    query,
    seed_cache,
)

GAINING, RIDING = "late_top_k", "reinforcement_weight"
PROPOSAL = {"analysis": "one keyword line misses most evidence", "changes": {GAINING: 10, RIDING: 0.3}}


def test_without_lever_switches_it_off_everywhere_and_keeps_the_budget():
    weak = load_config("weak")[0]
    on, _ = weak.with_changes({"neighbour_weight": 0.2})
    on, _ = on.with_changes({"neighbour_weight": 0.4, "enable_query_decomposition": True}, question_type="temporal")
    off = without_lever(on, "neighbour_weight")
    assert off.neighbour_weight == 0.0 and off.overrides()["temporal"]["neighbour_weight"] == 0.0
    assert off.overrides()["temporal"]["enable_query_decomposition"] is True and off.budget == on.budget
    # the levers `on` switched on that `weak` had off, in the space's order, each tried once
    assert next_lever(on, weak, set()) == "neighbour_weight"
    assert next_lever(on, weak, {"neighbour_weight"}) == "enable_query_decomposition"
    assert next_lever(on, weak, {"neighbour_weight", "enable_query_decomposition"}) is None
    assert next_lever(weak, weak, set()) is None


def _scripted(body: dict) -> str:
    if wants_json(body) and "Your reply" in first_user_message(body):
        return json.dumps(PROPOSAL)
    return "{}"


def _run(server: FakeLLMServer, start: Path, out: Path, *extra: str):
    args = ["run", "--benchmark", "synth", "--objective", "evidence", "--context-tokens", "600"]
    args += ["--init", str(start), "--diagnoser", "llm", "--diagnosis-model", MODEL, "--api-base", server.url]
    return evolve(*args, "--out", str(out), "-q", *extra)


def test_a_lever_that_rides_along_a_gain_is_pruned_and_one_that_pays_is_kept(tmp_path: Path) -> None:
    start = tmp_path / "narrow.toml"
    start.write_text("semantic_top_k = 0\nkeyword_top_k = 1\nmax_context = 1\n", encoding="utf-8")
    out = tmp_path / "run"
    with FakeLLMServer(_scripted) as server:
        result = _run(server, start, out, "--rounds", "1")
        assert result.exit_code == 0, result.output
        decisions = {r["round"]: r for r in query(out, "SELECT * FROM decisions ORDER BY round")}
        assert decisions[1]["accepted"], decisions[1]["verdict"]  # the gain carries the rider in
        assert decisions[1]["decision"] == "stopped"
        # pruning after the last round: the late view first (the space's order), then the rider
        assert decisions[2]["decision"] == "lever_pays" and GAINING in decisions[2]["reason"]
        assert not decisions[2]["accepted"] and decisions[2]["compared_with"] == 1
        assert decisions[3]["decision"] == "pruned" and RIDING in decisions[3]["reason"]
        assert decisions[3]["accepted"] and decisions[3]["compared_with"] == 1 and decisions[3]["paired"]
        assert [(c["field"], c["new"]) for c in decisions[3]["changes"]] == [(RIDING, 0.0)]  # what it tried off
        configs = {r["round"]: r["config"] for r in query(out, "SELECT round, config FROM rounds WHERE phase = 'dev'")}
        assert configs[2][GAINING] == 0 and configs[2][RIDING] == 0.3
        assert configs[3][GAINING] == 10 and configs[3][RIDING] == 0.0

        shown = json.loads(evolve("show", str(out), "--json").output.strip().splitlines()[-1])
        assert shown["best_round"] == 3
        assert [r["decision"] for r in shown["rounds"]][-2:] == ["lever_pays", "pruned"]
        best = tomllib.loads((out / "best_config.toml").read_text())
        assert best[GAINING] == 10 and best[RIDING] == 0.0
        held = query(out, "SELECT DISTINCT round FROM rounds WHERE phase = 'test_best'")
        assert [r["round"] for r in held] == [3]  # the held-out figure is the pruned config's

        # a resume re-decides nothing: the same rounds, the same decisions
        before = query(out, "SELECT round, decision, accepted, reason FROM decisions ORDER BY round")
        again = _run(server, start, out, "--resume", str(out), "--rounds", "1")
        assert again.exit_code == 0, again.output
        assert query(out, "SELECT round, decision, accepted, reason FROM decisions ORDER BY round") == before

        # --no-parsimony: no pruning rounds, the rider stays in the best config
        loose = tmp_path / "loose"
        assert _run(server, start, loose, "--rounds", "1", "--no-parsimony").exit_code == 0
        assert [r["round"] for r in query(loose, "SELECT round FROM decisions ORDER BY round")] == [0, 1]
        assert tomllib.loads((loose / "best_config.toml").read_text())[RIDING] == 0.3
