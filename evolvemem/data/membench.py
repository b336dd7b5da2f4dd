"""MemBench (Tan et al., 2025): multiple-choice questions over a stream of messages.

A MemBench file maps a task type to trajectories, directly or through one more level of
subcategory::

    {"simple": {"roles": [{"tid": 0, "message_list": [...], "QA": {...}}, ...], "events": [...]},
     "knowledge_update": {...}}        # or {"movie": [trajectory, ...]}

`message_list` is the trajectory's history, either flat or a list of sessions (lists). A message
is a dict with the user's and the assistant's text (`user`/`user_message`,
`assistant`/`agent`/`assistant_message`, or a single `message`/`content`/`text`), optionally a
`time` and `place`, or a plain string (observation files); a "(place: ...; time: ...)" suffix in
the text also gives the time. `QA` holds `question`, `choices` ({"A": ..} or a list),
`ground_truth` (the letter), `answer`, `target_step_id` and `time`.

Each trajectory becomes one Conversation; one message is one Turn with id "m<flat index>", so a
`target_step_id` (a 0-based index into the flattened list, or a [session, position] pair for
session lists) maps straight onto evidence. Targets that point past the end are kept as ids
that match no turn: the official data has such a case and dropping it would hide it.
A folder is loaded file by file; conversation ids start with the file's relative path.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from evolvemem.data.dates import find_ymd_datetime
from evolvemem.data.loader import JsonObject, bytes_hash, parse_json_bytes, read_bytes
from evolvemem.data.models import Conversation, Dataset, Question, Session, Turn
from evolvemem.errors import DataError
from evolvemem.qtypes import classify_question

# MemBench task types onto our question types; anything else is classified from its text.
TASK_TO_TYPE = {
    "simple": "single_fact",
    "conditional": "single_fact",
    "noisy": "single_fact",
    "comparative": "multi_hop",
    "aggregative": "counting",
    "post_processing": "inference",
    "knowledge_update": "knowledge_update",
    "highlevel": "preference",
    "highlevel_rec": "preference",
    "lowlevel_rec": "preference",
    "RecMultiSession": "multi_hop",
}
SUBCATEGORY_TO_TYPE = {"emotion": "inference"}  # "highlevel/emotion" reads a mood, not a taste

_USER_KEYS = ("user", "user_message")
_ASSISTANT_KEYS = ("assistant", "agent", "assistant_message")
_PLAIN_KEYS = ("message", "content", "text")
_SUFFIX_TIME = re.compile(r"time:\s*'?(\d{4}-\d{1,2}-\d{1,2}[^)';]*)")
_LETTER = re.compile(r"^\W*([A-Za-z])\W*$")


def load_membench(path: str | Path) -> Dataset:
    """Load one MemBench JSON file, or every *.json file under a folder."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.json") if p.is_file())
        if not files:
            raise DataError(f"{path}: folder has no .json MemBench files")
        prefixes = [f.relative_to(path).with_suffix("").as_posix() for f in files]
    else:
        files, prefixes = [path], [path.stem]
    conversations: dict[str, Conversation] = {}
    questions: list[Question] = []
    digest_parts: list[bytes] = []
    for file, prefix in zip(files, prefixes):
        payload = read_bytes(file)
        digest_parts += [prefix.encode("utf-8"), b"\0", payload, b"\0"]
        raw = parse_json_bytes(payload, file.name)
        for where, task, sub, record, index in _trajectories(raw, file.name):
            conversation, conv_questions = _trajectory(record, where, prefix, task, sub, index, conversations)
            conversations[conversation.conversation_id] = conversation
            questions.extend(conv_questions)
    if not questions:
        raise DataError(f"{path.name}: no MemBench trajectories found")
    categories = sorted({q.category for q in questions})
    return Dataset(
        name="membench",
        conversations=conversations,
        questions=questions,
        category_names={c: c.replace("_", " ") for c in categories},
        source=str(path),
        # one file: the hash of its bytes, like every loader; a folder: of names and bytes
        content_hash=bytes_hash(payload if len(files) == 1 else b"".join(digest_parts)),
    )


def _trajectories(raw: Any, label: str) -> Iterator[tuple[str, str, str | None, Any, int]]:
    """(where, task type, subcategory, record, position) for every trajectory in a file."""
    if isinstance(raw, list):
        raw = {"membench": raw}
    if not isinstance(raw, dict):
        raise DataError(f"{label}: top level must map task types to trajectory lists")
    for task, value in raw.items():
        if isinstance(value, list):
            for index, record in enumerate(value):
                yield f"{label}: {task}[{index}]", task, None, record, index
        elif isinstance(value, dict):
            for sub, records in value.items():
                if not isinstance(records, list):
                    raise DataError(f"{label}: {task}/{sub} must be a list of trajectories")
                for index, record in enumerate(records):
                    yield f"{label}: {task}/{sub}[{index}]", task, sub, record, index
        else:
            raise DataError(f"{label}: {task} must be a list of trajectories or a mapping of them")


def _trajectory(
    record: Any, where: str, prefix: str, task: str, sub: str | None, index: int, existing: dict[str, Conversation]
) -> tuple[Conversation, list[Question]]:
    if not isinstance(record, dict):
        raise DataError(f"{where} is not an object")
    for key in ("message_list", "QA"):
        if key not in record:
            raise DataError(f"{where} has no '{key}'")
    tid = record.get("tid", index)
    conversation_id = "/".join(str(p) for p in (prefix, task, sub, tid) if p is not None)
    if conversation_id in existing:
        conversation_id = f"{conversation_id}#{index}"
    conversation, positions = _conversation(record["message_list"], where, conversation_id)
    qa_items = record["QA"] if isinstance(record["QA"], list) else [record["QA"]]
    default_type = SUBCATEGORY_TO_TYPE.get(sub or "") or TASK_TO_TYPE.get(task)
    turns = conversation.turns()
    last_time = next((t.timestamp for t in reversed(turns) if t.timestamp), None)
    questions = [
        _question(
            qa,
            f"{where}: QA" + (f"[{j}]" if len(qa_items) > 1 else ""),
            conversation_id,
            j,
            task,
            default_type,
            positions,
            last_time,
        )
        for j, qa in enumerate(qa_items)
    ]
    return conversation, questions


def _conversation(
    message_list: Any, where: str, conversation_id: str
) -> tuple[Conversation, dict[tuple[int, int], int]]:
    """Turns with flat ids, and (session, position) -> flat index for pair targets."""
    if not isinstance(message_list, list) or not message_list:
        raise DataError(f"{where}: 'message_list' must be a non-empty list")
    groups: list[list[tuple[str, Any]]] = []  # sessions of (where, message)
    loose: list[tuple[str, Any]] = []
    for i, item in enumerate(message_list):
        if isinstance(item, list):
            if loose:
                groups.append(loose)
                loose = []
            groups.append([(f"message_list[{i}][{j}]", m) for j, m in enumerate(item)])
        else:
            loose.append((f"message_list[{i}]", item))
    if loose:
        groups.append(loose)
    sessions, positions, flat = [], {}, 0
    speakers: list[str] = []
    for s, group in enumerate(groups):
        session_id = f"s{s}"
        turns = []
        for position, (m_where, message) in enumerate(group):
            speaker, text, timestamp = _message(message, f"{where}: {m_where}")
            turn = Turn(turn_id=f"m{flat}", speaker=speaker, text=text, session_id=session_id, timestamp=timestamp)
            turns.append(turn)
            positions[(s, position)] = flat
            flat += 1
            if speaker not in speakers:
                speakers.append(speaker)
        start = next((t.timestamp for t in turns if t.timestamp), None)
        sessions.append(Session(session_id=session_id, timestamp=start, turns=tuple(turns)))
    return Conversation(conversation_id=conversation_id, sessions=tuple(sessions), speakers=tuple(speakers)), positions


def _message(message: Any, where: str) -> tuple[str, str, datetime | None]:
    """(speaker, text, time) of one message; a user/assistant pair stays one turn (one step)."""
    if isinstance(message, str):
        return "user", message, _time_in_text(message)
    if not isinstance(message, dict):
        raise DataError(f"{where} must be a string or an object, got {type(message).__name__}")
    user = _first_text(message, _USER_KEYS)
    assistant = _first_text(message, _ASSISTANT_KEYS)
    if user is not None:
        speaker, text = "user", user if assistant is None else f"{user}\nAssistant: {assistant}"
    elif assistant is not None:
        speaker, text = "assistant", assistant
    else:
        plain = _first_text(message, _PLAIN_KEYS)
        if plain is None:
            keys = ", ".join(_USER_KEYS + _ASSISTANT_KEYS + _PLAIN_KEYS)
            raise DataError(f"{where} has no text (expected one of {keys})")
        speaker, text = str(message.get("role") or message.get("speaker") or "user"), plain
    timestamp = find_ymd_datetime(message["time"]) if isinstance(message.get("time"), str) else None
    return speaker, text, timestamp or _time_in_text(text)


def _first_text(message: JsonObject, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _time_in_text(text: str) -> datetime | None:
    match = _SUFFIX_TIME.search(text)
    return find_ymd_datetime(match.group(1)) if match else None


def _question(
    qa: Any,
    where: str,
    conversation_id: str,
    j: int,
    category: str,
    default_type: str | None,
    positions: dict[tuple[int, int], int],
    last_time: datetime | None,
) -> Question:
    if not isinstance(qa, dict):
        raise DataError(f"{where} is not an object")
    text = qa.get("question")
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"{where} has no 'question'")
    labels, texts = _choices(qa.get("choices"), where)
    answer = qa.get("answer")
    if labels:
        letter = _correct_letter(qa, labels, texts, where)
        answers: tuple[str, ...] = (texts[labels.index(letter)],)
    else:
        if answer is None:
            raise DataError(f"{where} has neither 'choices' nor 'answer'")
        letter = None
        answers = (_as_text(answer),)
    when = qa.get("time")
    return Question(
        question_id=f"{conversation_id}:q{j}",
        conversation_id=conversation_id,
        text=text.strip(),
        category=category,
        question_type=default_type or classify_question(text),
        type_source="benchmark" if default_type else "rules",
        answers=answers,
        evidence=_evidence(qa.get("target_step_id"), positions, where),
        question_date=(find_ymd_datetime(when) if isinstance(when, str) else None) or last_time,
        choices=tuple(texts),
        correct_choice=letter,
    )


def _as_text(value: Any) -> str:
    return ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _choices(raw: Any, where: str) -> tuple[list[str], list[str]]:
    """Choice labels (A, B, ...) and texts, in label order."""
    if raw is None or raw == {} or raw == []:
        return [], []
    if isinstance(raw, dict):
        labels = sorted(str(k).strip().upper() for k in raw)
        by_label = {str(k).strip().upper(): v for k, v in raw.items()}
        if any(len(label) != 1 or not label.isalpha() for label in labels):
            raise DataError(f"{where}: 'choices' keys must be letters, got {', '.join(map(str, raw))}")
        return labels, [_as_text(by_label[label]) for label in labels]
    if isinstance(raw, list):
        if len(raw) > 26:
            raise DataError(f"{where}: 'choices' has more than 26 options")
        return [chr(ord("A") + i) for i in range(len(raw))], [_as_text(v) for v in raw]
    raise DataError(f"{where}: 'choices' must be an object like {{\"A\": ...}} or a list")


def _correct_letter(qa: JsonObject, labels: list[str], texts: list[str], where: str) -> str:
    """The right letter: `ground_truth`, else an `answer` that is a letter or a choice's text."""
    for key in ("ground_truth", "answer"):
        value = qa.get(key)
        match = _LETTER.match(value) if isinstance(value, str) else None
        if match and match.group(1).upper() in labels:
            return match.group(1).upper()
        if key == "ground_truth" and value is not None:
            raise DataError(f"{where}: 'ground_truth' {value!r} is not one of the choices {', '.join(labels)}")
    answer = qa.get("answer")
    if answer is not None:
        wanted = _as_text(answer).strip().lower()
        for label, text in zip(labels, texts):
            if text.strip().lower() == wanted:
                return label
    raise DataError(f"{where} has no 'ground_truth' naming one of the choices {', '.join(labels)}")


def _evidence(raw: Any, positions: dict[tuple[int, int], int], where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else [raw]
    ids: list[str] = []
    for item in items:
        if isinstance(item, bool):
            item = None
        if isinstance(item, int):
            turn_id = f"m{item}"
        elif isinstance(item, list) and len(item) == 2 and all(isinstance(v, int) for v in item):
            flat = positions.get((item[0], item[1]))
            turn_id = f"m{flat}" if flat is not None else f"s{item[0]}:m{item[1]}"
        elif isinstance(item, str) and item.strip().isdigit():
            turn_id = f"m{int(item)}"
        else:
            raise DataError(
                f"{where}: 'target_step_id' entries must be indexes or [session, position] pairs, got {item!r}"
            )
        if turn_id not in ids:
            ids.append(turn_id)
    return tuple(ids)
