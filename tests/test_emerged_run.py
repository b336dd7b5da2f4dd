"""A lever that emerges from a diagnosis, end to end through the real CLI: the fake server's
scripted diagnosis proposes a valid bundle and invalid ones; the valid one is materialised in the
run, joins the run's action space from the next round on, is switched on, judged by the guard on paired
evidence, survives a resume, travels with the best config to `evolve eval --config`, `evolve
transfer` and `--init RUN`, and is marked by `evolve space --run`, `show`, `diff` and the report."""

from __future__ import annotations

import json
import re
import threading
import tomllib
from pathlib import Path

from evolvemem.space.action_space import files_space
from tests.fake_llm_server import FakeLLMServer, wants_json
from tests.test_llm_pipeline import (  # noqa: F401 - new_cache and seed_cache are fixtures
    MODEL,
    evolve,
    first_memory_word,
    first_user_message,
    new_cache,
    query,
    seed_cache,
)

LEVER = "wide_hybrid_recall"
BUNDLE = {"semantic_top_k": 20, "keyword_top_k": 20, "max_context": 16}
FIRST_REPLY = {
    "analysis": "Most failures never reach the candidates: the keyword view alone misses paraphrases.",
    "changes": {"max_context": 10},
    "new_dimensions": [
        {
            "name": LEVER,
            "description": "Both retrieval views wide open with a larger context.",
            "maps_to": BUNDLE,
            "rationale": "misses need both views at once",
        },
        {
            "name": "huge_context",
            "description": "Everything in context.",
            "maps_to": {"max_context": 500, "keyword_top_k": 20},
            "rationale": "x",
        },
        {
            "name": "graph_jump",
            "description": "Follow links.",
            "maps_to": {"graph_hops": 3, "keyword_top_k": 20},
            "rationale": "y",
        },
        {"name": "wide_again", "description": "The same bundle twice.", "maps_to": dict(BUNDLE), "rationale": "z"},
        {
            "name": "max_context",
            "description": "A clash.",
            "maps_to": {"keyword_top_k": 15, "max_context": 9},
            "rationale": "w",
        },
        {
            "name": "tight_recent_window",
            "description": "Newest notes first.",
            "maps_to": {"recency_weight": 0.4, "max_context": 6},
            "rationale": "copied",
        },
    ],
    "rationale": "a slightly larger context first",
}
REFUSED = {
    "huge_context": "out-of-range value for max_context",
    "graph_jump": "unknown dimension 'graph_hops'",
    "wide_again": f"duplicate of the existing bundle '{LEVER}'",
    "max_context": "name clash",
    "tight_recent_window": "copied from the prompt's example",
}


def scripted(replies: list[dict]):
    """Diagnosis n gets replies[n] (the last one after that); answers: the first memory's last word."""
    calls = {"n": 0}
    lock = threading.Lock()

    def respond(body: dict) -> str:
        prompt = first_user_message(body)
        if wants_json(body) and "Your reply" in prompt:
            with lock:
                n = calls["n"]
                calls["n"] += 1
            return json.dumps(replies[min(n, len(replies) - 1)])
        if wants_json(body):
            return "{}"
        return first_memory_word(prompt)

    return respond


def run(server: FakeLLMServer, out: Path, *extra: str):
    result = evolve(
        "run",
        "--benchmark",
        "synth",
        "--objective",
        "balanced",
        "--diagnosis-model",
        MODEL,
        "--api-base",
        server.url,
        "--diagnoser",
        "llm",
        "--out",
        str(out),
        "--quiet",
        *extra,
    )
    assert result.exit_code == 0, result.output
    return result


def configs(out: Path) -> dict[int, dict]:
    return {r["round"]: r["config"] for r in query(out, "SELECT round, config FROM rounds WHERE phase = 'dev'")}


def test_a_proposed_bundle_emerges_is_switched_on_guarded_resumed_and_travels(tmp_path: Path) -> None:
    out = tmp_path / "run"
    replies = [
        FIRST_REPLY,
        {"analysis": "use the new lever", "changes": {LEVER: True}, "rationale": "both views"},
        {"analysis": "nothing more", "changes": {"answer_style": "extractive"}, "rationale": "shorter"},
    ]
    with FakeLLMServer(scripted(replies)) as server:
        # the guard accepts any gain here: this test is about the lever's path, not the statistics
        run(server, out, "--rounds", "2", "--init", "weak", "--alpha", "0.5", "--min-effect", "0")
        diagnoses = [b for b in server.requests if wants_json(b) and "Your reply" in first_user_message(b)]
        # resume: the run's levers are read from its files (nothing of the first command stays in the process)
        resumed = run(server, out, "--resume", str(out), "--rounds", "3")
    # evolve run's own round table marks the rounds whose config used the lever
    marked = {line.split("│")[1].strip() for line in resumed.output.splitlines() if line.count("│") > 3}
    assert {"2 ✦", "3 ✦"} <= marked and "1" in marked, marked

    # materialised in the round that proposed it, in the action-space file format
    path = out / "rounds" / "round_00" / "new_dimensions" / f"{LEVER}.toml"
    table = tomllib.loads(path.read_text())[LEVER]
    assert table["type"] == "bool" and table["maps_to"] == BUNDLE and table["default"] is False
    assert sorted(p.name for p in (out / "rounds").glob("*/new_dimensions/*.toml")) == [f"{LEVER}.toml"]
    rows = {r["name"]: r for r in query(out, "SELECT * FROM proposed_dimensions")}
    assert rows[LEVER]["status"] == "materialised" and rows[LEVER]["maps_to"] == BUNDLE
    assert rows[LEVER]["file"] == f"rounds/round_00/new_dimensions/{LEVER}.toml"
    for name, why in REFUSED.items():
        assert rows[name]["status"] == "refused" and why in rows[name]["reason"], (name, rows[name])

    # the round that proposed it could not use it; the next diagnosis reads it as a lever
    assert f"- {LEVER} (bool" not in first_user_message(diagnoses[0])
    assert f"- {LEVER} (bool" in first_user_message(diagnoses[1])
    by_round = configs(out)
    assert by_round[1].get(LEVER, False) is False
    assert by_round[2][LEVER] is True  # switched on by round 1's diagnosis, through the guard
    decision_1 = query(out, "SELECT decision, changes FROM decisions WHERE round = 1")[0]
    assert decision_1["decision"] == "applied" and [c["field"] for c in decision_1["changes"]] == [LEVER]
    # the bundle really changed retrieval: round 2 packed more memories into the context
    context = {
        r["round"]: r["n"]
        for r in query(
            out,
            """SELECT round, avg(len(context_ids)) AS n
                                                            FROM question_records WHERE phase = 'dev' GROUP BY round""",
        )
    }
    assert context[2] > context[1]

    decision_2 = query(out, "SELECT accepted, significant_loss, best_round FROM decisions WHERE round = 2")[0]
    by_round = configs(out)
    # the guard kept it on the paired evidence of round 2 against the incumbent: round 3 builds on it
    assert decision_2["accepted"] and decision_2["best_round"] == 2, "the wider views win on synth"
    assert by_round[3][LEVER] is True

    best = (out / "best_config.toml").read_text()
    assert f"{LEVER} = true" in best and f"[emerged_dimensions.{LEVER}]" in best

    # `evolve eval --config` on the file alone and `evolve transfer` score it identically
    evaluated = evolve(
        "eval",
        "--benchmark",
        "synth",
        "--split",
        "test",
        "--config",
        str(out / "best_config.toml"),
        "--out",
        str(tmp_path / "eval"),
        "--quiet",
        "--json",
    )
    assert evaluated.exit_code == 0, evaluated.output
    transferred = evolve(
        "transfer",
        str(out),
        "--benchmark",
        "synth",
        "--split",
        "test",
        "--out",
        str(tmp_path / "transfer"),
        "--quiet",
        "--json",
    )
    assert transferred.exit_code == 0, transferred.output
    a, b = (json.loads(r.stdout.strip().splitlines()[-1]) for r in (evaluated, transferred))
    assert a["overall"] == b["overall"] and a["by_category"] == b["by_category"]
    sql = "SELECT question_id, prediction, context_ids FROM question_records WHERE phase = 'eval' ORDER BY question_id"
    assert query(tmp_path / "eval", sql) == query(tmp_path / "transfer", sql)
    eval_config = query(tmp_path / "eval", "SELECT config FROM rounds WHERE phase = 'eval'")[0]["config"]
    assert eval_config[LEVER] is True

    # a new run started from this one carries the lever and resumes with it
    second = tmp_path / "second"
    with FakeLLMServer(
        scripted([{"analysis": "keep", "changes": {"answer_style": "detailed"}, "rationale": "r"}])
    ) as server:
        run(server, second, "--rounds", "0", "--init", str(out))
        assert (second / "inherited_dimensions" / f"{LEVER}.toml").is_file()
        assert configs(second)[0][LEVER] is True
        run(server, second, "--resume", str(second), "--rounds", "1")
    assert configs(second)[1][LEVER] is True

    # `evolve space --run` lists base + emerged; show, diff and the report mark the rounds that used it
    base_count = len(files_space())
    listed = evolve("space", "--run", str(out), "--json")
    dims = {d["name"]: d for d in json.loads(listed.stdout)["dimensions"]}
    assert len(dims) == base_count + 1 and dims[LEVER]["emerged"] and dims[LEVER]["maps_to"] == BUNDLE
    plain = evolve("space", "--run", str(out))
    assert re.search(rf"{base_count} base \+ 1 emerged", plain.stdout) and "semantic_top_k = 20" in plain.stdout
    shown = evolve("show", str(out), "--json")
    used = {r["round"]: r["emerged_used"] for r in json.loads(shown.stdout.strip().splitlines()[-1])["rounds"]}
    assert used[0] == [] and used[1] == [] and used[2] == [LEVER]
    text = evolve("show", str(out)).stdout
    assert f"round 2 ✦ used emerged lever(s): {LEVER}" in text and "materialised" in text and "refused" in text
    diffed = evolve("diff", str(out), "1", "2", "--json")
    assert diffed.exit_code == 0, diffed.output
    payload = json.loads(diffed.stdout.strip().splitlines()[-1])
    assert payload["emerged_used"] == {"1": [], "2": [LEVER]}
    assert [c["field"] for c in payload["config_changes"]] == [LEVER]
    reported = evolve("report", str(out), "--no-png", "--json")
    assert reported.exit_code == 0, reported.output
    html = (out / "report.html").read_text()
    assert 'data-round="2"' in html and f'data-emerged="{LEVER}"' in html and "emerged-tag" in html
    assert "out-of-range value for max_context" in html


def test_a_lever_that_loses_on_paired_evidence_is_reverted(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # on synth the offline reader answers worse with long answers over a chronological context
    story = {"context_order": "chronological", "answer_style": "detailed"}
    replies = [
        {
            "analysis": "answers lack the order of events",
            "changes": {"max_context": 14},
            "new_dimensions": [
                {
                    "name": "story_mode",
                    "description": "Memories in time order, full answers.",
                    "maps_to": story,
                    "rationale": "events need their order",
                }
            ],
            "rationale": "more",
        },
        {"analysis": "try the lever", "changes": {"story_mode": True}, "rationale": "order"},
        {"analysis": "more context", "changes": {"max_context": 16}, "rationale": "more"},
    ]
    with FakeLLMServer(scripted(replies)) as server:
        run(server, out, "--rounds", "3", "--init", "default")
    by_round = configs(out)
    assert by_round[2]["story_mode"] is True
    decision = query(
        out, "SELECT decision, accepted, significant_loss, best_round, verdict FROM decisions WHERE round = 2"
    )[0]
    assert not decision["accepted"] and decision["significant_loss"] and decision["decision"] == "reverted", decision
    # the next config is built from the incumbent, where the lever is off
    assert by_round[3].get("story_mode", False) is False
    assert by_round[decision["best_round"]].get("story_mode", False) is False
    best = (out / "best_config.toml").read_text()
    assert "story_mode = true" not in best
