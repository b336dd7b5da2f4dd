"""Query decomposition: split a question into sub-queries that can each be retrieved alone.

Two implementations of the `Decomposer` role:

- `RuleDecomposer` (offline) splits on surface structure: possessive chains, clauses joined by
  a conjunction, comparisons ("... than ..."), choices (", A or B?") and coordinated items
  ("both A and B", "A, B and C"). The first rule that yields two or more useful sub-queries
  wins; a question that does not split comes back as `[question]`.
- `LLMDecomposer` asks a model (prompts/decompose.md) for a JSON list. When the call fails it
  falls back to `[question]` and records the failure, so retrieval goes on without it.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Callable

from evolvemem.contracts.usage import Usage
from evolvemem.llm.client import LLMCallFailed, LLMJSONError
from evolvemem.prompts import load_prompt

log = logging.getLogger(__name__)

_WH_OR_AUX = (
    r"(?:what|where|when|who|whom|whose|which|why|how|did|does|do|is|are|was|were|has|have|had|"
    r"will|would|can|could|should)"
)
_CLAUSE_BREAK = re.compile(rf"\s*;\s*|,?\s+(?:and|but|while|or)\s+(?={_WH_OR_AUX}\b)|,\s+(?={_WH_OR_AUX}\b)", re.I)
_POSSESSIVE_CHAIN = re.compile(r"\b([A-Z][\w-]*(?:\s+[A-Z][\w-]*)?|\w+)['’]s((?:\s+[\w-]+['’]s)+)\s+([\w-]+)")
_COMPARATIVE = re.compile(r"^(?P<left>.+?)\s+than\s+(?P<right>.+?)[?.!]*$", re.I)
_CHOICE = re.compile(r"^(?P<stem>.+?),\s*(?P<a>[^,]+?)\s+or\s+(?P<b>[^,]+?)[?.!]*$", re.I)
_BOTH = re.compile(r"\b(?i:both)\s+(?P<a>.+?)\s+and\s+(?P<b>[^\s,]+(?:\s+[A-Z][\w-]*)*)")
_NAME_PAIR = re.compile(r"\b(?P<a>[A-Z][a-z][\w-]*)\s+and\s+(?P<b>[A-Z][a-z][\w-]*)\b")
_LIST_SPLIT = re.compile(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", re.I)
_CAPITALISED = re.compile(r"\b[A-Z][a-z][\w-]*\b")
_TRAILING = re.compile(r"[?.!\s]+$")
_WORD = re.compile(r"[A-Za-z0-9]+")
_FUNCTION_WORDS = frozenset(
    "a an the and or but of to in on at for with from by about is are was were be been do does did has have had "
    "what where when who whom whose which why how will would can could should she he they it her his their its "
    "both each all".split()
)
_MAX_ITEM_WORDS = 4  # list items longer than this are clauses, not items


def _content_words(text: str) -> int:
    return sum(1 for w in _WORD.findall(text.lower()) if w not in _FUNCTION_WORDS)


def _useful(parts: list[str]) -> list[str]:
    """Trimmed, de-duplicated parts that carry content; fewer than two means "no split"."""
    seen: dict[str, str] = {}
    for part in parts:
        part = _TRAILING.sub("", part).strip(" ,;")
        if part and _content_words(part) >= 1:
            seen.setdefault(part.lower(), part)
    out = list(seen.values())
    return out if len(out) >= 2 else []


def _possessive_chain(question: str) -> list[str]:
    """ "Priya's sister's city" -> ["Priya's sister", "sister's city"]: one hop per pair."""
    match = _POSSESSIVE_CHAIN.search(question)
    if not match:
        return []
    middle = [re.sub(r"['’]s$", "", w) for w in match.group(2).split()]
    chain = [match.group(1), *middle, match.group(3)]
    return _useful([f"{a}'s {b}" for a, b in zip(chain, chain[1:])])


def _clauses(question: str) -> list[str]:
    """Clauses joined by a conjunction or a comma before a question word."""
    return _useful(_CLAUSE_BREAK.split(question))


def _comparison(question: str) -> list[str]:
    """ "Is Priya taller than Tomasz?" -> ["Is Priya taller", "Is Tomasz taller"]."""
    match = _COMPARATIVE.match(question.strip())
    if not match:
        return []
    left, right = match.group("left"), match.group("right")
    subject = _CAPITALISED.findall(left[1:])  # skip the question's own first word
    if subject and len(right.split()) <= 3:
        return _useful([left, left.replace(subject[0], right, 1)])
    return _useful([left, right])


def _choice(question: str) -> list[str]:
    """ "Which did Priya visit first, Lisbon or Porto?" -> the stem with each option."""
    match = _CHOICE.match(question.strip())
    if not match:
        return []
    stem = match.group("stem")
    return _useful([f"{stem} {match.group('a')}", f"{stem} {match.group('b')}"])


def _coordination(question: str) -> list[str]:
    """ "both A and B", two names "A and B", or a trailing list "A, B and C": one sub-query per item."""
    text = _TRAILING.sub("", question.strip())
    for pattern in (_BOTH, _NAME_PAIR):
        match = pattern.search(text)
        if match:
            a, b = match.group("a"), match.group("b")
            if len(a.split()) <= _MAX_ITEM_WORDS:
                before, after = text[: match.start()], text[match.end() :]
                return _useful([f"{before}{a}{after}", f"{before}{b}{after}"])
    items = [p for p in _LIST_SPLIT.split(text) if p]
    rest = items[1:]
    if not rest or any(len(i.split()) > _MAX_ITEM_WORDS or not _content_words(i) for i in rest):
        return []
    # The first item is the tail of the first part; assume it is as short as the shortest other item.
    head_words = items[0].split()
    size = min(len(i.split()) for i in rest)
    if len(head_words) <= size:
        return []
    stem = " ".join(head_words[:-size])
    return _useful([f"{stem} {item}" for item in [" ".join(head_words[-size:]), *rest]])


_RULES: tuple[Callable[[str], list[str]], ...] = (_possessive_chain, _clauses, _comparison, _choice, _coordination)


class RuleDecomposer:
    """Offline decomposition by surface rules; never calls a model."""

    name = "rule"

    def decompose(self, question: str, max_sub_queries: int) -> tuple[list[str], Usage]:
        for rule in _RULES:
            parts = rule(question)
            if parts:
                return parts[: max(1, max_sub_queries)], Usage()
        return [question], Usage()


def parse_sub_queries(parsed: Any) -> list[str]:
    """The sub-queries in a model's JSON reply: {"sub_queries": [...]} or a bare list."""
    if isinstance(parsed, dict):
        parsed = next((parsed[k] for k in ("sub_queries", "subqueries", "queries", "questions") if k in parsed), None)
    if not isinstance(parsed, list):
        raise ValueError("the reply has no list of sub-queries")
    return [str(item).strip() for item in parsed if isinstance(item, (str, int, float)) and str(item).strip()]


class LLMDecomposer:
    """Decomposition by a model. Failures fall back to `[question]` and are kept in `failures`."""

    def __init__(self, client: Any, prompt_name: str = "decompose", max_tokens: int = 256):
        self.client = client
        self.prompt = load_prompt(prompt_name)
        self.max_tokens = max_tokens
        self.name = f"llm:{getattr(client, 'model', 'unknown')}"
        self.failures: list[str] = []
        self._lock = threading.Lock()

    def decompose(self, question: str, max_sub_queries: int) -> tuple[list[str], Usage]:
        limit = max(1, max_sub_queries)
        messages = [{"role": "user", "content": self.prompt.render(question=question, max_sub_queries=limit)}]
        try:
            parsed, reply = self.client.complete_json(messages, role="decompose", max_tokens=self.max_tokens)
            sub_queries = parse_sub_queries(parsed)
        except LLMCallFailed as exc:
            cost = exc.reply.as_cost() if isinstance(exc, LLMJSONError) else Usage()
            self._record(f"{exc}")
            return [question], cost
        except ValueError as exc:
            self._record(f"{self.name} [decompose] unusable reply: {exc}")
            return [question], reply.as_cost()
        return (sub_queries[:limit] or [question]), reply.as_cost()

    def _record(self, message: str) -> None:
        log.warning("query decomposition failed, using the question itself: %s", message)
        with self._lock:
            self.failures.append(message)
