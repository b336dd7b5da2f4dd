"""Several budgets in one run (`--budgets`): one ranking per question cut at every budget, a best
config per budget, and commands that take a run's point at one budget.

What must hold: a candidate scored at several budgets at once gives, at each budget, exactly the
records it gives scored at that budget alone (ranked as the frontier ranks: `TokenBudget.ranked_at`);
ranked as a one-budget run ranks instead, its contexts may be ordered differently and the test states
by how much; a short run writes a config per budget that carries its budget, `show --frontier`
lists the points, `eval --config RUN --budget B` hands that point's contexts; bad budgets are one
line and exit 2, with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evolvemem.answering.contexts import evaluate_contexts
from evolvemem.benchmarks import load_benchmark
from evolvemem.contracts.records import QuestionRecord
from evolvemem.errors import ConfigError
from evolvemem.roles.factory import ModelSettings, build_roles
from evolvemem.space.budget import TokenBudget
from evolvemem.space.config import RetrievalConfig, config_to_toml, load_config
from evolvemem.store.run_store import RunStore
from evolvemem.workspace import Workspace
from tests.test_llm_pipeline import evolve, query

BUDGETS = (60, 120, 240)  # small enough to cut the synthetic conversations' contexts


@pytest.fixture(scope="module")
def workspace() -> Workspace:
    ws = Workspace(load_benchmark("synth", None), build_roles(ModelSettings()))
    ws.build()
    return ws


def evolved(preset: str) -> RetrievalConfig:
    """A preset with the ranking levers a run turns on (session prior, neighbours), so the cuts
    are of a ranking that context terms reorder."""
    config = load_config(preset)[0]
    return config.with_changes({"session_prior_weight": 0.3, "neighbour_weight": 0.5})[0]


def by_question(records: list[QuestionRecord]) -> dict[str, tuple[object, ...]]:
    return {
        r.question_id: (
            r.context_ids,
            r.context_views,
            r.cut_ids,
            r.evidence_recall,
            r.evidence_covered,
            r.evidence_retrieved,
            r.context_tokens,
        )
        for r in records
    }


@pytest.mark.parametrize("preset", ["default", "hybrid"])
def test_a_candidate_scored_at_several_budgets_equals_it_scored_at_each_alone(workspace, preset):
    config, largest = evolved(preset), max(BUDGETS)
    at = {b: TokenBudget(b, largest) for b in BUDGETS}
    together: list[QuestionRecord] = []
    questions = workspace.dataset.questions
    primary = evaluate_contexts(
        workspace,
        config.with_budget(at[BUDGETS[0]]),
        questions,
        phase="dev",
        sink=together.extend,
        cuts=[(f"dev@{b}", at[b]) for b in BUDGETS[1:]],
    )
    assert len(together) == len(questions) * len(BUDGETS)
    for b in BUDGETS:
        phase = "dev" if b == BUDGETS[0] else f"dev@{b}"
        cut = [r for r in together if r.phase == phase]
        alone = evaluate_contexts(workspace, config.with_budget(at[b]), questions).records
        assert by_question(cut) == by_question(alone), f"{preset} at {b} tokens"
        assert all(r.context_tokens <= b or len(r.context_ids) == 1 for r in cut)
    assert by_question(primary.records) == by_question([r for r in together if r.phase == "dev"])
    # the cuts differ: a larger budget holds more of the same ranking
    sizes = [sum(len(r.context_ids) for r in together if r.phase == p) for p in ("dev", "dev@120", "dev@240")]
    assert sizes[0] < sizes[1] < sizes[2]


def test_ranked_as_for_the_largest_budget_a_smaller_cut_stays_within_the_stated_bound(workspace):
    """Each view is read deeper for a larger budget (retriever `_depth`), so a frontier's smaller cut
    may order the candidates differently from a one-budget run at that budget. The bound: on these
    conversations, mean answerable evidence recall within 0.02 of the one-budget run's at every
    budget, and the largest budget's contexts identical."""
    config, largest = evolved("default"), max(BUDGETS)
    questions = workspace.dataset.questions
    for b in BUDGETS:
        frontier = evaluate_contexts(workspace, config.with_budget(TokenBudget(b, largest)), questions)
        alone = evaluate_contexts(workspace, config.with_budget(TokenBudget(b)), questions)
        gap = abs((frontier.summary.main_evidence_recall or 0) - (alone.summary.main_evidence_recall or 0))
        assert gap <= 0.02, f"at {b} tokens the frontier's recall is {gap:.4f} from a one-budget run's"
        if b == largest:
            assert by_question(frontier.records) == by_question(alone.records)


def test_one_ranking_refuses_configs_ranked_at_different_depths(workspace):
    config = evolved("default")
    question = workspace.dataset.questions[0]
    workspace.ensure_stores({"raw"})  # not left to whichever test of the module ran before on this worker
    retriever = workspace.retriever(question.conversation_id, "raw")
    with pytest.raises(ConfigError, match="share its depth"):
        retriever.retrieve_cuts(question, [config.with_budget(TokenBudget(60)), config.with_budget(TokenBudget(120))])


def test_a_ranking_depth_travels_in_the_config_file(tmp_path):
    config = load_config("default")[0].with_budget(TokenBudget(600, 3000))
    path = tmp_path / "point.toml"
    path.write_text(config_to_toml(config))
    loaded = load_config(str(path))[0]
    assert loaded.budget == TokenBudget(600, 3000) and loaded.token_limit <= 600
    assert TokenBudget(600, 600) == TokenBudget(600)  # ranked as for its own budget: the plain case
    with pytest.raises(ConfigError, match="at least the budget"):
        TokenBudget(600, 300)


@pytest.fixture(scope="module")
def frontier_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("frontier") / "run"
    budgets = ",".join(map(str, BUDGETS))
    result = evolve(
        "run", "--benchmark", "synth", "--rounds", "2", "--objective", "evidence",
        "--budgets", budgets, "--out", str(run), "--quiet", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout.strip().splitlines()[-1])
    assert [p["tokens"] for p in printed["frontier"]] == list(BUDGETS)
    return run


def contexts(run: Path, round_no: int, phase: str) -> dict[str, list[str]]:
    rows = query(
        run, "SELECT question_id, context_ids FROM question_records WHERE round = ? AND phase = ?", [round_no, phase]
    )
    assert rows, f"no records for round {round_no} {phase}"
    return {r["question_id"]: list(r["context_ids"]) for r in rows}


def test_a_frontier_run_keeps_a_best_config_per_budget(frontier_run):
    with RunStore(frontier_run, read_only=True) as store:
        spec = store.manifest()["spec"]
        dev_rounds = [r.round for r in store.round_summaries(("dev",), done_only=True)]
    assert spec["budgets"] == list(BUDGETS) and spec["token_budget"] == BUDGETS[0]
    # readers of "dev" see the primary budget alone: one record a question a round
    n_dev = query(
        frontier_run, "SELECT count(DISTINCT question_id) AS n FROM question_records WHERE phase = 'dev' AND round = 0"
    )
    counts = query(frontier_run, "SELECT round, count(*) AS n FROM question_records WHERE phase = 'dev' GROUP BY round")
    assert all(row["n"] == n_dev[0]["n"] for row in counts)
    for b in BUDGETS[1:]:  # every round is cut at every budget
        assert {
            r["round"] for r in query(frontier_run, f"SELECT DISTINCT round FROM rounds WHERE phase = 'dev@{b}'")
        } == set(dev_rounds)
    for b in BUDGETS:
        config, _ = load_config(str(frontier_run / f"best_config.{b}.toml"))
        assert config.budget == TokenBudget(b, max(BUDGETS))
    primary, _ = load_config(str(frontier_run / "best_config.toml"))
    assert primary.budget.tokens == BUDGETS[0]

    shown = evolve("show", str(frontier_run), "--frontier", "--json")
    assert shown.exit_code == 0, shown.output
    points = json.loads(shown.stdout.strip().splitlines()[-1])["points"]
    assert [p["tokens"] for p in points] == list(BUDGETS) and [p["primary"] for p in points] == [True, False, False]
    for p in points:
        assert p["dev_recall"] is not None and p["test_recall"] is not None and p["held_out"] is not None
        assert p["dev_context_tokens"] <= p["tokens"]
        assert p["dev_recall"] >= p["dev_start_recall"]  # a budget's best is never worse than its start on dev
    result = json.loads((frontier_run / "result.json").read_text())
    assert [p["best_round"] for p in result["frontier"]] == [p["best_round"] for p in points]


def test_eval_at_a_budget_hands_that_points_contexts(frontier_run, tmp_path):
    shown = evolve("show", str(frontier_run), "--frontier", "--json")
    points = {p["tokens"]: p for p in json.loads(shown.stdout.strip().splitlines()[-1])["points"]}
    b = BUDGETS[1]
    out = tmp_path / "eval"
    result = evolve(
        "eval", "--benchmark", "synth", "--config", str(frontier_run), "--budget", str(b),
        "--split", "test", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert contexts(out, 0, "eval") == contexts(frontier_run, points[b]["best_round"], f"test_best@{b}")
    # the primary budget's point is the run's best config, as without --budget
    out = tmp_path / "primary"
    evolve(
        "eval", "--benchmark", "synth", "--config", str(frontier_run), "--budget", str(BUDGETS[0]),
        "--split", "test", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert contexts(out, 0, "eval") == contexts(frontier_run, points[BUDGETS[0]]["best_round"], "test_best")
    unknown = evolve("eval", "--benchmark", "synth", "--config", str(frontier_run), "--budget", "999", "--quiet")
    assert unknown.exit_code == 2
    assert unknown.output.strip().splitlines()[-1].endswith("its budgets: 60, 120, 240")


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--budgets", "120,60"], "distinct and ascending"),
        (["--budgets", "60,60"], "distinct and ascending"),
        (["--budgets", "0,60"], "1 or more"),
        (["--budgets", "60,lots"], "whole numbers of tokens separated by commas"),
        (["--budgets", "60,120", "--context-tokens", "90"], "exclusive"),
        (["--budgets", "60,120", "--objective", "all"], "needs --objective evidence"),
    ],
)
def test_bad_budgets_are_one_line_and_nothing_is_written(tmp_path, extra, says):
    out = tmp_path / "bad"
    args = ["run", "--benchmark", "synth", "--rounds", "1", "--out", str(out), "--quiet", *extra]
    if "--objective" not in extra:
        args += ["--objective", "evidence"]
    result = evolve(*args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], result.output
    assert not out.exists()


def test_the_report_draws_the_frontier(frontier_run, tmp_path):
    result = evolve("report", str(frontier_run), "--out", str(tmp_path / "report.html"), "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert [p["tokens"] for p in out["frontier"]] == list(BUDGETS)
    html = (tmp_path / "report.html").read_text()
    assert 'id="frontier"' in html and 'id="frontier-chart"' in html
    assert html.count("<tr><td>") >= len(BUDGETS) and "best_config.&lt;budget&gt;.toml" in html
    assert out["frontier_png"] is None or Path(out["frontier_png"]).stat().st_size > 0


def test_a_half_finished_frontier_round_resumes_without_asking_twice(frontier_run, tmp_path):
    import shutil

    import duckdb

    run = tmp_path / "run"
    shutil.copytree(frontier_run, run)
    before = {p: contexts(run, 1, p) for p in ("dev", "dev@120", "dev@240")}
    ids = sorted(before["dev"])
    con = duckdb.connect(str(run / "run.duckdb"))
    # killed mid-round: the primary phase lost some questions, one cut others, one cut none
    con.execute("DELETE FROM question_records WHERE round = 1 AND phase = 'dev' AND question_id IN (?, ?)", ids[:2])
    con.execute(
        "DELETE FROM question_records WHERE round = 1 AND phase = 'dev@120' AND question_id IN (?, ?)", ids[2:4]
    )
    con.execute("UPDATE rounds SET status = 'running' WHERE round = 1 AND phase IN ('dev', 'dev@120', 'dev@240')")
    con.close()
    result = evolve("run", "--resume", str(run), "--quiet")
    assert result.exit_code == 0, result.output
    for phase, was in before.items():
        rows = query(run, "SELECT question_id FROM question_records WHERE round = 1 AND phase = ?", [phase])
        assert len(rows) == len(was), f"{phase}: a question recorded twice or lost"
        assert contexts(run, 1, phase) == was


def test_a_served_point_hands_the_contexts_its_run_measured(frontier_run, tmp_path):
    from evolvemem import Memory
    from evolvemem.data.split import split_dataset
    from tests.test_memory_api import add_turn_by_turn

    shown = evolve("show", str(frontier_run), "--frontier", "--json")
    points = {p["tokens"]: p for p in json.loads(shown.stdout.strip().splitlines()[-1])["points"]}
    b = BUDGETS[-1]
    measured = contexts(frontier_run, points[b]["best_round"], f"test_best@{b}")
    test = split_dataset(load_benchmark("synth", None), "test")
    with Memory.open(tmp_path / "memory.duckdb", frontier_run, budget=b) as memory:
        assert memory.config.budget.tokens == b and str(b) in memory.config_source
        for conversation in test.conversations.values():
            add_turn_by_turn(memory, conversation)
        served = {
            q.question_id: list(memory.context(q.conversation_id, q.text, question_type=q.question_type).memory_ids)
            for q in test.questions
        }
    assert served == measured
    with pytest.raises(ConfigError, match="its budgets: 60, 120, 240"):
        Memory.open(tmp_path / "other.duckdb", frontier_run, budget=1)
