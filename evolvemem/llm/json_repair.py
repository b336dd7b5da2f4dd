"""Lenient JSON parsing for model replies.

Models asked for JSON still wrap it in code fences, put a sentence in front, leave trailing
commas, write Python literals (single quotes, True/None) or stop mid-object at the token limit.
`parse_json_lenient` undoes those habits; it never guesses content, so a reply that does not
contain a JSON-like value still raises ValueError.

Why not the `json-repair` package: on the cases of tests/test_llm_client.py (0.64.6) it guesses
content — a reply cut at `"b": tr` gives the string "tr", a dangling key "", and of two objects it
keeps the last — and returns "" or {} for a reply without JSON instead of raising, which the
client's one re-ask relies on; its strict mode refuses fenced and prose-wrapped replies instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js|python)?[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_JSON_WORDS = {"true", "false", "null", "NaN", "Infinity"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"', "'": "'"}
_MAX_STARTS = 20  # candidate '{' / '[' positions tried in a reply with prose around the JSON
_MAX_TRIMS = 50  # truncated replies: how many trailing items we are willing to drop


def parse_json_lenient(text: str) -> Any:
    """Parse a model reply as JSON, repairing common damage; ValueError when no value can be found."""
    stripped = (text or "").strip()
    if not stripped:
        raise ValueError("empty reply: no JSON value")
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    for candidate in _candidates(stripped):
        value = _parse_repaired(candidate)
        if value is not _FAILED:
            return value
    preview = " ".join(stripped.split())[:80]
    raise ValueError(f"no JSON value could be recovered from reply: {preview!r}")


_FAILED = object()


def _candidates(text: str) -> list[str]:
    """Fenced blocks first, then the text from each opening bracket onwards."""
    found = [m.group(1).strip() for m in _FENCE.finditer(text) if m.group(1).strip()]
    starts = [i for i, ch in enumerate(text) if ch in "{["][:_MAX_STARTS]
    found.extend(text[i:] for i in starts)
    return found


def _parse_repaired(candidate: str) -> Any:
    """Try the repaired candidate; if truncation left a dangling item, drop items from the end."""
    repaired = _repair(candidate)
    try:
        return json.loads(repaired)
    except ValueError:
        pass
    cut_points = [i for i, ch in enumerate(candidate) if ch == ","][::-1][:_MAX_TRIMS]
    for cut in cut_points:
        try:
            return json.loads(_repair(candidate[:cut]))
        except ValueError:
            continue
    return _FAILED


def _repair(text: str) -> str:
    """Rewrite one JSON-like value into strict JSON; text after the value's closing bracket is dropped."""
    out: list[str] = []
    closers: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            value, i = _read_string(text, i)
            out.append(json.dumps(value, ensure_ascii=False))
            continue
        if ch in "{[":
            closers.append("}" if ch == "{" else "]")
            out.append(ch)
        elif ch in "}]":
            _drop_trailing_comma(out)
            if closers:
                closers.pop()
            out.append(ch)
            if not closers:
                return "".join(out)
        elif ch.isalpha() or ch == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            if word in _PY_LITERALS:
                out.append(_PY_LITERALS[word])
            elif word in _JSON_WORDS:
                out.append(word)
            elif text[j:].lstrip().startswith(":"):
                out.append(json.dumps(word))  # bare object key
            else:
                out.append(word)  # left as is: json.loads will reject it
            i = j
            continue
        else:
            out.append(ch)
        i += 1
    # Truncated reply: finish a dangling "key": with null, drop a trailing comma, close brackets.
    _drop_trailing_comma(out)
    if "".join(out).rstrip().endswith(":"):
        out.append("null")
    return "".join(out) + "".join(reversed(closers))


def _drop_trailing_comma(out: list[str]) -> None:
    k = len(out) - 1
    while k >= 0 and out[k].isspace():
        k -= 1
    if k >= 0 and out[k] == ",":
        del out[k]


def _read_string(text: str, start: int) -> tuple[str, int]:
    """Decode a single- or double-quoted string starting at `start`; an unterminated one runs to the end."""
    quote = text[start]
    chars: list[str] = []
    i, n = start + 1, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6] or ""):
                chars.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            chars.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        if ch == quote:
            return "".join(chars), i + 1
        chars.append(ch)
        i += 1
    return "".join(chars), n
