"""LoCoMo-10 (Maharana et al., ACL 2024) in its canonical `locomo10.json` format.

The file is a list of samples: `sample_id`, `conversation` (`speaker_a`, `speaker_b`,
`session_N` turn lists, `session_N_date_time` like "1:56 pm on 8 May, 2023") and `qa` items
(`question`, `answer` and/or `adversarial_answer`, `evidence` dialog ids like "D1:3", `category`
1..5). Some `session_N_date_time` keys have no session (they are ignored); a few evidence
strings are malformed ("D3:4; D5:2", "D:2:7") and are normalised here.

The data is CC BY-NC 4.0, so the project never ships it: `resolve_locomo_path` finds a copy the
user gave, or downloads the official file once into the cache.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from evolvemem.data.dates import parse_locomo_datetime
from evolvemem.data.loader import JsonObject, bytes_hash, keyed_entries, parse_json_bytes, read_json_list
from evolvemem.data.models import Conversation, Dataset, Question, Session, Turn
from evolvemem.errors import DataError
from evolvemem.paths import cache_dir, write_atomic

LOCOMO_URL = "https://raw.githubusercontent.com/snap-research/locomo/main/data/locomo10.json"
PATH_ENV = "EVOLVEMEM_LOCOMO_PATH"
URL_ENV = "EVOLVEMEM_LOCOMO_URL"  # a mirror; tests point it at a local server
DOWNLOAD_TIMEOUT_S = 20.0

CATEGORY_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop", "5": "adversarial"}
# Category ids follow the official evaluation code (not the order the paper lists them in).
CATEGORY_TO_TYPE = {"1": "multi_hop", "2": "temporal", "3": "inference", "4": "single_fact", "5": "adversarial"}
ADVERSARIAL_CATEGORIES = ("5",)

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def cached_locomo_path() -> Path:
    return cache_dir() / "datasets" / "locomo10.json"


def resolve_locomo_path(data: str | None = None) -> Path:
    """Where the LoCoMo file is: `--data PATH`, else $EVOLVEMEM_LOCOMO_PATH, else the cache,
    else downloaded from the official repository into the cache."""
    if data:
        return _existing(Path(data).expanduser(), "--data")
    from_env = os.environ.get(PATH_ENV, "").strip()
    if from_env:
        return _existing(Path(from_env).expanduser(), PATH_ENV)
    cached = cached_locomo_path()
    if cached.is_file():
        return cached
    return download_locomo(cached)


def _existing(path: Path, origin: str) -> Path:
    if not path.is_file():
        raise DataError(f"{path}: LoCoMo file not found (given by {origin})")
    return path


def download_locomo(target: Path) -> Path:
    """Fetch locomo10.json into `target` (temp file then rename, so a failed download leaves
    nothing behind). The file must parse as a JSON list before it is kept."""
    url = os.environ.get(URL_ENV, "").strip() or LOCOMO_URL
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            payload = response.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DataError(
            f"LoCoMo data not found and the download from {url} failed ({reason}): download "
            f"locomo10.json from {LOCOMO_URL} and pass --data PATH, set {PATH_ENV}=PATH, "
            f"or save it as {target}"
        ) from None
    parsed = parse_json_bytes(payload, f"download from {url}")
    if not isinstance(parsed, list):
        raise DataError(f"download from {url}: expected a JSON list of LoCoMo samples, got {type(parsed).__name__}")
    return write_atomic(target, payload)


def load_locomo(path: str | Path) -> Dataset:
    """Load a LoCoMo file. Any malformed sample raises DataError; nothing is half-loaded."""
    path = Path(path)
    raw, payload = read_json_list(path, "samples")
    conversations: dict[str, Conversation] = {}
    questions: list[Question] = []
    for sample_id, sample, where in keyed_entries(raw, path.name, "sample", "sample_id"):
        conversation = _conversation(sample.get("conversation"), sample_id, where)
        conversations[sample_id] = conversation
        questions.extend(_questions(sample, conversation, where))
    return Dataset(
        warnings=_unknown_evidence_warning(path.name, conversations, questions),
        name="locomo",
        conversations=conversations,
        questions=questions,
        category_names=dict(CATEGORY_NAMES),
        adversarial_categories=ADVERSARIAL_CATEGORIES,
        source=str(path),
        content_hash=bytes_hash(payload),
    )


def _conversation(raw: Any, sample_id: str, where: str) -> Conversation:
    if not isinstance(raw, dict):
        raise DataError(f"{where} has no 'conversation' object")
    numbers = sorted(int(m.group(1)) for key in raw if (m := _SESSION_KEY.match(key)))
    if not numbers:
        raise DataError(f"{where}: conversation has no session_N lists")
    sessions: list[Session] = []
    seen_turns: set[str] = set()
    speakers: list[str] = [str(raw[k]) for k in ("speaker_a", "speaker_b") if isinstance(raw.get(k), str)]
    for number in numbers:
        key = f"session_{number}"
        turns_raw = raw[key]
        if not isinstance(turns_raw, list):
            raise DataError(f"{where}: {key} must be a list of turns")
        date_key = f"{key}_date_time"
        if date_key not in raw:
            raise DataError(f"{where}: {key} has no '{date_key}'")
        try:
            timestamp = parse_locomo_datetime(raw[date_key])
        except ValueError as exc:
            raise DataError(f"{where}: {date_key} {exc}") from None
        turns = []
        for t_index, turn in enumerate(turns_raw):
            turn_where = f"{where}: {key}[{t_index}]"
            if not isinstance(turn, dict):
                raise DataError(f"{turn_where} is not an object")
            for field in ("dia_id", "speaker", "text"):
                if not isinstance(turn.get(field), str):
                    raise DataError(f"{turn_where} has no '{field}'")
            turn_id = turn["dia_id"].strip()
            if turn_id in seen_turns:
                raise DataError(f"{turn_where}: duplicate dia_id {turn_id!r}")
            seen_turns.add(turn_id)
            caption = turn.get("blip_caption")
            turns.append(
                Turn(
                    turn_id=turn_id,
                    speaker=turn["speaker"],
                    text=turn["text"],
                    session_id=key,
                    timestamp=timestamp,
                    image_caption=caption.strip() if isinstance(caption, str) and caption.strip() else None,
                )
            )
            if turn["speaker"] not in speakers:
                speakers.append(turn["speaker"])
        sessions.append(Session(session_id=key, timestamp=timestamp, turns=tuple(turns)))
    return Conversation(conversation_id=sample_id, sessions=tuple(sessions), speakers=tuple(speakers))


def _questions(sample: JsonObject, conversation: Conversation, where: str) -> list[Question]:
    qa = sample.get("qa")
    if not isinstance(qa, list):
        raise DataError(f"{where} has no 'qa' list")
    question_date = conversation.sessions[-1].timestamp
    out = []
    for index, item in enumerate(qa):
        item_where = f"{where}: qa[{index}]"
        if not isinstance(item, dict):
            raise DataError(f"{item_where} is not an object")
        text = item.get("question")
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{item_where} has no 'question'")
        category = str(item.get("category", "")).strip()
        if category not in CATEGORY_TO_TYPE:
            raise DataError(f"{item_where}: 'category' must be one of 1-5, got {item.get('category')!r}")
        answer = item.get("answer")
        adversarial = item.get("adversarial_answer")
        if answer is None and (category not in ADVERSARIAL_CATEGORIES or adversarial is None):
            raise DataError(f"{item_where} (category {category}) has no 'answer'")
        evidence = item.get("evidence", [])
        if not isinstance(evidence, list):
            raise DataError(f"{item_where}: 'evidence' must be a list of dialog ids")
        out.append(
            Question(
                question_id=f"{conversation.conversation_id}:q{index}",
                conversation_id=conversation.conversation_id,
                text=text.strip(),
                category=category,
                question_type=CATEGORY_TO_TYPE[category],
                answers=() if answer is None else (str(answer),),
                evidence=normalize_evidence(evidence),
                question_date=question_date,
                adversarial_answer=None if adversarial is None else str(adversarial),
            )
        )
    return out


def _unknown_evidence_warning(
    name: str, conversations: dict[str, Conversation], questions: list[Question]
) -> tuple[str, ...]:
    """The published LoCoMo file has a few evidence ids that name no turn of their conversation (a
    typo in the source); refusing the file would refuse the benchmark, so they are counted and told."""
    turns = {cid: {t.turn_id for t in c.turns()} for cid, c in conversations.items()}
    total = sum(len(q.evidence) for q in questions)
    unknown = [(q.question_id, e) for q in questions for e in q.evidence if e not in turns[q.conversation_id]]
    if not unknown:
        return ()
    qid, example = unknown[0]
    return (
        f"{name}: {len(unknown)} of {total} evidence ids name no turn of their conversation (e.g. {example!r} "
        f"in {qid}); no context can hold them, so they lower evidence recall",
    )


def normalize_evidence(raw: list[Any]) -> tuple[str, ...]:
    """Clean LoCoMo dialog ids: split "D3:4; D5:2", repair "D:2:7", drop "D", "D3:05" -> "D3:5";
    order kept, duplicates removed."""
    ids: list[str] = []
    for item in raw:
        for session, turn in _DIA_ID.findall(item if isinstance(item, str) else json.dumps(item)):
            dia_id = f"D{int(session)}:{int(turn)}"
            if dia_id not in ids:
                ids.append(dia_id)
    return tuple(ids)
