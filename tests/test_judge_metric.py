"""`evolve eval --metric judge` against the fake server: the judge column beside F1, judge accuracy
printed with its note, one warning line for answers without a verdict (exit 0) and an error when
no answer got one (exit != 0), the preflight, the reply cache; and benchmarks/judge_agreement.py
end to end on a tiny eval (the synth benchmark's invented conversations)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from benchmarks.judge_agreement import main as agreement_main, vague_answer
from evolvemem.contracts.records import RIGHT_F1
from evolvemem.prompts import load_prompt
from evolvemem.store.run_store import RunStore
from tests.fake_llm_server import FakeLLMServer, message_text
from tests.test_llm_pipeline import evolve, new_cache, query, seed_cache  # noqa: F401 - fixtures

JUDGE = "openai/fake-judge"
UNSURE = "Hard to tell from what I was given."  # no label word: unusable after the re-ask


def case_field(body: dict, label: str) -> str:
    """A field of the case the judge prompt shows (first user message: a JSON re-ask follows it)."""
    prompt = next(message_text(m) for m in body["messages"] if m.get("role") == "user")
    return re.findall(rf"^{label}: (.*)$", prompt, flags=re.MULTILINE)[-1]


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def toy_rule(gold: str, prediction: str) -> int:
    """The stand-in judge: correct when every word of the reference occurs in the prediction."""
    return int(words(gold) <= words(prediction))


def toy_judge(body: dict) -> str:
    verdict = toy_rule(case_field(body, "Reference answer"), case_field(body, "Prediction"))
    return json.dumps({"label": "CORRECT" if verdict else "WRONG"})


def unsure_on(question: str) -> bool:
    """The questions the flaky judge gives no usable reply on (a fixed third of them)."""
    return len(question) % 3 == 0


def flaky_judge(body: dict) -> str:
    return UNSURE if unsure_on(case_field(body, "Question")) else toy_judge(body)


def judged_eval(server: FakeLLMServer, out: Path, *extra: str):
    return evolve(
        "eval", "--benchmark", "synth", "--metric", "judge", "--judge-model", JUDGE,
        "--api-base", server.url, "--out", str(out), "--quiet", *extra,
    )  # fmt: skip


def answered(run_dir: Path) -> list[dict]:
    return query(
        run_dir,
        """SELECT question_id, question, question_type, gold, prediction, f1, judge FROM question_records
           WHERE NOT failed AND f1 IS NOT NULL ORDER BY question_id""",
    )


def test_metric_judge_stores_the_column_and_prints_accuracy_beside_f1(new_cache, tmp_path):  # noqa: F811
    with FakeLLMServer(responder=toy_judge) as server:
        result = judged_eval(server, tmp_path / "eval", "--json")
        assert result.exit_code == 0, result.output
        asked = server.request_count
        again = judged_eval(server, tmp_path / "again")
        assert again.exit_code == 0, again.output
        assert server.request_count == asked  # the same judgements come from the reply cache
    rows = answered(tmp_path / "eval")
    assert rows and all(r["judge"] == toy_rule(r["gold"], r["prediction"]) for r in rows)
    main = [r for r in rows if r["question_type"] != "adversarial"]
    accuracy = sum(r["judge"] for r in main) / len(main)
    payload = json.loads(result.stdout.strip().splitlines()[-1])
    assert payload["metric"] == "judge"
    assert payload["judge"]["main_accuracy"] == accuracy and payload["judge"]["unjudged"] == 0
    assert payload["judge"]["main_f1"] == sum(r["f1"] for r in main) / len(main)
    assert f"judge accuracy {accuracy:.3f} on {len(main)} answerable answers" in result.output
    assert f"our judge with {JUDGE}: not comparable to the field's GPT-4o judge figures" in result.output
    with RunStore(tmp_path / "eval", read_only=True) as store:
        manifest = store.manifest()
    assert manifest["judge"] == f"{JUDGE}:{load_prompt('judge').version}" and manifest["metric"] == "judge"

    # show and the report print it beside F1, with the note
    shown = evolve("show", str(tmp_path / "eval"), "--json")
    [evaluation] = json.loads(shown.stdout.strip().splitlines()[-1])["judge"]["evaluations"]
    assert evaluation["main_accuracy"] == accuracy and evaluation["phase"] == "eval"
    assert f"our judge with {JUDGE}" in shown.output
    assert evolve("report", str(tmp_path / "eval"), "--no-png").exit_code == 0
    html = (tmp_path / "eval" / "report.html").read_text(encoding="utf-8")
    assert 'id="judge-table"' in html and f">{accuracy:.3f}<" in html.split('id="judge-table"')[1]


def test_unusable_judge_replies_leave_null_and_one_warning_line(new_cache, tmp_path):  # noqa: F811
    with FakeLLMServer(responder=flaky_judge) as server:
        result = judged_eval(server, tmp_path / "eval")
    assert result.exit_code == 0, result.output  # a partial failure is a warning
    rows = answered(tmp_path / "eval")
    unjudged = [r for r in rows if r["judge"] is None]
    # a blank prediction is judged wrong without a call; every other unsure reply leaves NULL
    assert unjudged == [r for r in rows if unsure_on(r["question"]) and r["prediction"].strip()] != []
    assert all(r["judge"] == toy_rule(r["gold"], r["prediction"]) for r in rows if r["judge"] is not None)
    warnings = [line for line in result.output.splitlines() if "the judge gave no verdict" in line]
    assert len(warnings) == 1 and f"no verdict on {len(unjudged)} of {len(rows)} answers" in warnings[0]


def test_no_verdict_at_all_is_an_error_and_keeps_the_records(new_cache, tmp_path):  # noqa: F811
    with FakeLLMServer(responder=lambda body: UNSURE) as server:
        result = judged_eval(server, tmp_path / "eval")
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "the judge gave no verdict on any of the" in errors[0]
    assert len(answered(tmp_path / "eval")) == 60


def test_metric_judge_needs_a_judge_model(new_cache, tmp_path):  # noqa: F811
    result = evolve("eval", "--benchmark", "synth", "--metric", "judge", "--out", str(tmp_path / "eval"))
    assert result.exit_code == 2 and "--metric judge needs --judge-model" in result.output
    assert not (tmp_path / "eval").exists()
    bad = evolve("eval", "--benchmark", "synth", "--metric", "bleu", "--out", str(tmp_path / "eval"))
    assert bad.exit_code == 2 and "--metric 'bleu'" in bad.output


def test_a_judge_that_cannot_be_asked_stops_before_any_answer(new_cache, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("EVOLVEMEM_LLM_MAX_RETRIES", "0")
    with FakeLLMServer(responder=toy_judge) as server:
        server.fail_next(500, count=50)
        result = judged_eval(server, tmp_path / "eval")
        assert server.request_count == 1  # the preflight's one call
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(errors) == 1 and "the judge model cannot be asked" in errors[0]
    assert query(tmp_path / "eval", "SELECT count(*) AS n FROM question_records")[0]["n"] == 0


def test_judge_agreement_prints_the_three_figures(new_cache, tmp_path, capsys):  # noqa: F811
    run = tmp_path / "eval"
    assert evolve("eval", "--benchmark", "synth", "--out", str(run), "--quiet").exit_code == 0
    rows = [r for r in answered(run) if r["question_type"] != "adversarial" and r["prediction"]]
    # invented hand labels: the toy rule's verdict on six answers, flipped on two; one stale hash
    labelled = rows[:6]
    labels = tmp_path / "labels.jsonl"
    lines = []
    for i, r in enumerate(labelled):
        verdict = toy_rule(r["gold"], r["prediction"]) ^ (i < 2)
        digest = hashlib.sha256(r["prediction"].encode()).hexdigest()
        lines.append(
            {"question_id": r["question_id"], "prediction_sha256": digest, "verdict": ["wrong", "correct"][verdict]}
        )
    lines.append({"question_id": rows[6]["question_id"], "prediction_sha256": "0" * 64, "verdict": "correct"})
    labels.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")

    with FakeLLMServer(responder=toy_judge) as server:
        figures = agreement_main([str(run), "--judge-model", JUDGE, "--api-base", server.url, "--labels", str(labels)])
    printed = capsys.readouterr().out
    verdicts = [toy_rule(r["gold"], r["prediction"]) for r in rows]
    right = [(r["f1"] or 0) >= RIGHT_F1 for r in rows]
    agree = sum(v == int(ok) for v, ok in zip(verdicts, right)) / len(rows)
    assert figures["answers"] == len(rows) and figures["vs_f1"]["agreement"] == agree
    assert figures["vs_hand"]["n"] == 6 and figures["vs_hand"]["agreement"] == 4 / 6
    fooled = [toy_rule(r["gold"], vague_answer(r["question"], r["question_type"])) for r in rows]
    assert figures["vague"]["fooled_rate"] == sum(fooled) / len(fooled)
    assert "(a) F1 >= 0.5" in printed and "(b) hand labels (7 in file)" in printed
    assert f"fooled rate {sum(fooled) / len(fooled):.3f}" in printed and f"{agree:.3f}" in printed

    with FakeLLMServer(responder=lambda body: '{"label": "CORRECT"}') as lenient:
        figures = agreement_main([str(run), "--judge-model", "openai/lenient", "--api-base", lenient.url])
        assert figures["vague"]["fooled_rate"] == 1.0 and figures["vs_f1"]["judge_only"] == len(rows) - sum(right)
        # --questions N: N answers, the six a valid hand label reads among them
        asked = lenient.request_count
        few = ["--labels", str(labels), "--questions", "8"]
        figures = agreement_main([str(run), "--judge-model", "openai/lenient", "--api-base", lenient.url, *few])
    assert figures["answers"] == 8 and figures["vs_hand"]["n"] == 6 and figures["vague"]["judged"] == 8
    assert lenient.request_count - asked <= 1  # every verdict was in the reply cache but the preflight's


def test_vague_answers_follow_the_question_form():
    assert vague_answer("When did Ilse move?", "single_fact") == "sometime last year"
    assert vague_answer("What did Ilse buy?", "temporal") == "sometime last year"
    assert vague_answer("Who came to Tomasz's party?", "single_fact") == "a friend of theirs"
    assert vague_answer("How many kayaks does Ilse own?", "counting") == "a few"
    assert vague_answer("Does Tomasz like jazz?", "inference") == "maybe, it is hard to say"
    assert vague_answer("What did Ilse paint?", "single_fact") == "something they talked about"
