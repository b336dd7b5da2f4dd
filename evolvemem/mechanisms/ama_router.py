"""Granularity routing (after AMA): which memory store a question should read.

Why: an atomic fact answers "when" and "how many"; a quotation needs the turn as it was said;
"what happened", "how did she feel" and "why" need the whole exchange. `memory_granularity`
fixes the store, or, as "routed", lets each question's intent choose it.

Offline the intent is read by surface rules (first match wins):

- raw:     asks for wording — "exactly", "verbatim", "word for word", "quote", "in her own
           words", "what did X say / write / tell", or quotes a phrase;
- fact:    asks for a specific value — when / what date / how many / how long / who / where,
           "the name of", "number of";
- episode: asks for an account — why, what happened, how did X feel / react / cope, what was
           it like, describe, experiences, reasons;
- fact:    anything else.

With a model (the answer role's client) the model picks (prompts/route.md, JSON
{"granularity": ...}); a failed or unusable reply falls back to the rules.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from evolvemem.contracts.vocab import StoreKind
from evolvemem.contracts.usage import Usage
from evolvemem.data.models import Question
from evolvemem.llm.ask import ask_json, parse_choice
from evolvemem.prompts import load_prompt
from evolvemem.space.action_space import files_space

if TYPE_CHECKING:
    from evolvemem.llm.client import LLMClient
    from evolvemem.space.config import RetrievalConfig

FACT, RAW, EPISODE = StoreKind.FACT, StoreKind.RAW, StoreKind.EPISODE
ROUTED = "routed"  # memory_granularity: each question's intent picks the store
OWNS = ("memory_granularity",)
# the stores a question can be routed to: every choice of memory_granularity but "routed"
GRANULARITIES = tuple(c for c in files_space().enum("memory_granularity").choices if c != ROUTED)
ROUTE_MAX_TOKENS = 60

_NAME = r"[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?"
_RAW_WORDS = re.compile(
    r"\b(?:exact(?:ly)?|verbatim|word[- ]for[- ]word|quot(?:e|ed|es|ing)"
    r"|(?:in|with) (?:his|her|their|\w+'s) (?:own )?words|how did \w+(?: \w+)? (?:put|phrase|word) it)\b",
    re.I,
)
# "what did Priya say", and quoted phrases; case-sensitive so the name is a name
_RAW_SAID = re.compile(rf"\b[Ww]hat did {_NAME} (?:say|write|text|reply|tell|call)\b|[\"“][^\"”]{{3,}}[\"”]")
_FACT_INTENT = re.compile(
    r"^\s*(?:when|who|whom|whose|where|how (?:many|much|often|long|old)"
    r"|(?:in )?(?:what|which) (?:year|month|day|date|time|week|city|country|town|place|kind|type|color|colour|brand))\b"
    r"|\b(?:the name of|number of|how many)\b",
    re.I,
)
_EPISODE_INTENT = re.compile(
    r"^\s*(?:why|describe|tell me about)\b"
    r"|\bwhat happened\b|\bwhat (?:was|were|is|are)\b[^?]{0,60}\blike\s*\??\s*$"
    r"|\bhow (?:did|does|do|was|is|were) \w+(?: \w+)? (?:feel|felt|react|respond|cope|handle|deal|go|turn out)\b"
    r"|\b(?:feel|felt|feelings?|emotions?|react(?:ed|ion)?|experiences?|reasons?|motivat\w*|inspir\w*"
    r"|led (?:him|her|them) to)\b",
    re.I,
)


def route_by_rules(question: str) -> str:
    """The store a question's wording asks for (see the module docstring)."""
    if _RAW_WORDS.search(question) or _RAW_SAID.search(question):
        return RAW
    if _FACT_INTENT.search(question):
        return FACT
    if _EPISODE_INTENT.search(question):
        return EPISODE
    return FACT


def parse_route(parsed: Any) -> str:
    """The granularity in {"granularity": "..."} (a bare string is accepted too)."""

    return parse_choice(parsed, "granularity", GRANULARITIES)


def route(question: str, client: LLMClient | None = None) -> tuple[str, str, Usage]:
    """(granularity, how it was chosen: "rules" | "llm" | "rules-fallback", cost)."""
    rules = route_by_rules(question)
    if client is None:
        return rules, "rules", Usage()

    prompt = load_prompt("route").render(question=question.strip())
    chosen, cost = ask_json(client, prompt, role="route", max_tokens=ROUTE_MAX_TOKENS, parse=parse_route)
    return (chosen, "llm", cost) if chosen is not None else (rules, "rules-fallback", cost)


def granularity_for(
    question: str, effective: RetrievalConfig, client: LLMClient | None = None
) -> tuple[str, str, Usage]:
    """The granularity one question reads under its effective config: the configured store, or
    the routed one when `memory_granularity` is "routed"."""
    setting = effective.memory_granularity
    if setting != ROUTED:
        return setting, "config", Usage()
    return route(question, client)


def stores_for(effective: RetrievalConfig) -> set[str]:
    """Stores a question may read under `memory_granularity` (routed: any of them)."""
    setting = effective.memory_granularity
    if setting == ROUTED:
        return {RAW, EPISODE}
    return {setting} if setting in (RAW, EPISODE) else set()


class GranularityRouter:
    """The answer path's router: the configured granularity, or the routed one (rules offline,
    the answer model's choice with one)."""

    def __init__(self, client: LLMClient | None):
        self.client = client

    def route(self, question: Question, effective: RetrievalConfig) -> tuple[str, str, Usage]:
        return granularity_for(question.text, effective, self.client)
