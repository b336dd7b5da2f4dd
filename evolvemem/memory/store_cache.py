"""On-disk cache of extracted memories, so a second run pays no extraction.

Key: conversation id + a hash of the conversation's content, the extractor's name, its model and
its prompt/rules version. Any edit to a turn, a prompt or a rule therefore misses the cache and
re-extracts; nothing is ever invalidated by hand (but a served memory that forgets a user removes
that conversation's files: `forget_conversation`). Files live under `cache_dir()/memories/` as
JSON and are written atomically (temp file, then rename), so a crash never leaves half a file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import asdict, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from evolvemem.data.models import Conversation
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.paths import cache_dir, write_atomic
from evolvemem.contracts.usage import Usage
from evolvemem.contracts.roles import Extractor

FORMAT_VERSION = 1
_TUPLE_FIELDS = ("source_turn_ids", "persons", "locations", "entities", "topics", "keywords")
_UNIT_FIELDS = tuple(f.name for f in fields(MemoryUnit) if f.name != "embedding")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
log = logging.getLogger(__name__)


def conversation_hash(conversation: Conversation) -> str:
    """Hash of everything an extractor reads: speakers, and every turn's id, speaker, text,
    caption, session and timestamp."""
    digest = hashlib.sha256()
    digest.update(json.dumps(list(conversation.speakers)).encode("utf-8"))
    for turn in conversation.turns():
        record = [
            turn.turn_id,
            turn.speaker,
            turn.text,
            turn.image_caption,
            turn.session_id,
            turn.timestamp.isoformat() if turn.timestamp else None,
        ]
        digest.update(json.dumps(record, ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()[:24]


def cache_key(extractor: Extractor, conversation: Conversation, turn_ids: set[str] | None = None) -> dict[str, str]:
    key = {
        "conversation_id": conversation.conversation_id,
        "conversation_hash": conversation_hash(conversation),
        "extractor": str(extractor.name),
        "model": str(getattr(extractor, "model", "") or ""),
        "version": str(extractor.version),
        "format": str(FORMAT_VERSION),
    }
    if turn_ids is not None:
        key["turn_ids"] = hashlib.sha256("\n".join(sorted(turn_ids)).encode("utf-8")).hexdigest()[:16]
    return key


def _folder(conversation_id: str) -> Path:
    return cache_dir() / "memories" / (_SAFE_NAME.sub("_", conversation_id) or "conversation")


def cache_path(key: dict[str, str]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:32]
    return _folder(key["conversation_id"]) / f"{_SAFE_NAME.sub('_', key['extractor'])}-{digest}.json"


def unit_to_dict(unit: MemoryUnit) -> dict[str, Any]:
    data = asdict(unit)
    data.pop("embedding", None)
    data["timestamp"] = unit.timestamp.isoformat() if unit.timestamp else None
    for name in _TUPLE_FIELDS:
        data[name] = list(data[name])
    return data


def unit_from_dict(data: dict[str, Any]) -> MemoryUnit:
    values = {name: data[name] for name in _UNIT_FIELDS if name in data}
    for name in _TUPLE_FIELDS:
        if name in values:
            values[name] = tuple(values[name])
    if values.get("timestamp"):
        values["timestamp"] = datetime.fromisoformat(values["timestamp"])
    return MemoryUnit(**values)


def read_cached(key: dict[str, str]) -> tuple[list[MemoryUnit], Usage] | None:
    """The cached units and what extracting them once cost, or None (missing, stale or corrupt)."""
    path = cache_path(key)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        if payload.get("key") != key:
            return None
        units = [unit_from_dict(item) for item in payload["units"]]
        return units, Usage(**payload.get("cost", {}))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable memory cache file %s (%s); extracting again", path, exc)
        return None


def write_cached(key: dict[str, str], units: list[MemoryUnit], cost: Usage) -> Path:
    """Write atomically (`paths.write_atomic`): readers never see half a file."""
    payload = {"key": key, "cost": asdict(cost), "units": [unit_to_dict(u) for u in units]}
    return write_atomic(cache_path(key), json.dumps(payload, ensure_ascii=False))


def forget_conversation(conversation_id: str) -> int:
    """Delete every cached extraction of `conversation_id` (other conversations whose ids share its
    folder name are kept); returns the files deleted."""
    folder = _folder(conversation_id)
    deleted = 0
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            key = json.loads(path.read_text(encoding="utf-8")).get("key", {})
        except (OSError, ValueError, AttributeError):
            key = {"conversation_id": conversation_id}  # unreadable: it may be this one's, and is only a cache
        if key.get("conversation_id") == conversation_id:
            path.unlink(missing_ok=True)
            deleted += 1
    return deleted


def load_or_extract(
    extractor: Extractor, conversation: Conversation, turn_ids: set[str] | None = None
) -> tuple[list[MemoryUnit], Usage, bool]:
    """Memories for `conversation` (or only `turn_ids`): from the cache when the key matches,
    else extracted and cached. Returns (units, cost paid now, from_cache); a hit costs nothing.

    An extraction that ended with failed windows is not cached (an extractor reports them in
    `failed_turns[conversation_id]`), so the next run tries those turns again instead of
    freezing the gap."""
    key = cache_key(extractor, conversation, turn_ids)
    cached = read_cached(key)
    if cached is not None:
        return cached[0], Usage(), True
    units, cost = extractor.extract(conversation, turn_ids)
    failed = getattr(extractor, "failed_turns", {}).get(conversation.conversation_id)
    if not failed:
        write_cached(key, units, cost)
    return units, cost, False
