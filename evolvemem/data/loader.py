"""The file reading all benchmark loaders share.

Each benchmark module exposes its own `load_*` function; the benchmark table
(evolvemem/benchmarks.py) names them. Reading is shared so that every loader reports a missing
file or broken JSON the same way and hashes the exact bytes it parsed (the hash identifies the
data in run manifests and caches).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

from evolvemem.errors import DataError


# A JSON object as a file holds it, before a loader has checked it: keys are text, values whatever
# the file put there (each loader checks a field's type where it reads it, naming the record).
JsonObject = dict[str, Any]


def bytes_hash(data: bytes) -> str:
    """`Dataset.content_hash`: the first 16 hex digits of the sha256 of the data's bytes."""
    return hashlib.sha256(data).hexdigest()[:16]


def read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise DataError(f"{path}: file not found")
    if path.is_dir():
        raise DataError(f"{path}: is a directory, expected a file")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def parse_json_bytes(data: bytes, label: str) -> Any:
    """Decode JSON, naming the file and the position of the first syntax error."""
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise DataError(f"{label}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{label}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def read_json_list(path: Path, items: str) -> tuple[list[object], bytes]:
    """A JSON file whose top level must be a list (of `items`, named in the error); returns the
    list and the raw bytes (for the dataset's content hash)."""
    payload = read_bytes(path)
    raw = parse_json_bytes(payload, path.name)
    if not isinstance(raw, list):
        raise DataError(f"{path.name}: top level must be a list of {items}, got {type(raw).__name__}")
    return raw, payload


def keyed_entries(
    raw: list[object], label: str, noun: str, key: str, *, strip: bool = False
) -> Iterator[tuple[str, JsonObject, str]]:
    """Each entry of a benchmark file's top-level list as (its id, the entry, where it stands for
    errors): the entry must be an object whose `key` is a non-blank string or integer (as text,
    `strip`ped when asked), unique in the file."""
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        where = f"{label}: {noun} {index}"
        if not isinstance(entry, dict):
            raise DataError(f"{where} is not an object")
        value = entry.get(key)
        if not isinstance(value, (str, int)) or str(value).strip() == "":
            raise DataError(f"{where} has no {key!r}")
        entry_id = str(value).strip() if strip else str(value)
        where = f"{where} ({entry_id})"
        if entry_id in seen:
            raise DataError(f"{where}: duplicate {key}")
        seen.add(entry_id)
        yield entry_id, entry, where


def require_path(name: str, data: str | Path | None) -> Path:
    if data is None or str(data).strip() == "":
        raise DataError(f"benchmark {name!r} reads a file you supply: pass --data PATH")
    return Path(data).expanduser()
