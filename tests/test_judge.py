"""The LLM judge through the real LLM layer against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evolvemem.llm import LLMClient, ResponseCache
from evolvemem.prompts import load_prompt
from evolvemem.contracts.usage import Usage
from evolvemem.scoring.judge import LLMJudge, verdict_from_text, verdict_score
from tests.fake_llm_server import FakeLLMServer, fake_llm, last_user_message  # noqa: F401 - fixture


def field(prompt: str, label: str) -> str:
    """The value the judge prompt shows after `label:` (last occurrence: the case, not an example)."""
    return re.findall(rf"^{label}: (.*)$", prompt, flags=re.MULTILINE)[-1]


def toy_judge(body: dict) -> str:
    """A stand-in model: correct when the reference's words all occur in the prediction."""
    prompt = last_user_message(body)
    gold_words = set(field(prompt, "Reference answer").lower().split())
    predicted = set(re.findall(r"\w+", field(prompt, "Prediction").lower()))
    return json.dumps({"verdict": "correct" if gold_words <= predicted else "wrong"})


@pytest.fixture
def judge(fake_llm: FakeLLMServer, tmp_path: Path) -> LLMJudge:  # noqa: F811 - fixture argument
    client = LLMClient(
        "openai/fake-model",
        api_base=fake_llm.url,
        cache=ResponseCache(tmp_path / "llm"),
        backoff_base=0.01,
        max_retries=1,
        timeout=5.0,
    )
    return LLMJudge(client)


def test_judge_scores_through_the_server(fake_llm, judge):  # noqa: F811
    fake_llm.responder = toy_judge
    score, cost = judge.judge("Which city did Tomasz move to?", "Lisbon", "He moved to Lisbon in May.")
    assert score == 1
    assert cost.calls == 1 and cost.prompt_tokens > 100 and cost.completion_tokens == 2
    assert judge.judge("Which city did Tomasz move to?", "Lisbon", "He moved to Porto.")[0] == 0

    body = fake_llm.requests[0]
    prompt = last_user_message(body)
    assert field(prompt, "Question") == "Which city did Tomasz move to?"
    assert field(prompt, "Reference answer") == "Lisbon"
    assert field(prompt, "Prediction") == "He moved to Lisbon in May."
    assert body["response_format"] == {"type": "json_object"} and body["temperature"] == 0.0
    assert judge.client.usage.snapshot()["judge"].calls == 2


def test_repeated_judgement_comes_from_the_cache(fake_llm, judge):  # noqa: F811
    fake_llm.responder = toy_judge
    first = judge.judge("Which city?", "Lisbon", "Lisbon")
    second = judge.judge("Which city?", "Lisbon", "Lisbon")
    assert first[0] == second[0] == 1
    assert second[1] == Usage(cache_hits=1)
    assert fake_llm.request_count == 1


def test_fenced_uppercase_verdict_is_understood(fake_llm, judge):  # noqa: F811
    fake_llm.responder = lambda body: 'Verdict below.\n```json\n{"Verdict": "CORRECT"}\n```'
    assert judge.judge("q", "a", "a")[0] == 1


def test_non_json_reply_falls_back_to_the_label_word(fake_llm, judge):  # noqa: F811
    fake_llm.responder = lambda body: "The prediction is WRONG."
    result = judge.judge_detailed("q", "cello", "accordion")
    assert result.score == 0 and result.error == ""
    assert fake_llm.request_count == 2  # one re-ask for JSON before falling back
    assert result.cost.calls == 2


def test_reply_without_a_verdict_is_not_scored(fake_llm, judge):  # noqa: F811
    fake_llm.responder = lambda body: '{"score": 5, "reason": "close enough"}'
    result = judge.judge_detailed("q", "a", "b")
    assert result.score is None and "no verdict" in result.error and result.cost.calls == 1


def test_failed_judge_call_returns_none(fake_llm, judge):  # noqa: F811
    fake_llm.fail_next(500, count=5)
    result = judge.judge_detailed("q", "a", "b")
    assert result.score is None and "HTTP 500" in result.error
    assert result.cost == Usage()
    assert judge.client.usage.snapshot()["judge"].failures == 1


def test_blank_prediction_is_wrong_without_a_call(fake_llm, judge):  # noqa: F811
    assert judge.judge("q", "Lisbon", "   ") == (0, Usage())
    assert fake_llm.request_count == 0


def test_version_follows_model_and_prompt(judge):
    assert judge.version.startswith("openai/fake-model:") and judge.version.endswith(load_prompt("judge").version)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"verdict": "correct"}, 1),
        ({"verdict": "wrong"}, 0),
        ({"verdict": "Incorrect."}, 0),
        ({"VERDICT": " Correct "}, 1),
        ({"label": "wrong"}, 0),
        ("CORRECT", 1),
        ({"verdict": "maybe"}, None),
        ({"verdict": 1}, None),
        ({"a": "correct", "b": "wrong"}, None),
        ([1, 2], None),
    ],
)
def test_verdict_score(value, expected):
    assert verdict_score(value) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The prediction is correct.", 1),
        ("INCORRECT", 0),
        ("wrong", 0),
        ("correct or wrong, hard to say", None),
        ("it is incorrectly formatted", None),
        ("", None),
    ],
)
def test_verdict_from_text(text, expected):
    assert verdict_from_text(text) == expected


def test_judge_prompt_has_placeholders_and_no_benchmark_people(locomo_path):
    text = load_prompt("judge").text
    for placeholder in ("$question", "$gold", "$prediction"):
        assert text.count(placeholder) == 1
    names = set()
    for sample in json.loads(locomo_path.read_text(encoding="utf-8")):
        names.update({sample["conversation"]["speaker_a"], sample["conversation"]["speaker_b"]})
    assert names and not [name for name in names if re.search(rf"\b{re.escape(name)}\b", text)]


@pytest.mark.parametrize(
    ("reply", "expected", "requests"),
    [
        ('{"label": "CORRECT"}', 1, 1),
        ('{"label": "WRONG"}', 0, 1),
        ('{"reason": "same city, other words", "label": "CORRECT"}', 1, 1),
        ("CORRECT", 1, 2),  # not JSON: asked again once, then read for its one label word
        ("The generated answer is WRONG.", 0, 2),
    ],
)
def test_judge_reads_json_and_plain_text_verdicts(fake_llm, judge, reply, expected, requests):  # noqa: F811
    fake_llm.responder = lambda body: reply
    result = judge.judge_detailed("Which city did Tomasz move to?", "Lisbon", "Lisbon, in May")
    assert (result.score, result.error) == (expected, "") and fake_llm.request_count == requests


def test_malformed_judge_reply_is_refused_with_one_line(fake_llm, judge):  # noqa: F811
    fake_llm.responder = lambda body: "Sure! Here is the grade: {not valid json at all"
    result = judge.judge_detailed("Which city did Tomasz move to?", "Lisbon", "Porto")
    assert result.score is None and fake_llm.request_count == 2
    assert result.error and "\n" not in result.error and "did not reply with JSON" in result.error


def test_preflight_says_why_the_judge_cannot_be_asked(fake_llm, judge):  # noqa: F811
    assert judge.unreachable() is None
    fake_llm.fail_next(500, count=5)
    judge.client.cache = None  # the first probe's reply is cached: ask the server again
    problem = judge.unreachable()
    assert problem and "HTTP 500" in problem


def test_judge_prompt_cites_its_protocol_in_a_comment_the_model_never_reads():
    from evolvemem.paths import prompts_dir

    on_disk = (prompts_dir() / "judge.md").read_text(encoding="utf-8")
    assert on_disk.startswith("<!--") and "arXiv:2504.19413" in on_disk and "mem0ai/mem0" in on_disk
    sent = load_prompt("judge").text
    assert sent.startswith("Your task is to label") and "arXiv" not in sent and "<!--" not in sent
