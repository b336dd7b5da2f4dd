"""The answer-side levers (issue 43): each changes the reader's prompt or its answer as its
dimension declares, and the defaults leave both as they were.

Real parts only: the registry's files, the prompt files, an LLM reader over litellm against the
fake OpenAI-compatible server on 127.0.0.1 (the prompt it receives is what the test reads), and
a real workspace (bundled embedder, bm25s) over an invented conversation for the answer path."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from evolvemem.answering.answer_rules import (
    AnswerRules,
    answer_rules,
    apply_answer_rules,
    cap_words,
    prompt_levers,
    supported,
)
from evolvemem.answering.relative_dates import resolve_answer_dates, resolve_phrase
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.roles import ABSTENTION_TEXT, NO_PROMPT_LEVERS, AnswerResult, PromptLevers
from evolvemem.data.models import Conversation, Dataset, Question, Session, Turn
from evolvemem.prompts import load_prompt
from evolvemem.roles.answer_llm import ANSWER_STYLES, render_answer_prompt, split_quote
from evolvemem.roles.context_format import CONTEXT_LAYOUTS, format_context, format_question_date
from evolvemem.space.action_space import files_space
from evolvemem.space.config import load_config

FakeLLMServer = pytest.importorskip("tests.fake_llm_server").FakeLLMServer
last_user_message = pytest.importorskip("tests.fake_llm_server").last_user_message
llm = pytest.importorskip("evolvemem.llm")

LEVERS = ("quote_then_answer", "abstain_when", "answer_max_words", "resolve_relative_dates")

CONTEXT = [
    MemoryUnit(
        "m1",
        "c1",
        "Tomasz: I repainted the garden shed last week, it took ages.",
        session_id="s1",
        timestamp=datetime(2025, 3, 14, 14),
        persons=("Tomasz",),
        source_turn_ids=("D1:1",),
    ),
    MemoryUnit(
        "m2",
        "c1",
        "Priya Raman: We had a picnic by the lake yesterday!",
        session_id="s2",
        timestamp=datetime(2025, 4, 7, 10),
        persons=("Priya Raman",),
        source_turn_ids=("D2:1",),
    ),
    MemoryUnit(
        "m3",
        "c1",
        "Priya Raman: I went to a jazz concert on Friday, the saxophonist was superb.",
        session_id="s3",
        timestamp=datetime(2025, 5, 19, 10),
        persons=("Priya Raman",),
        source_turn_ids=("D3:1",),
    ),
]


def _question(text: str = "When did Tomasz repaint the garden shed?") -> Question:
    return Question("q1", "c1", text, "2", "temporal", ("a date",), ("D1:1",), datetime(2025, 9, 1))


def _config(**changes: object):
    base, _ = load_config("default")
    config, _ = base.with_changes(dict(changes))
    return config


def _rules(**changes: object) -> AnswerRules:
    return answer_rules(_config(**changes))


# ----------------------------------------------------------------------------- the registry
def test_the_levers_are_answer_stage_model_only_per_type_dimensions_off_by_default():
    space = files_space()
    for name in LEVERS:
        dim = space[name]
        assert dim.stage == "answer" and dim.needs_model and dim.per_type, name
    assert set(LEVERS) <= set(space.answer_stage())
    default = _config()
    assert prompt_levers(default) == NO_PROMPT_LEVERS
    assert not answer_rules(default).active


def test_the_default_prompt_is_byte_identical_to_the_style_template():
    question = _question()
    for style in ANSWER_STYLES:
        for layout in CONTEXT_LAYOUTS:
            today = load_prompt(f"answer_{style}").render(
                question=question.text,
                question_date=format_question_date(question.question_date),
                context=format_context(CONTEXT, layout),
            )
            assert render_answer_prompt(style, question, CONTEXT, layout, prompt_levers(_config())) == today


# ----------------------------------------------------------------------------- quote then answer
def test_quote_then_answer_adds_its_instruction_and_ends_on_a_quote_cue():
    question = _question()
    plain = render_answer_prompt("concise", question, CONTEXT)
    quoting = render_answer_prompt("concise", question, CONTEXT, levers=prompt_levers(_config(quote_then_answer=True)))
    instruction = load_prompt("lever_quote_first").text.strip()
    assert instruction not in plain and instruction in quoting
    assert quoting.index(instruction) < quoting.index("Now the real case.") < quoting.index("1. [14 March 2025]")
    assert plain.rstrip().endswith("\nAnswer:") and quoting.rstrip().endswith("\nQuote:")
    assert quoting.rstrip()[: -len("Quote:")] == plain.rstrip()[: -len("Answer:")].replace(
        "Now the real case.", f"{instruction}\n\nNow the real case."
    )
    # a style that reasons first keeps its cue (its reply ends with an "Answer:" line anyway)
    reasoned = render_answer_prompt("step_by_step", question, CONTEXT, levers=PromptLevers(quote_first=True))
    assert instruction in reasoned and reasoned.rstrip().endswith("Reasoning:")


@pytest.mark.parametrize(
    "reply, quote, answer",
    [
        ('"Tomasz: I repainted the garden shed last week, it took ages."\nAnswer: last week', "Tomasz: I", "last week"),
        ("Quote: Tomasz: I repainted the shed\n**Answer:** the shed", "Tomasz: I repainted the shed", "the shed"),
        ("Tomasz: I repainted the garden shed last week. Answer: the garden shed", "Tomasz: I", "the garden shed"),
        ("Tomasz: I repainted the garden shed last week\nthe week before 14 March 2025", "Tomasz", "the week before"),
        ("none\nAnswer: Not mentioned in the conversation.", "none", "Not mentioned in the conversation."),
        ("the garden shed", "the garden shed", "the garden shed"),
    ],
)
def test_quote_then_answer_keeps_only_the_answer_part(reply, quote, answer):
    got_quote, got_answer = split_quote(reply)
    assert got_quote.startswith(quote) and got_answer.strip().startswith(answer)
    assert "Answer" not in got_answer and "Quote" not in got_answer


@pytest.fixture
def client_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")

    def make(server) -> object:
        return llm.LLMClient(
            "openai/fake-model", api_base=server.url, cache=llm.ResponseCache(tmp_path / "llm"), max_retries=0
        )

    return make


def test_the_reader_is_scored_on_the_answer_part_of_a_quoting_reply(client_for):
    from evolvemem.roles.answer_llm import LLMAnswerer

    reply = "Tomasz: I repainted the garden shed last week, it took ages.\nthe week before 14 March 2025"
    with FakeLLMServer(responder=lambda body: reply) as server:
        answerer = LLMAnswerer(client_for(server))
        quoted = answerer.answer(_question(), CONTEXT, "concise", "list", PromptLevers(quote_first=True))
        plain = answerer.answer(_question(), CONTEXT, "concise")
        prompts = [last_user_message(body) for body in server.requests]
    assert quoted.text == "the week before 14 March 2025"
    assert quoted.notes["quote"] == "Tomasz: I repainted the garden shed last week, it took ages."
    assert plain.text == reply.replace("\n", " ")  # without the lever the reply is read whole
    assert prompts[0].rstrip().endswith("Quote:") and prompts[1].rstrip().endswith("Answer:")


def test_a_reasoning_reader_keeps_its_answer_line_and_its_quote_is_noted(client_for):
    from evolvemem.roles.answer_llm import LLMAnswerer

    reply = "The question is about Tomasz.\nQuote: Tomasz: I repainted the garden shed last week\nAnswer: last week"
    with FakeLLMServer(responder=lambda body: reply) as server:
        answerer = LLMAnswerer(client_for(server))
        result = answerer.answer(_question(), CONTEXT, "step_by_step", "list", PromptLevers(quote_first=True))
    assert result.text == "last week" and result.notes["quote"] == "Tomasz: I repainted the garden shed last week"


# ----------------------------------------------------------------------------- abstention
def test_abstain_never_asks_for_an_answer_in_the_prompt():
    instruction = load_prompt("lever_answer_anyway").text.strip()
    for style in ANSWER_STYLES:
        anyway = render_answer_prompt(style, _question(), CONTEXT, levers=prompt_levers(_config(abstain_when="never")))
        assert instruction in anyway and instruction not in render_answer_prompt(style, _question(), CONTEXT)
    assert prompt_levers(_config(abstain_when="unsupported")) == NO_PROMPT_LEVERS  # a rule, not a prompt
    assert not answer_rules(_config(abstain_when="never")).active


def test_abstain_unsupported_turns_an_answer_the_context_lacks_into_an_abstention():
    rules, q = _rules(abstain_when="unsupported"), _question("What did Priya play?")
    guessed = apply_answer_rules(AnswerResult("a violin"), rules, q, CONTEXT)
    assert guessed.text == ABSTENTION_TEXT and guessed.notes == {
        "abstained": "unsupported",
        "reader_answer": "a violin",
    }
    held = AnswerResult("jazz concert")
    assert apply_answer_rules(held, rules, q, CONTEXT) is held
    assert apply_answer_rules(AnswerResult("a violin"), _rules(), q, CONTEXT).text == "a violin"  # reader: kept
    assert supported("yes", CONTEXT) and supported("3", CONTEXT) and not supported("violin lessons", CONTEXT)
    assert supported("3 April 2025", CONTEXT)  # the memories' dates count as context


# ----------------------------------------------------------------------------- answer length
@pytest.mark.parametrize(
    "answer, words, capped",
    [
        ("the garden shed", 3, "the garden shed"),
        ("He repainted the garden shed because it was peeling badly", 8, "He repainted the garden shed"),
        ("a picnic. They went to the lake with friends and family", 6, "a picnic"),
        ("a jazz concert with a superb saxophonist and a big crowd", 4, "a jazz concert with"),
        ("jazz; also some blues and soul on the weekend", 3, "jazz"),
        ("He did it last week, it took ages", 4, "He did it last week"),
        ("It was 14 March 2025 in the garden", 3, "It was 14 March 2025"),
    ],
)
def test_answer_max_words_keeps_the_head_of_a_long_answer(answer, words, capped):
    assert cap_words(answer, words) == capped
    result = apply_answer_rules(AnswerResult(answer), _rules(answer_max_words=words), _question(), CONTEXT)
    assert result.text == capped and result.notes.get("reader_answer", answer) == answer


def test_answer_max_words_never_cuts_an_abstention():
    long_no = AnswerResult("Not mentioned in the conversation, the memories only talk about the shed.")
    assert apply_answer_rules(long_no, _rules(answer_max_words=3), _question(), CONTEXT) is long_no


# ----------------------------------------------------------------------------- relative dates
@pytest.mark.parametrize(
    "answer, hint, resolved",
    [
        ("last week", "shed", "the week before 14 March 2025"),
        ("yesterday", "picnic", "6 April 2025"),
        ("They had a picnic yesterday", "picnic", "They had a picnic 6 April 2025"),
        ("Friday", "concert", "the Friday before 19 May 2025"),
        ("on Friday", "jazz", "the Friday before 19 May 2025"),
        ("last year", "jazz concert", "2024"),
        ("two days ago", "picnic lake", "5 April 2025"),
        ("last weekend", "shed", "the weekend before 14 March 2025"),
        ("7 May 2023", "shed", "7 May 2023"),
        ("the garden shed", "shed", "the garden shed"),
        ("the last week of May 2025", "shed", "the last week of May 2025"),
        ("Last week", "shed", "the week before 14 March 2025"),
    ],
)
def test_resolve_relative_dates_counts_from_the_line_the_answer_came_from(answer, hint, resolved):
    assert resolve_answer_dates(answer, hint, CONTEXT) == resolved


def test_the_line_that_says_the_phrase_dates_it_before_a_better_matching_one():
    # "last week" is said only in the shed memory (9 June); the hint matches the concert's words
    assert resolve_answer_dates("last week", "jazz concert saxophonist", CONTEXT) == "the week before 14 March 2025"
    assert resolve_answer_dates("last week", "anything", []) == "last week"  # no dated line: unchanged


def test_resolve_phrase_forms():
    day = datetime(2025, 3, 14).date()  # a Friday
    assert resolve_phrase("last Friday", day) == "the Friday before 14 March 2025"
    assert resolve_phrase("next week", day) == "the week after 14 March 2025"
    assert resolve_phrase("last month", day) == "February 2025"
    assert resolve_phrase("today", day) == "14 March 2025"
    assert resolve_phrase("this weekend", day) == "the weekend of 14 March 2025"
    assert resolve_phrase("soon", day) is None


def test_resolve_relative_dates_acts_only_when_on():
    q = _question()
    on = apply_answer_rules(AnswerResult("last week"), _rules(resolve_relative_dates=True), q, CONTEXT)
    assert on.text == "the week before 14 March 2025" and on.notes["reader_answer"] == "last week"
    assert apply_answer_rules(AnswerResult("last week"), _rules(), q, CONTEXT).text == "last week"


# ----------------------------------------------------------------------------- through the answer path
SESSIONS = [
    ("s1", datetime(2025, 3, 14, 14), ("Tomasz", "I repainted the garden shed last week, it took ages.")),
    ("s2", datetime(2025, 4, 7, 10), ("Priya Raman", "We had a picnic by the lake yesterday!")),
]


def _dataset() -> Dataset:
    sessions = tuple(
        Session(sid, when, (Turn(f"D{n}:1", who, text, sid, when),))
        for n, (sid, when, (who, text)) in enumerate(SESSIONS, start=1)
    )
    question = Question(
        "q-shed", "c1", "When did Tomasz repaint the garden shed?", "2", "temporal", ("x",), ("D1:1",), None
    )
    return Dataset("levers-invented", {"c1": Conversation("c1", sessions, ("Priya Raman", "Tomasz"))}, [question], {})


def test_the_answer_path_sends_the_levers_prompt_and_scores_the_shaped_answer(tmp_path, monkeypatch):
    from evolvemem.answering.path import answer_path
    from evolvemem.roles.factory import ModelSettings, build_roles
    from evolvemem.workspace import Workspace

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    reply = "Tomasz: I repainted the garden shed last week, it took ages.\nAnswer: He did it last week, it took ages"
    with FakeLLMServer(responder=lambda body: reply) as server:
        models = ModelSettings(answer_model="openai/fake-model", api_base=server.url)
        ws = Workspace(_dataset(), build_roles(models, reply_cache=tmp_path / "replies"))
        ws.build()
        question = ws.dataset.questions[0]
        plain = answer_path(ws, question, _config()).final.answer
        shaped = answer_path(
            ws,
            question,
            _config(quote_then_answer=True, answer_max_words=4, resolve_relative_dates=True, abstain_when="never"),
        ).final.answer
        prompts = [last_user_message(body) for body in server.requests]
    assert len(prompts) == 2
    assert load_prompt("lever_quote_first").text.strip() not in prompts[0]
    assert load_prompt("lever_quote_first").text.strip() in prompts[1]
    assert load_prompt("lever_answer_anyway").text.strip() in prompts[1]
    assert plain.text == "He did it last week, it took ages"  # the reply's Answer line, as today
    assert shaped.text == "He did it the week before 14 March 2025"
    assert shaped.notes["reader_answer"] == "He did it last week, it took ages"


# ----------------------------------------------------------------------------- the benchmark
@pytest.mark.slow
def test_the_lever_benchmark_pairs_each_lever_with_the_base_and_resumes_from_the_reply_cache(tmp_path):
    import json
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    tiny = json.loads((repo / "tests" / "fixtures" / "locomo_tiny.json").read_text())
    twin = json.loads(json.dumps(tiny[0]))
    twin["sample_id"] = "tiny-2"
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([tiny[0], twin]))
    env = dict(os.environ, EVOLVEMEM_CACHE_DIR=str(tmp_path / "cache"), OPENAI_API_KEY="test-key")
    levers = "quote_then_answer,answer_max_words,resolve_relative_dates"

    def run(server) -> str:
        command = [sys.executable, str(repo / "benchmarks" / "answer_levers.py"), "--data", str(data)]
        command += ["--api-base", server.url, "--answer-model", "openai/fake-model", "--questions", "3"]
        done = subprocess.run(
            [*command, "--levers", levers], env=env, cwd=repo, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    reply = "Mara said it last week\nAnswer: she adopted it last week, with her sister and two friends"
    with FakeLLMServer(responder=lambda body: reply) as server:
        first = run(server)
        asked = server.request_count
        again = run(server)
        assert server.request_count == asked  # every answer came from the reply cache
    assert "3 answerable test questions" in first and "4 levers" in first
    lines = {line.split(" F1 ")[0].strip(): line for line in first.splitlines() if " F1 " in line}
    assert set(lines) == {
        "base hybrid",
        "quote_then_answer=True",
        "answer_max_words=3",
        "answer_max_words=9",
        "resolve_relative_dates=True",
    }
    assert asked == 2 * 3  # the base and the quoting row ask; rules on the answer reuse the base's replies
    for label, line in lines.items():
        paired = "Δ" in line and ("p(better)" in line or "p(worse)" in line)
        assert "n 3" in line and paired == (label != "base hybrid")
    assert "answers changed 3" in lines["answer_max_words=3"]  # every reply is longer than three words
    assert "answers changed 3" in lines["answer_max_words=9"]  # and than nine
    assert "answers changed 0" in lines["quote_then_answer=True"]  # its Answer line is the one read without it

    def figures(out: str) -> list[str]:
        return [line.rsplit("  ", 1)[0] for line in out.splitlines() if " F1 " in line]  # seconds left out

    assert figures(again) == figures(first)


# ----------------------------------------------------------------------------- the loop
def test_the_ladder_screens_the_levers_past_rung_zero_and_the_rubric_proposes_them_only_with_a_model():
    from evolvemem.diagnosers.rubric import viable_actions
    from evolvemem.loop.ladder import moves_context
    from tests.test_loop_units import make_input

    base = _config()
    for changes in ({"quote_then_answer": True}, {"abstain_when": "never"}, {"answer_max_words": 5}):
        assert not moves_context(base, base.with_changes(changes)[0])  # rung 0 cannot see them
    proposed: dict[str, list[dict[str, object]]] = {}
    for failure in ("format_mismatch", "hallucination", "wrong_abstention", "answer_error"):
        inp = make_input({failure: 60, "correct": 40}, config=base)
        proposed[failure] = [changes for _, changes in viable_actions(inp, base.space)]
        inp.fixed = tuple(name for name, dim in base.space.items() if dim.needs_model)  # answering offline
        assert not any(set(LEVERS) & set(changes) for _, changes in viable_actions(inp, base.space))
    assert {"answer_max_words": 6} in proposed["format_mismatch"]
    assert {"resolve_relative_dates": True} in proposed["format_mismatch"]
    assert {"abstain_when": "unsupported"} in proposed["hallucination"]
    assert {"abstain_when": "never"} in proposed["wrong_abstention"]
    assert {"quote_then_answer": True} in proposed["answer_error"]
