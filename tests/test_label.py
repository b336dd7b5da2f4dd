"""`evolve label` against the fake server: every check's accept and reject path, malformed replies,
trace seeds, and a resume that asks nothing twice; the offline labeller's file runs.

The fake model is scripted by content: a generation prompt gets the next scripted candidate for
its kind and session, and a check prompt is answered like a careful reader — the scripted answer
when the excerpt holds the fact's keyword, "Not mentioned in the conversation" otherwise. So
whether a check passes depends on what the check shows the model, as with a real one."""

from __future__ import annotations

import json
import re
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evolvemem.cli.main import app
from evolvemem.data.custom import load_custom
from evolvemem.data.models import Conversation, Session, Turn
from evolvemem.labelling.contexts import evidence_context
from evolvemem.labelling.checks import duplicate_check, restates_question, verbatim_check
from evolvemem.labelling.generate import fitted, generation_prompt, parse_candidate, slots_for
from evolvemem.labelling.kinds import Candidate, RejectReason
from evolvemem.labelling.relative_answers import resolve_answer, with_resolved_answer
from tests.fake_llm_server import FakeLLMServer, last_user_message

MODEL = "openai/fake-labeller"
CONVERSATION = Path(__file__).resolve().parent / "fixtures" / "label_conversation.json"
NOT_MENTIONED = "Not mentioned in the conversation"
JUNK = "Sure! Here is a question for you {not json"

# (kind, session) -> candidates in the order the generator proposes them (None: a malformed reply)
SCRIPT: dict[tuple[str, str], list[dict | None]] = {
    ("single-hop", "s1"): [
        {"question": "Which city did Priya move to?", "answer": "Lisbon", "evidence": ["pt-1"]},  # kept
        {"question": "Which city did Priya move to in May?", "answer": "Lisbon", "evidence": ["pt-1"]},  # duplicate
        {"question": "Who teaches Priya the cello?", "answer": "Ines", "evidence": ["pt-2"]},  # wrong evidence
    ],
    ("unanswerable", "s1"): [
        {"question": "What is the name of Tomasz's dog?", "answer": NOT_MENTIONED, "evidence": []},  # kept
        {"question": "Which instrument does Priya study?", "answer": NOT_MENTIONED, "evidence": []},  # answered
    ],
    ("single-hop", "s2"): [
        {
            "question": "What is Priya's cat called?",
            "answer": "Figo",
            "evidence": ["pt-7"],
        },  # leak: pt-3 names Figo too
        {
            "question": "Who said Figo knocked my music stand over twice this morning?",
            "answer": "Priya",
            "evidence": ["pt-7"],
        },  # verbatim
    ],
    ("unanswerable", "s2"): [
        None,  # not JSON, even when asked again
        {
            "question": "What is Tomasz's favourite colour?",
            "answer": NOT_MENTIONED,
            "evidence": [],
        },  # check reply malformed
        {"question": "When is Tomasz's birthday?", "answer": NOT_MENTIONED, "evidence": []},  # kept
    ],
}
# question -> (keyword the excerpt must hold, the reader's answer); a question missing here is declined
READER = {
    "Which city did Priya move to?": ("lisbon", "Lisbon"),
    "Who teaches Priya the cello?": ("ines", "Ines"),
    "Which instrument does Priya study?": ("cello", "the cello"),
    "What is Priya's cat called?": ("figo", "Figo"),
    "Where does Priya live now?": ("lisbon", "in Lisbon"),
    "When is Tomasz's birthday?": ("tomasz", "Tomasz's birthday"),  # echoes the question: no fact given
}
MALFORMED_CHECK = {"What is Tomasz's favourite colour?"}


class ScriptedModel:
    """The fake server's responder; one instance may serve several servers (a restarted model)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.given: dict[str, str] = {}  # generation prompt -> reply (a prompt asked again gets the same)
        self.next: dict[tuple[str, str], int] = {}

    def __call__(self, body: dict) -> str:
        messages = body.get("messages", [])
        if len(messages) > 1:  # the client's re-ask after a reply that was not JSON
            return JUNK
        prompt = last_user_message(body)
        if prompt.startswith("You write one test question"):
            return self.generate(prompt)
        if prompt.startswith("A user asked a memory assistant"):
            return json.dumps({"answer": "Lisbon", "evidence": ["pt-1"]})
        if prompt.startswith("Answer the question using only"):
            return self.read(prompt)
        raise AssertionError(f"unexpected prompt: {prompt[:80]}")

    def generate(self, prompt: str) -> str:
        kind = re.search(r"Write an? ([a-z-]+) question", prompt).group(1)
        session = re.search(r"^Session (\S+) \(", prompt, re.M).group(1)
        with self.lock:
            if prompt not in self.given:
                script = SCRIPT.get((kind, session), [])
                index = self.next.get((kind, session), 0)
                self.next[(kind, session)] = index + 1
                item = script[index] if index < len(script) else (script[-1] if script else None)
                self.given[prompt] = JUNK if item is None else json.dumps(item)
            return self.given[prompt]

    @staticmethod
    def read(prompt: str) -> str:
        excerpt = prompt.split("Excerpt:\n", 1)[1].split("\n\nQuestion: ", 1)[0].lower()
        question = prompt.split("\n\nQuestion: ", 1)[1].split("\n", 1)[0].strip()
        if question in MALFORMED_CHECK:
            return json.dumps({"verdict": "maybe"})
        keyword, answer = READER.get(question, ("\0", ""))
        return json.dumps({"answer": answer if keyword in excerpt else NOT_MENTIONED})


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("EVOLVEMEM_NO_LLM_CACHE", "1")  # only the journal may spare a call
    monkeypatch.setenv("EVOLVEMEM_LLM_MAX_RETRIES", "0")
    monkeypatch.delenv("EVOLVEMEM_MODEL", raising=False)


def label(server: FakeLLMServer, out: Path, *extra: str) -> Any:
    return CliRunner().invoke(
        app,
        [
            "label",
            "--data",
            str(CONVERSATION),
            "--model",
            MODEL,
            "--api-base",
            server.url,
            "--types",
            "single-hop,unanswerable",
            "--out",
            str(out),
            "--json",
            "--quiet",
            *extra,
        ],
    )


def summary_of(result: Any) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def kept_questions(path: Path) -> dict[str, dict]:
    return {q["question"]: q for q in json.loads(path.read_text(encoding="utf-8"))["questions"]}


def test_every_check_accepts_and_rejects_for_its_reason(model_env, tmp_path: Path) -> None:
    with FakeLLMServer(ScriptedModel()) as server:
        result = label(server, tmp_path / "dev.json")
    assert result.exit_code == 0, result.output
    summary = summary_of(result)
    kept = kept_questions(tmp_path / "dev.json")
    assert set(kept) == {
        "Which city did Priya move to?",
        "What is the name of Tomasz's dog?",
        "When is Tomasz's birthday?",
    }
    assert summary["rejected"] == {
        RejectReason.DUPLICATE.value: 1,
        RejectReason.NOT_ANSWERABLE.value: 1,
        RejectReason.ANSWERED.value: 1,
        RejectReason.LEAK.value: 1,
        RejectReason.VERBATIM.value: 1,
        RejectReason.MALFORMED.value: 1,
        RejectReason.CHECK_MALFORMED.value: 1,
    }
    assert summary["candidates"] == 10 and summary["kept_total"] == 3
    # provenance: the generator, every check with its verdict and the checker's answer, the model
    city = kept["Which city did Priya move to?"]["provenance"]
    assert city["model"] == MODEL and city["generator"]["kind"] == "llm" and city["generator"]["sessions"] == ["s1"]
    assert [(c["check"], c["verdict"]) for c in city["checks"]] == [
        ("verbatim", "pass"),
        ("duplicate", "pass"),
        ("answerable_from_evidence", "pass"),
        ("not_answerable_without_evidence", "pass"),
    ]
    assert city["checks"][2]["answer"] == "Lisbon" and city["checks"][3]["answer"] == NOT_MENTIONED
    dog = kept["What is the name of Tomasz's dog?"]
    assert dog["category"] == "unanswerable" and dog["question_type"] == "adversarial" and dog["evidence"] == []
    assert dog["provenance"]["checks"][-1] == {
        "check": "unanswerable_in_best_context",
        "verdict": "pass",
        "answer": NOT_MENTIONED,
    }
    birthday = kept["When is Tomasz's birthday?"]["provenance"]["checks"][-1]
    assert birthday["verdict"] == "pass" and birthday["detail"] == "the reply only restates the question"
    # calls and tokens are counted: 10 generation calls (+1 re-ask), and the checks
    assert summary["spent"]["calls"] == server.request_count and summary["spent"]["prompt_tokens"] > 0
    # the file loads as a custom benchmark, provenance and all
    dataset = load_custom(tmp_path / "dev.json")
    assert len(dataset.questions) == 3 and "unanswerable" in dataset.adversarial_categories


def test_an_interrupted_run_resumes_without_asking_again(model_env, tmp_path: Path) -> None:
    with FakeLLMServer(ScriptedModel()) as clean:
        assert label(clean, tmp_path / "clean.json").exit_code == 0
    reference = clean.request_count

    model = ScriptedModel()
    answered_before: list[dict] = []

    def dying(body: dict) -> str:  # the server goes down after six answers
        reply = model(body)
        answered_before.append(body)
        if len(answered_before) == 6:
            first.fail_next(400, count=10_000)
        return reply

    with FakeLLMServer(dying) as first:
        stopped = label(first, tmp_path / "dev.json")
    assert stopped.exit_code == 2
    assert "run the same command again" in stopped.output
    journal = tmp_path / "dev.json.label-journal.jsonl"
    assert len(journal.read_text(encoding="utf-8").splitlines()) == 6
    with FakeLLMServer(model) as second:  # the same model, restarted
        resumed = label(second, tmp_path / "dev.json")
    assert resumed.exit_code == 0, resumed.output
    asked_again = [b for b in second.requests if b in answered_before]
    assert not asked_again
    assert second.request_count == reference - 6
    assert summary_of(resumed)["replayed_calls"] == 6
    assert kept_questions(tmp_path / "dev.json") == kept_questions(tmp_path / "clean.json")
    # and a third run asks nothing at all
    with FakeLLMServer(model) as third:
        assert label(third, tmp_path / "dev.json").exit_code == 0
    assert third.request_count == 0


def test_traced_queries_become_checked_questions(model_env, tmp_path: Path) -> None:
    document = json.loads(CONVERSATION.read_text(encoding="utf-8"))
    document["questions"] = [
        {
            "id": "trace-1",
            "conversation_id": "pt",
            "question": "Where does Priya live now?",
            "answer": [],
            "served_kind": "answer",
            "served_turn_ids": ["pt-1"],
        }
    ]
    traces = tmp_path / "traces.json"
    traces.write_text(json.dumps(document), encoding="utf-8")
    with FakeLLMServer(ScriptedModel()) as server:
        result = CliRunner().invoke(
            app,
            [
                "label",
                "--traces",
                str(traces),
                "--model",
                MODEL,
                "--api-base",
                server.url,
                "--types",
                "unanswerable",
                "--sessions",
                "1",
                "--per-session",
                "1",
                "--out",
                str(tmp_path / "dev.json"),
                "--quiet",
            ],
        )
    assert result.exit_code == 0, result.output
    seeded = kept_questions(tmp_path / "dev.json")["Where does Priya live now?"]
    assert seeded["answer"] == "Lisbon" and seeded["evidence"] == ["pt-1"]
    assert seeded["provenance"]["generator"] == {
        **seeded["provenance"]["generator"],
        "kind": "trace",
        "trace": "trace-1",
    }
    assert [c["verdict"] for c in seeded["provenance"]["checks"]] == ["pass"] * 4


def test_deterministic_checks() -> None:
    conversation = next(iter(load_custom(CONVERSATION).conversations.values()))
    copied = Candidate(
        "pt", "single-hop", "Did Priya say the flat has a tiny balcony over the tram line?", "yes", ("pt-1",)
    )
    own_words = Candidate("pt", "single-hop", "What is above the tram line at Priya's flat?", "a balcony", ("pt-1",))
    assert not verbatim_check(copied, conversation).passed
    assert verbatim_check(own_words, conversation).passed
    assert not duplicate_check(own_words, ["What is above the tram line at Priya's new flat?"]).passed
    assert duplicate_check(own_words, ["Which city did Priya move to?"]).passed


def test_an_unanswerable_slot_whose_reply_gives_an_answer_is_malformed() -> None:
    conversation = next(iter(load_custom(CONVERSATION).conversations.values()))
    slot = next(s for s in slots_for(conversation, ["unanswerable"], 1, 1))
    answered = {"question": "Who teaches Priya the cello?", "answer": "Ines", "evidence": []}
    assert parse_candidate(answered, slot, {}) == "an unanswerable question came with an answer ('Ines')"
    declined = parse_candidate({**answered, "answer": "Not mentioned"}, slot, {})
    assert isinstance(declined, Candidate) and declined.answer == NOT_MENTIONED
    assert restates_question("the cello", "Who teaches Priya the cello?")
    assert not restates_question("the cello", "Does Priya play the cello or the violin?")  # a choice offered
    assert not restates_question("Ines", "Who teaches Priya the cello?")


def test_each_slot_of_a_session_is_about_its_own_turn_and_a_temporal_one_about_a_time() -> None:
    day = datetime(2023, 5, 8)
    texts = [
        "Hi!",
        "I finally moved into the flat near the river with my sister.",
        "My cello teacher says I should practise scales every single morning.",
        "We went hiking in the hills last weekend and got completely lost.",
        "The bakery on the corner sells the best almond croissants in town.",
    ]
    turns = tuple(Turn(f"t{i}", "Priya", text, "s1", day) for i, text in enumerate(texts))
    conversation = Conversation("c", (Session("s1", day, turns),), ("Priya",))
    slots = slots_for(conversation, ["single-hop", "open-domain", "temporal", "unanswerable"], 4, None)
    assert [s.kind for s in slots] == ["single-hop", "open-domain", "temporal", "unanswerable"]
    focus = [tuple(t.turn_id for t in s.focus) for s in slots]
    assert len(set(focus)) == 4 and all(len(f) == 1 and f != ("t0",) for f in focus)  # "Hi!" holds nothing
    assert focus[2] == ("t3",)  # the only turn that mentions a time
    assert generation_prompt(slots[2]).rstrip().splitlines()[-1].startswith("Reply with a JSON object")
    assert "must be about what this turn says (the turns around it may help):\n[t3] Priya: We went hiking" in (
        generation_prompt(slots[2])
    )


def test_a_slot_too_long_for_the_window_shows_the_turns_nearest_its_focus() -> None:
    day = datetime(2023, 5, 8)
    turns = tuple(
        Turn(f"t{i}", "Priya", f"Line {i} about the garden, the tram and the cello lessons.", "s1", day)
        for i in range(40)
    )
    conversation = Conversation("c", (Session("s1", day, turns),), ("Priya",))
    slot = slots_for(conversation, ["single-hop"], 1, None)[0]
    whole = generation_prompt(slot)
    assert fitted(slot, lambda prompt: True) is slot
    narrowed = fitted(slot, lambda prompt: len(prompt) <= len(whole) // 2)
    shown = [t.turn_id for t in narrowed.sessions[0].turns]
    assert len(generation_prompt(narrowed)) <= len(whole) // 2 and 0 < len(shown) < 40
    assert slot.focus[0].turn_id in shown  # the turns kept are those around the focus
    assert shown == [f"t{i}" for i in range(int(shown[0][1:]), int(shown[-1][1:]) + 1)]


def test_a_bare_relative_date_is_resolved_against_the_evidence_turns_day() -> None:
    said = Turn("t1", "Priya", "We went hiking yesterday and got lost.", "s2", datetime(2023, 5, 8))
    other = Turn("t0", "Priya", "Hello again!", "s1", datetime(2023, 4, 1))
    conversation = Conversation("c", (Session("s1", other.timestamp, (other,)), Session("s2", said.timestamp, (said,))))
    assert resolve_answer("Yesterday.", conversation, ["t0", "t1"]) == "7 May 2023"  # the day of the turn saying it
    assert resolve_answer("it was last week", conversation, ["t1"]) == "the week before 8 May 2023"
    assert resolve_answer("in the hills", conversation, ["t1"]) == "in the hills"  # not a relative date
    assert resolve_answer("yesterday", conversation, []) == "yesterday"  # no dated evidence: left as written
    assert evidence_context(conversation, ["t1"]) == "(8 May 2023) Priya: We went hiking yesterday and got lost."
    assert evidence_context(conversation, ["t1"], date_notes=True).endswith("got lost. [yesterday = 7 May 2023]")
    candidate = with_resolved_answer(
        Candidate("c", "temporal", "When did Priya go hiking?", "yesterday", ("t1",)), conversation
    )
    assert candidate.answer == "7 May 2023" and candidate.generator["answer_as_written"] == "yesterday"


def test_no_model_says_how_to_choose(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("EVOLVEMEM_MODEL", raising=False)
    result = CliRunner().invoke(app, ["label", "--data", str(CONVERSATION), "--out", str(tmp_path / "dev.json")])
    assert result.exit_code == 2
    assert "--model offline" in result.output and "--model" in result.output
    assert not (tmp_path / "dev.json").exists()


def test_a_configured_model_is_used_not_the_offline_labeller(model_env, monkeypatch, tmp_path: Path) -> None:
    with FakeLLMServer(ScriptedModel()) as server:
        monkeypatch.setenv("EVOLVEMEM_MODEL", MODEL)
        result = CliRunner().invoke(
            app,
            [
                "label",
                "--data",
                str(CONVERSATION),
                "--api-base",
                server.url,
                "--types",
                "single-hop",
                "--sessions",
                "1",
                "--per-session",
                "1",
                "--out",
                str(tmp_path / "dev.json"),
                "--quiet",
            ],
        )
    assert result.exit_code == 0, result.output
    assert server.request_count > 0
    assert all(q["provenance"]["model"] == MODEL for q in kept_questions(tmp_path / "dev.json").values())


def test_offline_labels_say_so_and_a_short_run_works_on_them(tmp_path: Path) -> None:
    out = tmp_path / "dev.json"
    result = CliRunner().invoke(app, ["label", "--data", str(CONVERSATION), "--model", "offline", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "offline labeller" in result.output and "offline labels" in result.output
    questions = json.loads(out.read_text(encoding="utf-8"))["questions"]
    assert questions and {q["category"] for q in questions} <= {"temporal", "single-hop"}
    assert all(
        q["provenance"]["model"] == "offline" and q["provenance"]["generator"]["kind"] == "offline" for q in questions
    )
    by_text = {q["question"]: q["answer"] for q in questions}
    assert by_text.get("When did Tomasz Wolski mention Gdansk?") == "5 March 2024"
    # deterministic: a second run writes the same file
    again = tmp_path / "again.json"
    CliRunner().invoke(app, ["label", "--data", str(CONVERSATION), "--model", "offline", "--out", str(again)])
    assert json.loads(again.read_text(encoding="utf-8"))["questions"] == questions
    run = CliRunner().invoke(
        app,
        [
            "run",
            "--benchmark",
            "custom",
            "--data",
            str(out),
            "--rounds",
            "1",
            "--out",
            str(tmp_path / "run"),
            "--quiet",
        ],
    )
    assert run.exit_code == 0, run.output


def test_an_unknown_type_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "label",
            "--data",
            str(CONVERSATION),
            "--model",
            "offline",
            "--types",
            "single-hop,trivia",
            "--out",
            str(tmp_path / "dev.json"),
        ],
    )
    assert result.exit_code == 2
    assert "unknown type 'trivia'" in result.output
