"""Your own conversations and questions, in a small JSON (or JSONL) format.

JSON file (`.json`)::

    {
      "name": "support-chats",                       # optional, default: the file name
      "category_names": {"billing": "Billing"},       # optional, category -> display name
      "adversarial_categories": ["adversarial"],      # optional, kept out of the main average
      "conversations": [
        {"id": "c1",
         "speakers": ["Priya Raman", "Tomasz"],       # optional, default: in order of speaking
         "sessions": [
           {"id": "s1", "date": "2024-03-05T14:30",   # date optional, ISO 8601
            "turns": [
              {"id": "c1-1", "speaker": "Priya Raman", "text": "I moved to Lisbon in May.",
               "image_caption": "a tram on a hill"}, # optional
              {"id": "c1-2", "speaker": "Tomasz", "text": "How is the new flat?"}]}]}],
      "questions": [
        {"id": "q1", "conversation_id": "c1",
         "question": "Where does Priya live?",
         "answer": "Lisbon",                          # a string, or a list of accepted answers
         "evidence": ["c1-1"],                        # optional, turn ids of that conversation
         "category": "location",                      # optional, default: the question_type
         "question_type": "single_fact",              # optional, default: classified from the text
         "question_date": "2024-06-01",               # optional, default: the last session's date
         "adversarial_answer": "Porto",               # optional trap answer
         "choices": ["Lisbon", "Porto"],              # optional multiple choice ...
         "correct_choice": "A"}]                      # ... with the letter of the right one
    }

JSON Lines file (`.jsonl`): one object per line, each with a "kind": "conversation" lines and
"question" lines carry the fields above; at most one "dataset" line carries name,
category_names and adversarial_categories. Blank lines are ignored.

Rules: turn ids are unique within a conversation; question ids are unique; evidence must name
turns of the question's conversation; question_type is one of evolvemem.qtypes.QUESTION_TYPES.
Unanswerable questions use question_type "adversarial", which alone keeps them out of the main
average (qtypes.is_adversarial; adversarial_categories names their categories for reference); their "answer" is what a right reply says, e.g.
"Not mentioned in the conversation" (abstentions score as correct on them), and the wrong answer
a reader might be lured into goes in "adversarial_answer". Every conversation needs at least one
question. A key that is not one of the above is refused with the nearest known one ("did you
mean"), so a misspelt field never silently drops its data. Any violation raises DataError naming
the record. A question's "provenance" (written by `evolve label`: how it was generated and
checked) and keys starting with "served_" (written by `evolve traces export`) are notes: kept in
the file, not read.
`dump_custom` writes any Dataset in this format, so other benchmarks can be exported and edited.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, TypedDict

from evolvemem.data.dates import parse_iso_datetime
from evolvemem.data.loader import JsonObject, bytes_hash, parse_json_bytes, read_bytes
from evolvemem.data.models import Conversation, Dataset, Question, Session, Turn
from evolvemem.errors import DataError
from evolvemem.qtypes import QUESTION_TYPES, classify_question

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# The keys each record may hold (JSON Lines records also carry "kind").
TOP_KEYS = ("name", "category_names", "adversarial_categories", "conversations", "questions")
CONVERSATION_KEYS = ("id", "speakers", "sessions")
SESSION_KEYS = ("id", "date", "turns")
TURN_KEYS = ("id", "speaker", "text", "image_caption", "date")
QUESTION_KEYS = (
    "id",
    "conversation_id",
    "question",
    "answer",
    "evidence",
    "category",
    "question_type",
    "question_date",
    "adversarial_answer",
    "choices",
    "correct_choice",
)
# A question's notes on what a served memory answered (`evolve traces export`): kept by the file, not read.
NOTE_PREFIX = "served_"
# How a question was labelled (`evolve label`: generator, checks and verdicts, model): kept by the file, not read.
PROVENANCE_KEY = "provenance"


def _is_note(key: str) -> bool:
    return key.startswith(NOTE_PREFIX) or key == PROVENANCE_KEY


def _check_keys(record: JsonObject, known: tuple[str, ...], where: str) -> None:
    """Refuse a key the format does not have, suggesting the nearest known one."""
    import difflib

    for key in record:
        if key in known or key == "kind" or (known is QUESTION_KEYS and _is_note(str(key))):
            continue
        near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]!r}?" if near else f"known keys: {', '.join(known)}"
        raise DataError(f"{where}: unknown key {key!r} ({hint})")


def load_custom(path: str | Path) -> Dataset:
    """Load a custom dataset; the suffix `.jsonl` selects the line format."""
    path = Path(path)
    payload = read_bytes(path)
    if path.suffix.lower() == ".jsonl":
        header, conversations, questions = _split_jsonl(payload, path.name)
    else:
        header, conversations, questions = _split_json(payload, path.name)
    return _build(header, conversations, questions, path, bytes_hash(payload))


Located = list[tuple[str, Any]]  # (where in the file, raw record)


def _split_json(payload: bytes, label: str) -> tuple[JsonObject, Located, Located]:
    raw = parse_json_bytes(payload, label)
    if not isinstance(raw, dict):
        raise DataError(f"{label}: top level must be an object with 'conversations' and 'questions'")
    _check_keys(raw, TOP_KEYS, label)
    parts = []
    for key in ("conversations", "questions"):
        records = raw.get(key)
        if not isinstance(records, list):
            raise DataError(f"{label}: '{key}' must be a list")
        parts.append([(f"{label}: {key}[{i}]", record) for i, record in enumerate(records)])
    return raw, parts[0], parts[1]


def _split_jsonl(payload: bytes, label: str) -> tuple[JsonObject, Located, Located]:
    header: JsonObject = {}
    conversations: Located = []
    questions: Located = []
    try:
        lines = payload.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError:
        raise DataError(f"{label}: not UTF-8 text") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{label}: line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        kind = record.get("kind") if isinstance(record, dict) else None
        if kind == "conversation":
            conversations.append((where, record))
        elif kind == "question":
            questions.append((where, record))
        elif kind == "dataset":
            if header:
                raise DataError(f"{where}: a second 'dataset' line")
            _check_keys(record, tuple(k for k in TOP_KEYS if k not in ("conversations", "questions")), where)
            header = record
        else:
            raise DataError(f"{where}: 'kind' must be 'conversation', 'question' or 'dataset', got {kind!r}")
    return header, conversations, questions


def _build(header: JsonObject, conv_records: Located, question_records: Located, path: Path, digest: str) -> Dataset:
    label = path.name
    conversations: dict[str, Conversation] = {}
    for where, record in conv_records:
        conversation = _conversation(record, where)
        if conversation.conversation_id in conversations:
            raise DataError(f"{where}: duplicate conversation id {conversation.conversation_id!r}")
        conversations[conversation.conversation_id] = conversation
    turn_ids = {cid: {t.turn_id for t in c.turns()} for cid, c in conversations.items()}
    questions: list[Question] = []
    seen: set[str] = set()
    for where, record in question_records:
        question = _question(record, where, conversations, turn_ids)
        if question.question_id in seen:
            raise DataError(f"{where}: duplicate question id {question.question_id!r}")
        seen.add(question.question_id)
        questions.append(question)
    asked = {q.conversation_id for q in questions}
    silent = [cid for cid in conversations if cid not in asked]
    if silent and questions:
        raise DataError(
            f"{label}: conversation {silent[0]!r} has no questions"
            + (f" (nor {len(silent) - 1} more)" if len(silent) > 1 else "")
            + ": every conversation needs at least one question to be scored on; remove it or add questions"
        )
    name = header.get("name", path.stem)
    category_names = header.get("category_names", {})
    adversarial = header.get("adversarial_categories", [])
    if not isinstance(name, str) or not name.strip():
        raise DataError(f"{label}: 'name' must be a non-empty string")
    if not isinstance(category_names, dict) or not all(isinstance(v, str) for v in category_names.values()):
        raise DataError(f"{label}: 'category_names' must map category to a display name")
    if not isinstance(adversarial, list):
        raise DataError(f"{label}: 'adversarial_categories' must be a list of categories")
    names = {str(k): v for k, v in category_names.items()}
    for question in questions:
        names.setdefault(question.category, question.category)
    return Dataset(
        name=name.strip(),
        conversations=conversations,
        questions=questions,
        category_names=names,
        adversarial_categories=tuple(str(c) for c in adversarial),
        source=str(path),
        content_hash=digest,
    )


def _text(record: JsonObject, key: str, where: str) -> str:
    """A required non-empty string field; ints are accepted for ids."""
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise DataError(f"{where} has no '{key}'" if value is None else f"{where}: '{key}' must be a non-empty string")
    return str(value).strip() if key.endswith("id") else str(value)


def _optional_text(record: JsonObject, key: str, where: str) -> str | None:
    """An optional string field: absent is None, present must be a non-empty string."""
    return None if record.get(key) is None else _text(record, key, where)


def _date(record: JsonObject, key: str, where: str) -> datetime | None:
    value = record.get(key)
    if value is None:
        return None
    try:
        return parse_iso_datetime(value)
    except ValueError as exc:
        raise DataError(f"{where}: '{key}' {exc}") from None


def _list(record: JsonObject, key: str, where: str) -> list[Any]:
    value = record.get(key, [])
    if not isinstance(value, list):
        raise DataError(f"{where}: '{key}' must be a list")
    return value


def _new_id(item: Any, known: tuple[str, ...], seen: set[str], kind: str, where: str) -> str:
    """The id of a session or turn (an object of `known` keys), added to `seen`: ids are unique
    within their conversation."""
    if not isinstance(item, dict):
        raise DataError(f"{where} is not an object")
    item_id = _text(item, "id", where)
    _check_keys(item, known, where)
    if item_id in seen:
        raise DataError(f"{where}: duplicate {kind} id {item_id!r}")
    seen.add(item_id)
    return item_id


def _conversation(record: Any, where: str) -> Conversation:
    if not isinstance(record, dict):
        raise DataError(f"{where} is not an object")
    conversation_id = _text(record, "id", where)
    where = f"{where} (id {conversation_id!r})"
    _check_keys(record, CONVERSATION_KEYS, where)
    if "sessions" not in record:
        raise DataError(f"{where} has no 'sessions'")
    sessions_raw = _list(record, "sessions", where)
    if not sessions_raw:
        raise DataError(f"{where}: 'sessions' is empty")
    sessions: list[Session] = []
    seen_turns: set[str] = set()
    speakers = [str(s) for s in _list(record, "speakers", where)]
    seen_sessions: set[str] = set()
    for s_index, session in enumerate(sessions_raw):
        s_where = f"{where}: sessions[{s_index}]"
        session_id = _new_id(session, SESSION_KEYS, seen_sessions, "session", s_where)
        session_date = _date(session, "date", s_where)
        if "turns" not in session:
            raise DataError(f"{s_where} has no 'turns'")
        turns = []
        for t_index, turn in enumerate(_list(session, "turns", s_where)):
            t_where = f"{s_where}: turns[{t_index}]"
            turn_id = _new_id(turn, TURN_KEYS, seen_turns, "turn", t_where)
            speaker = _text(turn, "speaker", t_where)
            if not isinstance(turn.get("text"), str):
                raise DataError(f"{t_where} has no 'text'")
            caption = turn.get("image_caption")
            if caption is not None and not isinstance(caption, str):
                raise DataError(f"{t_where}: 'image_caption' must be a string")
            turns.append(
                Turn(
                    turn_id=turn_id,
                    speaker=speaker,
                    text=turn["text"],
                    session_id=session_id,
                    timestamp=_date(turn, "date", t_where) or session_date,
                    image_caption=caption or None,
                )
            )
            if speaker not in speakers:
                speakers.append(speaker)
        sessions.append(Session(session_id=session_id, timestamp=session_date, turns=tuple(turns)))
    return Conversation(conversation_id=conversation_id, sessions=tuple(sessions), speakers=tuple(speakers))


def _question(
    record: Any, where: str, conversations: dict[str, Conversation], turn_ids: dict[str, set[str]]
) -> Question:
    if not isinstance(record, dict):
        raise DataError(f"{where} is not an object")
    question_id = _text(record, "id", where)
    where = f"{where} (id {question_id!r})"
    _check_keys(record, QUESTION_KEYS, where)
    conversation_id = _text(record, "conversation_id", where)
    if conversation_id not in conversations:
        raise DataError(f"{where}: conversation_id {conversation_id!r} is not a conversation in this file")
    text = _text(record, "question", where)
    if "answer" not in record:
        raise DataError(f"{where} has no 'answer'")
    answers = _answers(record["answer"], where)
    evidence = tuple(str(e).strip() for e in _list(record, "evidence", where))
    unknown = [e for e in evidence if e not in turn_ids[conversation_id]]
    if unknown:
        raise DataError(f"{where}: evidence {unknown[0]!r} is not a turn of conversation {conversation_id!r}")
    given_type = _optional_text(record, "question_type", where)
    question_type = given_type or classify_question(text)
    if question_type not in QUESTION_TYPES:
        raise DataError(f"{where}: question_type {question_type!r} is not one of {', '.join(QUESTION_TYPES)}")
    category = _optional_text(record, "category", where) or question_type
    question_date = _date(record, "question_date", where) or conversations[conversation_id].sessions[-1].timestamp
    adversarial = record.get("adversarial_answer")
    choices = tuple(str(c) for c in _list(record, "choices", where))
    correct = _optional_text(record, "correct_choice", where)
    if correct is not None and (not choices or correct.upper() not in _LETTERS[: len(choices)]):
        raise DataError(f"{where}: correct_choice {correct!r} does not name one of the {len(choices)} choices")
    return Question(
        question_id=question_id,
        conversation_id=conversation_id,
        text=text,
        category=category,
        question_type=question_type,
        type_source="benchmark" if given_type else "rules",
        answers=answers,
        evidence=evidence,
        question_date=question_date,
        adversarial_answer=None if adversarial is None else str(adversarial),
        choices=choices,
        correct_choice=correct.upper() if correct else None,
    )


def _answers(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return (str(value),)
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return tuple(str(v) for v in value)
    raise DataError(f"{where}: 'answer' must be a string or a list of strings")


# ----------------------------------------------------------------------------- writing


class CustomHeader(TypedDict):
    """The dataset's own fields (the JSON top level, or the JSON Lines "dataset" line)."""

    name: str
    category_names: dict[str, str]
    adversarial_categories: list[str]


class _CustomTurnRequired(TypedDict):
    id: str
    speaker: str
    text: str


class CustomTurn(_CustomTurnRequired, total=False):
    """One turn; `date` only where it differs from its session's."""

    image_caption: str
    date: str


class _CustomSessionRequired(TypedDict):
    id: str
    turns: list[CustomTurn]


class CustomSession(_CustomSessionRequired, total=False):
    date: str


class CustomConversation(TypedDict):
    id: str
    speakers: list[str]
    sessions: list[CustomSession]


class _CustomQuestionRequired(TypedDict):
    id: str
    conversation_id: str
    question: str
    answer: list[str]
    evidence: list[str]
    category: str
    question_type: str


class CustomQuestion(_CustomQuestionRequired, total=False):
    """One question; the optional fields are written only when the question has them."""

    question_date: str
    adversarial_answer: str
    choices: list[str]
    correct_choice: str


def custom_records(dataset: Dataset) -> tuple[CustomHeader, list[CustomConversation], list[CustomQuestion]]:
    """The dataset as format records: (dataset header, conversations, questions)."""
    header: CustomHeader = {
        "name": dataset.name,
        "category_names": dict(dataset.category_names),
        "adversarial_categories": list(dataset.adversarial_categories),
    }
    conversations = [_conversation_record(c) for c in dataset.conversations.values()]
    questions = [_question_record(q) for q in dataset.questions]
    return header, conversations, questions


def dump_custom(dataset: Dataset, path: str | Path) -> Path:
    """Write `dataset` in the custom format (`.jsonl` suffix: the line format)."""
    path = Path(path)
    header, conversations, questions = custom_records(dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".jsonl":
        lines: Iterable[dict[str, object]] = (
            [{"kind": "dataset", **header}]
            + [{"kind": "conversation", **c} for c in conversations]
            + [{"kind": "question", **q} for q in questions]
        )
        path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    else:
        document = {**header, "conversations": conversations, "questions": questions}
        path.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def _conversation_record(conversation: Conversation) -> CustomConversation:
    sessions: list[CustomSession] = []
    for session in conversation.sessions:
        turns: list[CustomTurn] = []
        for turn in session.turns:
            item: CustomTurn = {"id": turn.turn_id, "speaker": turn.speaker, "text": turn.text}
            if turn.image_caption:
                item["image_caption"] = turn.image_caption
            if turn.timestamp != session.timestamp and turn.timestamp is not None:
                item["date"] = turn.timestamp.isoformat()
            turns.append(item)
        entry: CustomSession = {"id": session.session_id, "turns": turns}
        if session.timestamp is not None:
            entry["date"] = session.timestamp.isoformat()
        sessions.append(entry)
    return {"id": conversation.conversation_id, "speakers": list(conversation.speakers), "sessions": sessions}


def _question_record(question: Question) -> CustomQuestion:
    item: CustomQuestion = {
        "id": question.question_id,
        "conversation_id": question.conversation_id,
        "question": question.text,
        "answer": list(question.answers),
        "evidence": list(question.evidence),
        "category": question.category,
        "question_type": question.question_type,
    }
    if question.question_date is not None:
        item["question_date"] = question.question_date.isoformat()
    if question.adversarial_answer is not None:
        item["adversarial_answer"] = question.adversarial_answer
    if question.choices:
        item["choices"] = list(question.choices)
    if question.correct_choice is not None:
        item["correct_choice"] = question.correct_choice
    return item
