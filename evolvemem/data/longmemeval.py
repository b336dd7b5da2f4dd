"""LongMemEval (Wu et al., ICLR 2025): each question comes with its own chat history.

The file is a list of entries: `question_id`, `question_type`, `question`, `answer`,
`question_date`, and the history as parallel lists `haystack_session_ids`, `haystack_dates`
("2023/05/20 (Sat) 02:21") and `haystack_sessions` (each a list of {role, content,
has_answer?}), plus `answer_session_ids`. A question id ending in "_abs" marks an abstention
question (the answer is not in the history).

Every entry becomes its own Conversation (id = question_id) with turn ids "<session id>:<i>".
Evidence is the turns flagged `has_answer`; entries without flags fall back to every turn of
the answer sessions, which is what session-level recall measures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evolvemem.data.dates import parse_longmemeval_date
from evolvemem.data.loader import JsonObject, bytes_hash, keyed_entries, read_json_list
from evolvemem.data.models import Conversation, Dataset, Question, Session, Turn
from evolvemem.errors import DataError

TYPE_MAP = {
    "single-session-user": "single_fact",
    "single-session-assistant": "single_fact",
    "single-session-preference": "preference",
    "multi-session": "multi_hop",
    "temporal-reasoning": "temporal",
    "knowledge-update": "knowledge_update",
}
ABSTENTION = "abstention"  # category of "_abs" questions, reported apart like LoCoMo's adversarial
CATEGORY_NAMES = {**{t: t.replace("-", " ") for t in TYPE_MAP}, ABSTENTION: ABSTENTION}


def load_longmemeval(path: str | Path) -> Dataset:
    """Load longmemeval_s / _m / _oracle JSON; any malformed entry raises DataError."""
    path = Path(path)
    raw, payload = read_json_list(path, "question entries")
    conversations: dict[str, Conversation] = {}
    questions: list[Question] = []
    for question_id, entry, where in keyed_entries(raw, path.name, "entry", "question_id", strip=True):
        conversation, turns_of_session, flagged = _conversation(entry, question_id, where)
        conversations[question_id] = conversation
        questions.append(_question(entry, question_id, turns_of_session, flagged, where))
    return Dataset(
        name="longmemeval",
        conversations=conversations,
        questions=questions,
        category_names=dict(CATEGORY_NAMES),
        adversarial_categories=(ABSTENTION,),
        source=str(path),
        content_hash=bytes_hash(payload),
    )


def _field(entry: JsonObject, key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in entry:
        raise DataError(f"{where} has no '{key}'")
    value = entry[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{where}: '{key}' has the wrong type ({type(value).__name__})")
    return value


def _conversation(
    entry: JsonObject, question_id: str, where: str
) -> tuple[Conversation, dict[str, list[str]], list[str]]:
    """The history as sessions, session id -> its turn ids (for answer_session_ids), and the
    turns flagged has_answer."""
    session_ids = _field(entry, "haystack_session_ids", where, list)
    dates = _field(entry, "haystack_dates", where, list)
    sessions_raw = _field(entry, "haystack_sessions", where, list)
    if not len(session_ids) == len(dates) == len(sessions_raw):
        raise DataError(
            f"{where}: haystack_session_ids, haystack_dates and haystack_sessions differ in length "
            f"({len(session_ids)}, {len(dates)}, {len(sessions_raw)})"
        )
    sessions: list[Session] = []
    turns_of: dict[str, list[str]] = {}
    for s_index, (raw_id, date, turns_raw) in enumerate(zip(session_ids, dates, sessions_raw)):
        s_where = f"{where}: haystack_sessions[{s_index}]"
        name = str(raw_id)
        # the same session can appear twice in one history; keep both, with distinct ids
        session_id = name if name not in turns_of else f"{name}#{s_index}"
        try:
            timestamp = parse_longmemeval_date(date)
        except ValueError as exc:
            raise DataError(f"{where}: haystack_dates[{s_index}] {exc}") from None
        if not isinstance(turns_raw, list):
            raise DataError(f"{s_where} must be a list of turns")
        turns = []
        for t_index, turn in enumerate(turns_raw):
            t_where = f"{s_where}[{t_index}]"
            if not isinstance(turn, dict):
                raise DataError(f"{t_where} is not an object")
            role, content = turn.get("role"), turn.get("content")
            if not isinstance(role, str) or not role:
                raise DataError(f"{t_where} has no 'role'")
            if not isinstance(content, str):
                raise DataError(f"{t_where} has no 'content'")
            turns.append(
                Turn(
                    turn_id=f"{session_id}:{t_index}",
                    speaker=role,
                    text=content,
                    session_id=session_id,
                    timestamp=timestamp,
                )
            )
        turns_of.setdefault(name, []).extend(t.turn_id for t in turns)
        if session_id != name:
            turns_of[session_id] = [t.turn_id for t in turns]
        sessions.append(Session(session_id=session_id, timestamp=timestamp, turns=tuple(turns)))
    flagged = [
        f"{session.session_id}:{i}"
        for session, raw_turns in zip(sessions, sessions_raw)
        for i, turn in enumerate(raw_turns)
        if turn.get("has_answer") is True
    ]
    conversation = Conversation(conversation_id=question_id, sessions=tuple(sessions), speakers=("user", "assistant"))
    return conversation, turns_of, flagged


def _question(
    entry: JsonObject, question_id: str, turns_of: dict[str, list[str]], flagged: list[str], where: str
) -> Question:
    text = _field(entry, "question", where, str)
    if not text.strip():
        raise DataError(f"{where}: 'question' is empty")
    raw_type = _field(entry, "question_type", where, str)
    if raw_type not in TYPE_MAP:
        raise DataError(f"{where}: question_type {raw_type!r} is not one of {', '.join(TYPE_MAP)}")
    answer = _field(entry, "answer", where, (str, int, float))
    try:
        question_date = parse_longmemeval_date(_field(entry, "question_date", where, str))
    except ValueError as exc:
        raise DataError(f"{where}: question_date {exc}") from None
    answer_sessions = entry.get("answer_session_ids", [])
    if not isinstance(answer_sessions, list):
        raise DataError(f"{where}: 'answer_session_ids' must be a list")
    evidence = flagged or [t for s in answer_sessions for t in turns_of.get(str(s), [])]
    abstention = question_id.endswith("_abs")
    return Question(
        question_id=question_id,
        conversation_id=question_id,
        text=text.strip(),
        category=ABSTENTION if abstention else raw_type,
        question_type="adversarial" if abstention else TYPE_MAP[raw_type],
        answers=(str(answer),),
        evidence=tuple(dict.fromkeys(evidence)),
        question_date=question_date,
    )
