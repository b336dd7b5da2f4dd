"""Sequential dev evaluation of a screened candidate, through the CLI against the fake OpenAI server.

The data are the generated synth conversations with every question asked four times (worded apart),
so that each (question type, conversation) cell is large enough for the looks to differ from the
screening minibatch. The fake reader tells the start config from the candidate by the length of
its context (the candidate reads 12 memories, the weak start at most 8) and answers each question
right or wrong by a rule the test sets, so which questions a round is better on is known exactly."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from evolvemem.data.custom import dump_custom, load_custom
from evolvemem.data.split import split_dataset
from evolvemem.data.synth import generate_synth
from evolvemem.loop.screening import minibatch
from evolvemem.loop.sequential import LOOK_SHARES, looks, upper_bound
from evolvemem.loop.spec import RunSpec
from evolvemem.qtypes import is_adversarial
from tests.fake_llm_server import FakeLLMServer, message_text, wants_json
from tests.test_llm_pipeline import MODEL, evolve, is_diagnosis, new_cache, query, seed_cache  # noqa: F401 (fixtures)
from tests.test_screening import answer_calls, proposing

ABSTAIN = "Not mentioned in the conversation."
WRONG = "zebra"
PROPOSAL = proposing({"keyword_top_k": 12, "max_context": 12})
Rule = Callable[[str, bool], bool]  # (question id, read by the candidate) -> answered right


def dev_questions(path: Path) -> list[Any]:
    return split_dataset(load_custom(path), "dev").questions


def reader(path: Path, right: Rule) -> Callable[[dict], str]:
    """The fake model: the diagnosis proposes a longer context; an answer is the gold answer when
    `right(question id, the candidate reads)`, else a wrong word; unanswerable questions are
    abstained from by both configs alike."""
    by_text = {q.text: q for q in load_custom(path).questions}

    def respond(body: dict) -> str:
        if is_diagnosis(body):
            return PROPOSAL
        if wants_json(body):
            return "{}"
        prompt = "".join(message_text(m) for m in body.get("messages", []))
        case = prompt.split("Now the real case.", 1)[-1]
        asked = re.findall(r"^Question: (.+)$", case, re.M)
        question = by_text.get(asked[-1].strip()) if asked else None
        if question is None or is_adversarial(question.question_type):
            return ABSTAIN
        candidate = len(re.findall(r"^\d+\. ", case, re.M)) > 8
        return question.answer if right(question.question_id, candidate) else WRONG

    return respond


def run(server: FakeLLMServer, data: Path, out: Path, *extra: str) -> Any:
    return evolve(
        "run",
        "--benchmark",
        "custom",
        "--data",
        str(data),
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
        "--screen-fraction",
        "0.25",
        "--no-cache",
        "--out",
        str(out),
        "--quiet",
        *extra,
    )


def worse_rule(data: Path) -> Rule:
    """The candidate is right on the minibatch (and gains five of its questions there, enough to
    pass the screening) and wrong on every other question the start answers right."""
    batch = {q.question_id for q in minibatch(dev_questions(data), 0.25, 0)}
    gained = sorted(batch)[:5]
    return lambda qid, candidate: qid in batch if candidate else qid not in gained


def better_rule(data: Path) -> Rule:
    """The candidate is right everywhere; the start misses five minibatch questions and half the rest."""
    batch = {q.question_id for q in minibatch(dev_questions(data), 0.25, 0)}
    gained = set(sorted(batch)[:5]) | {
        qid for i, qid in enumerate(sorted(q.question_id for q in dev_questions(data))) if qid not in batch and i % 2
    }
    return lambda qid, candidate: candidate or qid not in gained


def dev_round(out: Path) -> dict:
    return query(out, "SELECT * FROM rounds WHERE round = 1 AND phase = 'dev'")[0]


@pytest.mark.slow
def test_a_candidate_worse_beyond_its_minibatch_stops_at_the_first_look(tmp_path: Path, new_cache) -> None:
    out = tmp_path / "worse"
    dev = dev_questions(data_path := _data(tmp_path))
    with FakeLLMServer(reader(data_path, worse_rule(data_path))) as server:
        result = run(server, data_path, out)
        assert result.exit_code == 0, result.output
    screening = query(out, "SELECT outcome FROM screenings")
    assert [s["outcome"] for s in screening] == ["passed"]
    first = looks(dev, minibatch(dev, 0.25, 0), 0)[0]
    row = dev_round(out)
    asked = query(out, "SELECT question_id, calls FROM question_records WHERE round = 1 AND phase = 'dev'")
    assert {r["question_id"] for r in asked} == {q.question_id for q in first}
    assert len(asked) < len(dev) and row["n_questions"] == len(first)
    assert row["stopped_at"].startswith(f"futility at look 1 ({len(first)} of {len(dev)} dev questions)")
    # the minibatch's answers were reused: the look asked the server only for the rest
    assert sum(r["calls"] for r in asked) == len(first) - len(minibatch(dev, 0.25, 0))
    decision = query(out, "SELECT accepted, verdict FROM decisions WHERE round = 1")[0]
    assert decision["accepted"] is False and "stopped early: futility at look 1" in decision["verdict"]
    shown = evolve("show", str(out))
    assert "stopped early: futility at look 1" in shown.output
    entry = json.loads(evolve("show", str(out), "--json").stdout.strip().splitlines()[-1])["rounds"][1]
    assert entry["stopped_at"] == row["stopped_at"] and entry["accepted"] is False


@pytest.mark.slow
def test_without_sequential_every_dev_question_is_asked(tmp_path: Path, new_cache) -> None:
    out = tmp_path / "full"
    dev = dev_questions(data_path := _data(tmp_path))
    with FakeLLMServer(reader(data_path, worse_rule(data_path))) as server:
        assert run(server, data_path, out, "--no-sequential").exit_code == 0
    row = dev_round(out)
    assert row["n_questions"] == len(dev) and row["stopped_at"] is None
    manifest = query(out, "SELECT value FROM manifest WHERE key = 'spec'")[0]["value"]
    assert manifest["sequential"] is False


@pytest.mark.slow
def test_a_better_candidate_is_evaluated_on_all_of_dev_and_a_resume_between_looks_loses_nothing(
    tmp_path: Path, new_cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evolvemem.session import rounds as rounds_module

    original = rounds_module.evaluate
    dev_calls = {"n": 0}

    def interrupting(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("phase") != "dev" or kwargs.get("round_no") != 1:
            return original(*args, **kwargs)
        dev_calls["n"] += 1
        if dev_calls["n"] < 2:
            return original(*args, **kwargs)
        seen = {"n": 0}

        def counting(record: dict) -> None:  # the second look is killed after three answers
            seen["n"] += 1
            if seen["n"] == 3:
                raise KeyboardInterrupt

        kwargs["on_record"] = counting
        return original(*args, **kwargs)

    out = tmp_path / "better"
    dev = dev_questions(data_path := _data(tmp_path))
    plan = looks(dev, minibatch(dev, 0.25, 0), 0)
    with FakeLLMServer(reader(data_path, better_rule(data_path))) as server:
        monkeypatch.setattr(rounds_module, "evaluate", interrupting)
        stopped = run(server, data_path, out, "--concurrency", "1")
        assert stopped.exit_code == 130
        row = dev_round(out)
        kept = {
            r["question_id"]
            for r in query(out, "SELECT question_id FROM question_records WHERE round = 1 AND phase = 'dev'")
        }
        # left done on the first look (no stop recorded), with part of the second one answered
        assert row["status"] == "done" and row["stopped_at"] is None and row["n_questions"] == len(plan[0])
        assert len(plan[0]) < len(kept) < len(plan[1])
        before = answer_calls(server)
        monkeypatch.setattr(rounds_module, "evaluate", original)
        resumed = evolve("run", "--resume", str(out), "--quiet")
        assert resumed.exit_code == 0, resumed.output
        asked_on_resume = answer_calls(server) - before
    test = query(out, "SELECT count(*) AS n FROM question_records WHERE phase LIKE 'test%'")[0]["n"]
    assert asked_on_resume == len(dev) - len(kept) + test  # nothing asked twice
    row = dev_round(out)
    assert row["n_questions"] == len(dev) and row["stopped_at"] is None
    counts = query(
        out, "SELECT count(*) AS n FROM question_records WHERE round = 1 AND phase = 'dev' GROUP BY question_id"
    )
    assert {c["n"] for c in counts} == {1}
    assert query(out, "SELECT accepted FROM decisions WHERE round = 1")[0]["accepted"] is True


def test_the_looks_are_nested_stratified_and_lead_with_the_minibatch() -> None:
    dev = split_dataset(generate_synth(n_conversations=6), "dev").questions
    batch = minibatch(dev, 0.25, 0)
    plan = looks(dev, batch, 0)
    assert len(plan) == len(LOOK_SHARES) and plan[-1] == dev
    ids = [{q.question_id for q in look} for look in plan]
    assert {q.question_id for q in batch} <= ids[0] <= ids[1] <= ids[2]
    cells = {(q.question_type, q.conversation_id) for q in dev}
    assert {(q.question_type, q.conversation_id) for q in plan[0]} == cells
    assert plan == looks(dev, batch, 0) and len(plan[0]) < len(dev)


def test_the_futility_bound_is_a_one_sided_normal_bound() -> None:
    diffs = np.array([0.0, -1.0, 0.0, 0.0, 1.0, -1.0, 0.0, -1.0])
    expected = diffs.mean() + 1.2815515655446004 * diffs.std(ddof=1) / np.sqrt(len(diffs))
    assert upper_bound(diffs) == pytest.approx(expected)
    assert upper_bound(np.array([0.5])) == float("inf")
    assert upper_bound(np.zeros(10)) == 0.0


def _data(tmp_path: Path) -> Path:
    base = generate_synth()
    questions = [
        replace(q, question_id=f"{q.question_id}-{k}", text=f"{q.text} (asked {('once', 'again', 'anew', 'thus')[k]})")
        for q in base.questions
        for k in range(4)
    ]
    return dump_custom(replace(base, questions=questions), tmp_path / "fourfold.json")


def test_sequential_is_on_by_default_and_off_for_a_run_started_before_it() -> None:
    spec = RunSpec(benchmark="synth", data=None, diagnoser="rubric")
    assert spec.sequential is True
    stored = spec.as_dict()
    assert RunSpec.from_dict(stored).sequential is True
    del stored["sequential"]
    assert RunSpec.from_dict(stored).sequential is False


def test_the_next_round_builds_on_the_incumbent_after_a_stopped_round() -> None:
    from evolvemem.loop.guard import RoundScore, check_regression
    from evolvemem.loop.spec import GuardSettings
    from evolvemem.space.config import load_config

    weak = load_config("weak")[0]
    wider = weak.with_changes({"max_context": 12})[0]
    start = RoundScore(0, 0.5, weak, accepted=True)
    stopped = RoundScore(1, 0.52, wider, stopped_at="futility at look 1 (60 of 120 dev questions)")
    regression = check_regression([start, stopped], GuardSettings())
    assert regression.reverted and regression.base is start and "stopped early" in regression.reason
    built_on = check_regression([start, RoundScore(1, 0.52, wider)], GuardSettings())
    assert not built_on.reverted and built_on.base.round == 1
