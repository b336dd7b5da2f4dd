"""The `evolve` command end to end on the seeded synth benchmark: eval, run, show, diff, runs,
transfer, resume after an interruption, the run lock, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result


def last_json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def evolved_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "synth-rubric"
    result = invoke(
        "run",
        "--benchmark",
        "synth",
        "--rounds",
        "2",
        "--objective",
        "balanced",
        "--out",
        str(out),
        "--json",
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    return out


def test_help_is_fast_and_lists_the_commands():
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "evolvemem.cli.main", "--help"], capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    assert proc.returncode == 0
    for command in ("space", "eval", "run", "runs", "show", "diff", "transfer"):
        assert command in proc.stdout
    # heavy libraries are imported lazily (generous bound for a loaded 2-core machine)
    assert elapsed < 8


def test_space_json_lists_every_dimension():
    result = invoke("space", "--json")
    payload = last_json(result.stdout)
    names = {d["name"] for d in payload["dimensions"]}
    assert {"semantic_top_k", "fusion_mode", "answer_style"} <= names
    stages = {d["name"]: d["stage"] for d in payload["dimensions"]}
    assert stages["answer_style"] == "answer" and stages["semantic_top_k"] == "retrieval"
    assert payload["schema"]["title"] == "RetrievalConfig"


def test_eval_writes_every_record_and_ends_with_json(tmp_path):
    out = tmp_path / "eval"
    result = invoke("eval", "--benchmark", "synth", "--config", "default", "--out", str(out), "--json", "--quiet")
    assert result.exit_code == 0, result.output
    payload = last_json(result.stdout)
    assert set(payload) >= {"overall", "by_category"}
    assert 0 <= payload["overall"]["all"] <= 1 and payload["overall"]["n"] == 60
    con = duckdb.connect(str(out / "run.duckdb"), read_only=True)
    rows = con.execute("""SELECT count(*), count(DISTINCT question_id), min(len(context_ids)), max(len(context_ids)),
                                 count(f1), count(evidence_recall), sum(len(context_views))
                          FROM question_records""").fetchone()
    assert rows[0] == rows[1] == 60
    assert 1 <= rows[2] <= rows[3] <= 12  # the default max_context
    assert rows[4] == 60 and rows[5] > 0 and rows[6] > 0
    views = con.execute("SELECT context_views[1] FROM question_records LIMIT 1").fetchone()[0]
    assert ":" in views  # e.g. "keyword:1|semantic:2"
    assert con.execute("SELECT count(*) FROM memories").fetchone()[0] > 100
    con.close()
    assert (out / "config.toml").is_file()


def test_eval_bad_input_is_one_line_and_writes_nothing(tmp_path):
    bad_config = tmp_path / "bad.toml"
    bad_config.write_text("semantic_top_k = 10\nsemantic_topk = 3\n")
    out = tmp_path / "never"
    result = invoke("eval", "--benchmark", "synth", "--config", str(bad_config), "--out", str(out))
    assert result.exit_code == 2
    assert "unknown config field 'semantic_topk'" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    result = invoke("eval", "--benchmark", "custom", "--data", str(broken), "--out", str(out))
    assert result.exit_code == 2 and "broken.json" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()
    result = invoke("eval", "--benchmark", "nope", "--out", str(out))
    assert result.exit_code == 2 and "locomo" in result.stderr


def test_run_produces_versioned_rounds_and_a_usable_best_config(evolved_run):
    for r in range(3):
        folder = evolved_run / "rounds" / f"round_{r:02d}"
        assert (folder / "config.toml").is_file() and (folder / "decision.json").is_file()
    assert (evolved_run / "rounds" / "round_00" / "diagnosis_input.json").is_file()
    best = evolved_run / "best_config.toml"
    result = json.loads((evolved_run / "result.json").read_text())
    assert set(result["test"]) == {"start", "best", "paired", "objective"} and set(result["dev"]) == {"start", "best"}
    assert result["test"]["paired"]["groups"]["main"]["n"] > 0  # held out: best − start on the same questions
    con = duckdb.connect(str(evolved_run / "run.duckdb"), read_only=True)
    phases = dict(con.execute("SELECT phase, count(*) FROM rounds GROUP BY phase").fetchall())
    assert phases == {"dev": 3, "test_start": 1, "test_best": 1}
    # the config stored for a round is the config that produced its score
    stored = con.execute("SELECT config_fingerprint FROM rounds WHERE phase = 'dev' AND round = 1").fetchone()[0]
    decided = con.execute("SELECT next_config FROM decisions WHERE round = 0").fetchone()[0]
    from evolvemem.space.config import parse_config

    assert parse_config(json.loads(decided))[0].fingerprint() == stored
    # dev questions and test questions never mix
    dev_q = {
        r[0]
        for r in con.execute("SELECT DISTINCT conversation_id FROM question_records WHERE phase = 'dev'").fetchall()
    }
    test_q = {
        r[0]
        for r in con.execute(
            "SELECT DISTINCT conversation_id FROM question_records WHERE phase LIKE 'test%'"
        ).fetchall()
    }
    assert dev_q and test_q and not dev_q & test_q
    con.close()
    evaluated = invoke(
        "eval",
        "--benchmark",
        "synth",
        "--config",
        str(best),
        "--out",
        str(evolved_run.parent / "best-eval"),
        "--quiet",
        "--json",
    )
    assert evaluated.exit_code == 0, evaluated.output


def test_show_diff_runs_and_transfer(evolved_run, tmp_path):
    shown = invoke("show", str(evolved_run), "--json")
    assert shown.exit_code == 0, shown.output
    payload = last_json(shown.stdout)
    assert [r["round"] for r in payload["rounds"]] == [0, 1, 2]
    assert {"start", "best"} <= set(payload["test"]) and payload["rounds"][0]["decision"]
    diff = invoke("diff", str(evolved_run), "0", "1", "--json")
    assert diff.exit_code == 0, diff.output
    d = last_json(diff.stdout)
    assert d["config_changes"] and "all_f1" in d and d["fixed"] + d["broken"] == len(d["flips"])
    listed = invoke("runs", str(evolved_run.parent), "--json")
    assert any(r["run_dir"] == str(evolved_run) and r["status"] == "finished" for r in last_json(listed.stdout)["runs"])
    # transfer: the evolved config, zero-shot, on another domain in the custom format
    from evolvemem.data.custom import dump_custom
    from evolvemem.data.synth import generate_synth

    domain = dump_custom(generate_synth(seed=7, n_conversations=2), tmp_path / "domain.json")
    moved = invoke(
        "transfer",
        str(evolved_run),
        "--benchmark",
        "custom",
        "--data",
        str(domain),
        "--out",
        str(tmp_path / "transfer"),
        "--json",
        "--quiet",
    )
    assert moved.exit_code == 0, moved.output
    assert last_json(moved.stdout)["overall"]["n"] == 30
    missing = invoke("show", str(tmp_path / "nothing-here"))
    assert missing.exit_code == 2 and "not a run directory" in missing.stderr


@pytest.mark.parametrize("diagnoser", ["random", "tpe"])
def test_other_diagnosers_run(diagnoser, tmp_path):
    result = invoke(
        "run",
        "--benchmark",
        "synth",
        "--rounds",
        "1",
        "--objective",
        "balanced",
        "--diagnoser",
        diagnoser,
        "--out",
        str(tmp_path / diagnoser),
        "--json",
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    payload = last_json(result.stdout)
    assert len(payload["rounds"]) == 2 and payload["rounds"][0]["changes"]


def test_resume_after_interruption_loses_nothing_and_matches_an_uninterrupted_run(tmp_path):
    from evolvemem.cli.run_cmd import run_loop
    from evolvemem.cli.ui import UI
    from evolvemem.session import RunSpec, Session
    from evolvemem.session import rounds as rounds_module
    from evolvemem.space.config import load_config

    spec = RunSpec(benchmark="synth", data=None, rounds=2, diagnoser="rubric", init="weak")
    ui = UI(quiet=True)
    reference = run_loop(ui, Session.create(spec, tmp_path / "reference", load_config("weak")[0], ui))

    calls = {"n": 0}
    original = rounds_module.evaluate

    def interrupting_evaluate(*args, **kwargs):
        on_record = kwargs.get("on_record")

        def counting(record):
            calls["n"] += 1
            if kwargs.get("round_no") == 1 and calls["n"] > 40:
                raise KeyboardInterrupt
            if on_record:
                on_record(record)

        kwargs["on_record"] = counting
        return original(*args, **kwargs)

    rounds_module.evaluate = interrupting_evaluate
    try:
        with pytest.raises(KeyboardInterrupt):
            run_loop(ui, Session.create(spec, tmp_path / "crashy", load_config("weak")[0], ui))
    finally:
        rounds_module.evaluate = original
    con = duckdb.connect(str(tmp_path / "crashy" / "run.duckdb"), read_only=True)
    # answered records (rung 0's contexts of round 1 are no answers)
    partial = con.execute(
        "SELECT round, count(*) FROM question_records WHERE phase NOT LIKE 'contexts%' GROUP BY round ORDER BY round"
    ).fetchall()
    con.close()
    assert partial[0] == (0, 30) and partial[1][0] == 1 and 0 < partial[1][1] < 30

    resumed = invoke("run", "--resume", str(tmp_path / "crashy"), "--json", "--quiet")
    assert resumed.exit_code == 0, resumed.output
    payload = last_json(resumed.stdout)
    con = duckdb.connect(str(tmp_path / "crashy" / "run.duckdb"), read_only=True)
    dupes = con.execute("""SELECT count(*) FROM (SELECT round, phase, question_id, count(*) AS c
                           FROM question_records GROUP BY ALL HAVING c > 1)""").fetchone()[0]
    con.close()
    assert dupes == 0
    assert [r["dev_score"] for r in payload["rounds"]] == [r["dev_score"] for r in reference["rounds"]]
    assert payload["best_round"] == reference["best_round"] and payload["test"] == reference["test"]


def test_two_processes_cannot_write_one_run(evolved_run):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys, time
        from evolvemem.store import RunStore
        store = RunStore({str(evolved_run)!r})
        print("locked", flush=True)
        time.sleep(30)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = subprocess.run(
            [sys.executable, "-m", "evolvemem.cli.main", "run", "--resume", str(evolved_run)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode != 0
        assert "open in another evolvemem process" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    finally:
        holder.kill()
        holder.wait()


def test_ablation_variants_switch_each_mechanism_off_everywhere():
    from evolvemem.loop.ablate import ablation_variants
    from evolvemem.space.config import parse_config

    cfg, _ = parse_config(
        {
            "semantic_top_k": 0,
            "keyword_top_k": 8,
            "enable_entity_swap": True,
            "per_category_overrides": {"temporal": {"semantic_top_k": 12, "answer_style": "temporal"}},
        }
    )
    variants = {v.label: v.config for v in ablation_variants(cfg)}
    assert {"semantic_top_k", "keyword_top_k", "enable_entity_swap", "overrides[temporal]"} <= set(variants)
    assert variants["semantic_top_k"].for_type("temporal").semantic_top_k == 0
    assert variants["semantic_top_k"].for_type("temporal").answer_style == "temporal"
    assert variants["overrides[temporal]"].overrides() == {}
    assert "reflection_rounds" not in variants  # off already: nothing to ablate


def test_ablate_prints_a_delta_table(evolved_run):
    result = invoke("ablate", str(evolved_run), "--json", "--quiet")
    assert result.exit_code == 0, result.output
    payload = last_json(result.stdout)
    rows = payload["rows"]
    assert rows[0]["mechanism"] == "full config" and len(rows) >= 2
    for row in rows[1:]:
        assert row["delta_all_f1"] == pytest.approx(row["all_f1"] - rows[0]["all_f1"])
    again = invoke("ablate", str(evolved_run), "--json", "--quiet")  # recorded: the second pass reads it back
    assert [r["all_f1"] for r in last_json(again.stdout)["rows"]] == [r["all_f1"] for r in rows]


def test_option_groups_make_model_settings_by_field_name_with_the_env_model_as_default(monkeypatch):
    from evolvemem.cli.options import ScoringModels, ServedModels
    from evolvemem.session import ModelSettings

    monkeypatch.delenv("EVOLVEMEM_MODEL", raising=False)
    assert ServedModels(None, None, None, None).settings() is None  # a run directory's own models, else offline
    scoring = ScoringModels(None, None, "openai/a", "openai/j", None, "http://127.0.0.1:9/v1", 2048)
    assert scoring.settings() == ModelSettings(
        answer_model="openai/a", judge_model="openai/j", api_base="http://127.0.0.1:9/v1", context_window=2048
    )
    monkeypatch.setenv("EVOLVEMEM_MODEL", "openai/m")
    assert ServedModels(None, None, None, None).settings() == ModelSettings(model="openai/m")
    assert scoring.settings().model == "openai/m" and scoring.settings().diagnosis_model is None
