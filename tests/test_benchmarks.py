"""Benchmark loaders: real LoCoMo dev data, malformed inputs, download, formats, synth, split."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import shutil
import socket
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from evolvemem.benchmarks import BENCHMARK_TABLE, load_benchmark
from evolvemem.data import split_dataset, split_ids
from evolvemem.data import synth as synth_module
from evolvemem.data.custom import dump_custom, load_custom
from evolvemem.data.locomo import LOCOMO_URL, load_locomo, normalize_evidence, resolve_locomo_path
from evolvemem.data.longmemeval import load_longmemeval
from evolvemem.data.membench import load_membench
from evolvemem.data.models import Dataset
from evolvemem.data.synth import NOT_MENTIONED, generate_synth
from evolvemem.errors import ConfigError, DataError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOCOMO_TINY = FIXTURES / "locomo_tiny.json"


def _one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message, message
    return message


def _same_content(a: Dataset, b: Dataset) -> None:
    assert a.conversations == b.conversations
    assert a.questions == b.questions
    assert (a.name, a.category_names, a.adversarial_categories) == (b.name, b.category_names, b.adversarial_categories)


# ----------------------------------------------------------------------------- LoCoMo


def test_locomo_dev_file_loads_completely(locomo_path: Path) -> None:
    start = time.perf_counter()
    ds = load_locomo(locomo_path)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0
    assert len(ds.conversations) == 8
    assert len(ds.questions) == 1586
    assert Counter(q.category for q in ds.questions) == {"1": 213, "2": 256, "3": 76, "4": 681, "5": 360}
    assert {q.category: q.question_type for q in ds.questions} == {
        "1": "multi_hop",
        "2": "temporal",
        "3": "inference",
        "4": "single_fact",
        "5": "adversarial",
    }
    assert ds.adversarial_categories == ("5",)
    assert ds.category_names["3"] == "open-domain"
    assert ds.content_hash == hashlib.sha256(locomo_path.read_bytes()).hexdigest()[:16]
    assert len({q.question_id for q in ds.questions}) == 1586

    conv = ds.conversations["conv-26"]
    assert len(conv.speakers) == 2 and set(conv.speakers) == {t.speaker for t in conv.turns()}
    assert conv.sessions[0].timestamp == datetime(2023, 5, 8, 13, 56)  # "1:56 pm on 8 May, 2023"
    assert all(s.timestamp is not None for c in ds.conversations.values() for s in c.sessions)
    # conv-26 has date keys up to session_35 but turns only up to session_19: questions are
    # dated at the last session that has turns
    assert len(conv.sessions) == 19
    assert all(q.question_date == conv.sessions[-1].timestamp for q in ds.questions if q.conversation_id == "conv-26")

    turns = [t for c in ds.conversations.values() for t in c.turns()]
    captioned = [t for t in turns if t.image_caption]
    assert len(captioned) > 500
    assert captioned[0].image_caption in captioned[0].full_text
    assert all(t.timestamp is not None for t in turns)

    adversarial = [q for q in ds.questions if q.category == "5"]
    assert all(q.adversarial_answer for q in adversarial)
    assert sum(1 for q in adversarial if q.answers) == 2  # the two items that carry both answers
    assert all(q.answers for q in ds.questions if q.category != "5")
    assert all(re.fullmatch(r"D\d+:\d+", e) for q in ds.questions for e in q.evidence)
    # "D8:6; D9:17" in one evidence string becomes two ids
    assert any(q.evidence[-2:] == ("D8:6", "D9:17") for q in ds.questions)


def test_evidence_strings_are_normalised() -> None:
    assert normalize_evidence(["D3:4; D5:2", "D", "D:2:7", " D6:05 ", "D3:4", 7]) == ("D3:4", "D5:2", "D2:7", "D6:5")


def test_tiny_locomo_fixture_fields() -> None:
    ds = load_locomo(LOCOMO_TINY)
    q = {x.question_id: x for x in ds.questions}
    assert q["tiny-1:q2"].answers == ("2023",)  # numeric answers become strings
    assert q["tiny-1:q2"].evidence == ("D2:1", "D1:1")
    assert q["tiny-1:q3"].answers == () and q["tiny-1:q3"].adversarial_answer == "a bowl"
    assert q["tiny-1:q4"].answers == ("No",) and q["tiny-1:q4"].adversarial_answer == "Yes"
    assert q["tiny-1:q5"].evidence == ()
    turn = ds.conversations["tiny-1"].sessions[0].turns[1]
    assert turn.image_caption == "a photo of a blue ceramic bowl"
    assert q["tiny-1:q0"].question_date == datetime(2023, 3, 21, 18, 40)


def _mutated(tmp_path: Path, mutate) -> Path:
    data = json.loads(LOCOMO_TINY.read_text())
    mutate(data)
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d[0].pop("qa"), "sample 0 (tiny-1) has no 'qa' list"),
        (lambda d: d[0]["qa"][1].pop("question"), "sample 0 (tiny-1): qa[1] has no 'question'"),
        (lambda d: d[0]["qa"][0].pop("answer"), "qa[0] (category 4) has no 'answer'"),
        (lambda d: d[0]["qa"][0].update(category=9), "qa[0]: 'category' must be one of 1-5"),
        (lambda d: d[0]["qa"][0].update(evidence="D1:1"), "qa[0]: 'evidence' must be a list"),
        (
            lambda d: d[0]["conversation"].update(session_2_date_time="next Tuesday"),
            "session_2_date_time 'next Tuesday'",
        ),
        (lambda d: d[0]["conversation"].pop("session_1_date_time"), "session_1 has no 'session_1_date_time'"),
        (lambda d: d[0]["conversation"]["session_1"][1].pop("text"), "session_1[1] has no 'text'"),
        (lambda d: d[0]["conversation"]["session_2"][0].update(dia_id="D1:1"), "duplicate dia_id 'D1:1'"),
        (lambda d: d[0].pop("conversation"), "has no 'conversation' object"),
        (lambda d: d.append(dict(d[0])), "sample 1 (tiny-1): duplicate sample_id"),
    ],
)
def test_malformed_locomo_names_file_and_field(tmp_path: Path, mutate, expected: str) -> None:
    path = _mutated(tmp_path, mutate)
    with pytest.raises(DataError) as exc:
        load_locomo(path)
    message = _one_line(exc)
    assert message.startswith("locomo.json: ")
    assert expected in message


def test_locomo_not_json_or_wrong_shape(tmp_path: Path) -> None:
    broken = tmp_path / "locomo.json"
    broken.write_text('[{"sample_id": "x",')
    with pytest.raises(DataError) as exc:
        load_locomo(broken)
    assert "locomo.json: not valid JSON" in _one_line(exc) and "line 1" in str(exc.value)
    broken.write_text('{"sample_id": "x"}')
    with pytest.raises(DataError, match="top level must be a list of samples"):
        load_locomo(broken)
    with pytest.raises(DataError, match="file not found"):
        load_locomo(tmp_path / "absent.json")


def test_resolve_prefers_data_then_env_then_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOLVEMEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EVOLVEMEM_LOCOMO_PATH", raising=False)
    given = tmp_path / "given.json"
    shutil.copy(LOCOMO_TINY, given)
    assert resolve_locomo_path(str(given)) == given
    with pytest.raises(DataError, match="LoCoMo file not found .*--data"):
        resolve_locomo_path(str(tmp_path / "missing.json"))
    monkeypatch.setenv("EVOLVEMEM_LOCOMO_PATH", str(given))
    assert resolve_locomo_path(None) == given
    monkeypatch.setenv("EVOLVEMEM_LOCOMO_PATH", str(tmp_path / "nope.json"))
    with pytest.raises(DataError, match="EVOLVEMEM_LOCOMO_PATH"):
        resolve_locomo_path(None)
    monkeypatch.delenv("EVOLVEMEM_LOCOMO_PATH")
    cached = tmp_path / "cache" / "datasets" / "locomo10.json"
    cached.parent.mkdir(parents=True)
    shutil.copy(LOCOMO_TINY, cached)
    assert resolve_locomo_path(None) == cached


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache, no LoCoMo path from the environment, and no proxy for 127.0.0.1."""
    monkeypatch.setenv("EVOLVEMEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EVOLVEMEM_LOCOMO_PATH", raising=False)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    return tmp_path / "cache"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_offline_download_error_says_how_to_supply_the_file(fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOLVEMEM_LOCOMO_URL", f"http://127.0.0.1:{_closed_port()}/locomo10.json")
    with pytest.raises(DataError) as exc:
        load_benchmark("locomo")
    message = _one_line(exc)
    cache_file = fresh_cache / "datasets" / "locomo10.json"
    for part in (LOCOMO_URL, "--data PATH", "EVOLVEMEM_LOCOMO_PATH", str(cache_file), "download"):
        assert part in message
    assert not cache_file.exists()
    assert not list((fresh_cache).rglob("*.part"))


class _Server:
    """A real HTTP server on 127.0.0.1 serving fixed bytes, counting requests."""

    def __init__(self, body: bytes) -> None:
        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/data/locomo10.json"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "_Server":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_download_into_cache_once(fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _Server(LOCOMO_TINY.read_bytes()) as server:
        monkeypatch.setenv("EVOLVEMEM_LOCOMO_URL", server.url)
        first = load_benchmark("locomo")
        second = load_benchmark("locomo")
        assert server.requests == 1
    assert (fresh_cache / "datasets" / "locomo10.json").read_bytes() == LOCOMO_TINY.read_bytes()
    assert first.content_hash == second.content_hash == load_locomo(LOCOMO_TINY).content_hash
    assert len(first.questions) == 6


def test_download_of_non_json_is_not_cached(fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _Server(b"<html>rate limited</html>") as server:
        monkeypatch.setenv("EVOLVEMEM_LOCOMO_URL", server.url)
        with pytest.raises(DataError, match="not valid JSON"):
            resolve_locomo_path(None)
    assert not (fresh_cache / "datasets" / "locomo10.json").exists()


# ----------------------------------------------------------------------------- custom


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_custom_round_trip(tmp_path: Path, suffix: str) -> None:
    for original in (generate_synth(seed=2, n_conversations=2), load_locomo(LOCOMO_TINY)):
        path = dump_custom(original, tmp_path / f"{original.name}{suffix}")
        loaded = load_benchmark("custom", str(path))
        _same_content(original, loaded)
        assert loaded.content_hash == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        assert loaded.source == str(path)


def _write_custom(tmp_path: Path, document: dict, name: str = "mine.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def _minimal() -> dict:
    return {
        "conversations": [
            {
                "id": "c1",
                "sessions": [
                    {
                        "id": "s1",
                        "date": "2024-03-05T14:30",
                        "turns": [
                            {"id": "t1", "speaker": "Priya Raman", "text": "I moved to Lisbon in May."},
                            {"id": "t2", "speaker": "Tomasz", "text": "I went climbing twice this week."},
                        ],
                    },
                    {
                        "id": "s2",
                        "date": "2024-04-01",
                        "turns": [{"id": "t3", "speaker": "Priya Raman", "text": "Lisbon is sunny."}],
                    },
                ],
            }
        ],
        "questions": [
            {
                "id": "q1",
                "conversation_id": "c1",
                "question": "Where does Priya live?",
                "answer": "Lisbon",
                "evidence": ["t1"],
                "question_type": "single_fact",
                "category": "places",
            },
            {
                "id": "q2",
                "conversation_id": "c1",
                "question": "How many times did Tomasz go climbing?",
                "answer": ["2", "twice"],
                "question_date": "2024-04-02T09:00:00+02:00",
            },
        ],
    }


def test_custom_defaults(tmp_path: Path) -> None:
    ds = load_custom(_write_custom(tmp_path, _minimal()))
    assert ds.name == "mine"
    q1, q2 = ds.questions
    assert (q1.category, q1.question_type, q1.evidence) == ("places", "single_fact", ("t1",))
    assert q1.question_date == datetime(2024, 4, 1)  # default: the last session's date
    assert q2.question_type == "counting" and q2.category == "counting"  # classified from the text
    assert q2.answers == ("2", "twice")
    assert q2.question_date == datetime(2024, 4, 2, 7, 0)  # offset converted to UTC
    assert ds.conversations["c1"].speakers == ("Priya Raman", "Tomasz")
    assert ds.conversations["c1"].sessions[0].turns[0].timestamp == datetime(2024, 3, 5, 14, 30)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["conversations"][0]["sessions"][0]["turns"][0].pop("speaker"),
            "conversations[0] (id 'c1'): sessions[0]: turns[0] has no 'speaker'",
        ),
        (lambda d: d["questions"][0].update(evidence=["t9"]), "questions[0] (id 'q1'): evidence 't9' is not a turn"),
        (lambda d: d["questions"][0].update(conversation_id="c7"), "conversation_id 'c7' is not a conversation"),
        (lambda d: d["questions"][0].update(question_type="trivia"), "question_type 'trivia' is not one of"),
        (lambda d: d["questions"][0].pop("answer"), "questions[0] (id 'q1') has no 'answer'"),
        (lambda d: d["questions"][1].update(id="q1"), "duplicate question id 'q1'"),
        (
            lambda d: d["conversations"][0]["sessions"][1].update(date="yesterday"),
            "sessions[1]: 'date' 'yesterday' is not an ISO date",
        ),
        (lambda d: d["conversations"][0]["sessions"][1]["turns"][0].update(id="t1"), "duplicate turn id 't1'"),
        (lambda d: d.pop("questions"), "'questions' must be a list"),
        (
            lambda d: d["questions"][0].update(choices=["a", "b"], correct_choice="C"),
            "correct_choice 'C' does not name",
        ),
    ],
)
def test_custom_malformed(tmp_path: Path, mutate, expected: str) -> None:
    document = _minimal()
    mutate(document)
    with pytest.raises(DataError) as exc:
        load_custom(_write_custom(tmp_path, document))
    message = _one_line(exc)
    assert message.startswith("mine.json: ") and expected in message


def test_custom_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text('\n{"kind": "conversation", "id": "c1", "sessions": []}\n')
    with pytest.raises(DataError, match=r"mine.jsonl: line 2 \(id 'c1'\): 'sessions' is empty"):
        load_custom(path)
    path.write_text('{"kind": "dataset", "name": "x"}\n{"kind": "chat"}\n')
    with pytest.raises(DataError, match=r"mine.jsonl: line 2: 'kind' must be"):
        load_custom(path)
    path.write_text('{"kind": "dataset"\n')
    with pytest.raises(DataError, match=r"mine.jsonl: line 1: not valid JSON"):
        load_custom(path)


# ----------------------------------------------------------------------------- synth


def test_synth_is_deterministic_and_fast() -> None:
    start = time.perf_counter()
    first = generate_synth(seed=7)
    elapsed = time.perf_counter() - start
    second = generate_synth(seed=7)
    assert elapsed < 0.5
    _same_content(first, second)
    assert first.content_hash == second.content_hash
    other = generate_synth(seed=8)
    assert other.content_hash != first.content_hash
    assert other.questions != first.questions
    assert len(first.conversations) == 4 and len(first.questions) == 60
    assert set(first.category_names) == {q.question_type for q in first.questions}
    assert len({q.question_id for q in first.questions}) == 60


def test_synth_gold_evidence_supports_every_answer() -> None:
    ds = generate_synth(seed=3, n_conversations=6, n_sessions=5)
    seen_types = set()
    for q in ds.questions:
        conv = ds.conversations[q.conversation_id]
        turns = {t.turn_id: t for t in conv.turns()}
        assert all(e in turns for e in q.evidence)
        texts = [turns[e].text for e in q.evidence]
        answer = q.answer
        seen_types.add(q.question_type)
        if q.question_type == "adversarial":
            assert q.evidence == () and q.answers == (NOT_MENTIONED,)
            assert any(q.adversarial_answer in t.text for t in conv.turns())  # the trap is really there
        elif q.question_type == "counting":
            hobby = q.text.rsplit(" go ", 1)[1].rstrip("?")
            assert len(texts) == int(answer) >= 2
            assert all(f"went {hobby}" in t.lower() for t in texts)
            assert sum(f"went {hobby}" in t.text.lower() for t in conv.turns()) == int(answer)
        elif q.question_type == "multi_hop":
            first, last = (turns[e] for e in q.evidence)
            assert first.session_id != last.session_id
            sibling = last.text.split()[0]
            assert sibling in first.text and answer in last.text and answer not in first.text
        else:
            assert texts and all(answer in t for t in texts), (q, texts)
        if q.question_type == "knowledge_update":
            # the superseded value was stated in an earlier session than the update
            stale = re.search(r"from (.+?) to |job as an? (.+?) and started", texts[0])
            old_value = next(g for g in stale.groups() if g)
            order = [s.session_id for s in conv.sessions]
            update_at = order.index(turns[q.evidence[0]].session_id)
            assert old_value != answer
            assert any(old_value in t.text for s in conv.sessions[:update_at] for t in s.turns)
    assert seen_types == {
        "single_fact",
        "knowledge_update",
        "temporal",
        "counting",
        "multi_hop",
        "preference",
        "adversarial",
    }


def test_synth_chitchat_shares_no_planted_word() -> None:
    planted = [
        w.lower()
        for pool in (
            synth_module.CITIES,
            synth_module.JOBS,
            synth_module.PETS,
            synth_module.HOBBIES,
            synth_module.FOODS,
            synth_module.INSTRUMENTS,
        )
        for w in pool
    ]
    planted += [e[0] for e in synth_module.EVENTS]
    filler = synth_module.CHITCHAT + synth_module.REACTIONS + synth_module.GREETINGS + synth_module.GOODBYES
    for line in filler:
        words = set(re.findall(r"[a-z]+", line.lower()))
        assert not [w for w in planted if (w in words if " " not in w else w in line.lower())], line


def test_synth_temporal_answers_are_absolute_dates() -> None:
    ds = generate_synth(seed=11, n_conversations=2)
    for q in (q for q in ds.questions if q.question_type == "temporal"):
        parsed = datetime.strptime(q.answer, "%d %B %Y")
        assert parsed <= q.question_date


@pytest.mark.parametrize("bad", [{"n_sessions": 3}, {"n_conversations": 0}, {"seed": "x"}, {"n_sessions": 2.5}])
def test_synth_rejects_bad_options(bad: dict) -> None:
    with pytest.raises(ConfigError):
        generate_synth(**bad)


# ----------------------------------------------------------------------------- MemBench


def test_membench_fixture() -> None:
    ds = load_benchmark("membench", str(FIXTURES / "membench_small.json"))
    assert len(ds.conversations) == 3 and len(ds.questions) == 3
    q = {x.conversation_id: x for x in ds.questions}
    simple = q["membench_small/simple/roles/0"]
    assert simple.choices == ("Pastry chef", "Marine biologist", "Tram driver", "Librarian")
    assert (simple.correct_choice, simple.answers, simple.evidence) == ("B", ("Marine biologist",), ("m2",))
    assert (simple.category, simple.question_type) == ("simple", "single_fact")
    assert simple.question_date == datetime(2024, 10, 3, 10, 0)
    update = q["membench_small/knowledge_update/events/0"]
    # list choices get letters; no ground_truth, so the answer text picks the letter;
    # the [session, position] target [1, 1] is the third message overall
    assert (update.correct_choice, update.answers, update.evidence) == ("C", ("Friday",), ("m2",))
    assert update.question_type == "knowledge_update"
    emotion = q["membench_small/highlevel/emotion/3"]
    assert (emotion.correct_choice, emotion.answers, emotion.evidence) == ("C", ("Happy",), ("m0", "m1"))
    assert emotion.question_type == "inference"  # highlevel/emotion reads a mood

    sessions = ds.conversations["membench_small/knowledge_update/events/0"].sessions
    assert [len(s.turns) for s in sessions] == [1, 2]
    assert sessions[1].turns[1].text == "Update: Tomasz moved the workshop to Friday.\nAssistant: Updated."
    first = ds.conversations["membench_small/simple/roles/0"].turns()
    assert first[0].timestamp == datetime(2024, 10, 1, 8, 0)  # from the "(place: ..; time: ..)" suffix
    assert first[1].timestamp is None


def test_membench_folder_and_errors(tmp_path: Path) -> None:
    folder = tmp_path / "MemData" / "FirstAgent"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "membench_small.json", folder / "low.json")
    ds = load_membench(tmp_path / "MemData")
    assert "FirstAgent/low/simple/roles/0" in ds.conversations

    data = json.loads((FIXTURES / "membench_small.json").read_text())
    data["simple"]["roles"][0]["QA"]["ground_truth"] = "E"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(DataError) as exc:
        load_membench(bad)
    assert "bad.json: simple/roles[0]: QA: 'ground_truth' 'E' is not one of the choices A, B, C, D" in _one_line(exc)

    data = json.loads((FIXTURES / "membench_small.json").read_text())
    del data["highlevel"]["emotion"][0]["QA"]
    bad.write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"bad.json: highlevel/emotion\[0\] has no 'QA'"):
        load_membench(bad)

    data = json.loads((FIXTURES / "membench_small.json").read_text())
    data["knowledge_update"]["events"][0]["message_list"][1][0] = {"time": "2024-11-05", "place": "Ghent"}
    bad.write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"message_list\[1\]\[0\] has no text"):
        load_membench(bad)


# ----------------------------------------------------------------------------- LongMemEval


def test_longmemeval_fixture() -> None:
    ds = load_benchmark("longmemeval", str(FIXTURES / "longmemeval_small.json"))
    assert list(ds.conversations) == ["lme_fixture_1", "lme_fixture_2", "lme_fixture_3_abs"]
    q1, q2, q3 = ds.questions
    assert q1.evidence == ("sess_b:0",)  # the has_answer turn
    assert (q1.category, q1.question_type) == ("single-session-user", "single_fact")
    assert q2.evidence == ("sess_d:0", "sess_d:1")  # no flags: every turn of the answer session
    assert q2.answers == ("3",) and q2.question_type == "knowledge_update"
    assert (q3.category, q3.question_type, q3.evidence) == ("abstention", "adversarial", ())
    assert ds.adversarial_categories == ("abstention",)
    conv = ds.conversations["lme_fixture_1"]
    assert conv.sessions[0].timestamp == datetime(2023, 5, 20, 2, 21)
    assert [t.speaker for t in conv.turns()] == ["user", "assistant", "user", "assistant"]
    assert q1.question_date == datetime(2023, 6, 2, 10, 0)
    assert q3.question_date == datetime(2023, 9, 10)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d[0]["haystack_dates"].pop(),
            "entry 0 (lme_fixture_1): haystack_session_ids, haystack_dates and haystack_sessions differ",
        ),
        (
            lambda d: d[1]["haystack_dates"].__setitem__(0, "July 1st"),
            "entry 1 (lme_fixture_2): haystack_dates[0] 'July 1st' is not a date",
        ),
        (lambda d: d[0].update(question_type="trivia"), "question_type 'trivia' is not one of"),
        (lambda d: d[2].pop("question"), "entry 2 (lme_fixture_3_abs) has no 'question'"),
        (lambda d: d[0]["haystack_sessions"][1][0].pop("content"), "haystack_sessions[1][0] has no 'content'"),
    ],
)
def test_longmemeval_malformed(tmp_path: Path, mutate, expected: str) -> None:
    data = json.loads((FIXTURES / "longmemeval_small.json").read_text())
    mutate(data)
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as exc:
        load_longmemeval(path)
    assert expected in _one_line(exc) and str(exc.value).startswith("lme.json: ")


# ----------------------------------------------------------------------------- split + loader


def test_split_is_deterministic_disjoint_and_balanced(locomo_path: Path) -> None:
    ds = load_locomo(locomo_path)
    dev, test = split_dataset(ds, "dev"), split_dataset(ds, "test")
    assert set(dev.conversations).isdisjoint(test.conversations)
    assert set(dev.conversations) | set(test.conversations) == set(ds.conversations)
    assert len(dev.conversations) == len(test.conversations) == 4
    assert len(dev.questions) + len(test.questions) == 1586
    assert all(q.conversation_id in dev.conversations for q in dev.questions)
    # pinned: sha256 ranking is the same on every machine
    assert sorted(dev.conversations) == ["conv-30", "conv-41", "conv-42", "conv-43"]
    assert split_ids(list(reversed(list(ds.conversations)))) == split_ids(ds.conversations)
    assert split_dataset(ds, "all") is ds


def test_split_edge_cases() -> None:
    dev, test = split_ids(["a", "b"])
    assert len(dev) == len(test) == 1
    dev, test = split_ids([f"c{i}" for i in range(10)], test_fraction=0.05)
    assert (len(dev), len(test)) == (9, 1)  # at least one on each side
    one = generate_synth(n_conversations=1)
    assert split_dataset(one, "dev").conversations == one.conversations
    with pytest.raises(DataError, match="needs at least 2 conversations"):
        split_dataset(one, "test")
    with pytest.raises(ConfigError):
        split_ids(["a", "b"], test_fraction=1.0)
    with pytest.raises(ConfigError, match="unknown split 'train'"):
        split_dataset(one, "train")


def test_load_benchmark_dispatch_and_errors(locomo_path: Path) -> None:
    assert tuple(BENCHMARK_TABLE) == ("locomo", "synth", "custom", "membench", "longmemeval")
    assert len(load_benchmark("locomo", str(locomo_path)).questions) == 1586
    assert (
        load_benchmark("synth", seed=1, n_conversations=2).content_hash
        == generate_synth(seed=1, n_conversations=2).content_hash
    )
    with pytest.raises(DataError) as exc:
        load_benchmark("locomo11")
    assert "known: locomo, synth, custom, membench, longmemeval" in _one_line(exc)
    with pytest.raises(DataError, match="pass --data PATH"):
        load_benchmark("custom")
    with pytest.raises(DataError, match="drop --data"):
        load_benchmark("synth", "x.json")
    with pytest.raises(ConfigError, match="no option seed"):
        load_benchmark("membench", "x.json", seed=3)
