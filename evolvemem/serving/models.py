"""What goes in and out of a served memory: turns to add, hits, contexts and answers.

Pydantic models, so the library, the HTTP API (its OpenAPI schema) and the MCP tools share one
typed contract. Limits on sizes live here too: a request the models accept is one the memory can
take. The requests are the HTTP API's bodies, and the MCP tools validate their arguments with the
same models (`validation_message` words a refusal the same way at both doors).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Mapping, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evolvemem.qtypes import QUESTION_TYPES

MAX_TEXT = 20_000  # characters of one turn or query
MAX_NAME = 200  # characters of a user, speaker, session or turn id
MAX_TURNS = 1_000  # turns in one add
MAX_LIMIT = 200  # hits one search may ask for


class TurnIn(BaseModel):
    """One utterance to remember. A chat message (`{"role": ..., "content": ...}`) is accepted
    too: its role is the speaker."""

    model_config = ConfigDict(extra="forbid")

    speaker: str = Field(min_length=1, max_length=MAX_NAME, description="Who said it (a name, or a chat role).")
    text: str = Field(max_length=MAX_TEXT, description="What was said.")
    at: datetime | None = Field(None, description="When (ISO 8601); default: the session's date, else none.")
    session: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_NAME,
        description="Session id; default: the add's session, else the user's last one.",
    )
    id: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_NAME,
        description="Turn id, unique per user; a turn whose id is already stored is skipped "
        "(safe retries). Default: <session>:<n>.",
    )
    image_caption: str | None = Field(None, max_length=MAX_TEXT, description="Caption of an image shared with it.")

    @model_validator(mode="before")
    @classmethod
    def _chat_message(cls, data: Any) -> Any:
        if isinstance(data, dict) and "role" in data and "speaker" not in data:
            data = dict(data)
            data["speaker"] = data.pop("role")
            if "content" in data and "text" not in data:
                data["text"] = data.pop("content")
        return data


QuestionType = Literal[QUESTION_TYPES]  # type: ignore[valid-type]


class AddRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str = Field(min_length=1, max_length=MAX_NAME)
    turns: list[TurnIn] = Field(min_length=1, max_length=MAX_TURNS)
    session: Optional[str] = Field(
        None, min_length=1, max_length=MAX_NAME, description="Session of turns that name none."
    )
    at: Optional[datetime] = Field(None, description="Date of turns that give none (ISO 8601).")


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str = Field(min_length=1, max_length=MAX_NAME)
    query: str = Field(min_length=1, max_length=MAX_TEXT, pattern=r"\S")
    question_type: Optional[QuestionType] = Field(
        None, description="Selects the config's per-type overrides; default: classified from the query."
    )
    at: Optional[datetime] = Field(None, description="When it is asked; default: the user's last session.")


class SearchRequest(QueryRequest):
    limit: Optional[int] = Field(
        None, ge=1, le=MAX_LIMIT, description="Top candidates to return; default: the ones the context holds."
    )


class ForgetRequest(BaseModel):
    """A forget as MCP's `forget` takes it (the HTTP API takes the same in its path and query)."""

    model_config = ConfigDict(extra="forbid")
    user: str = Field(min_length=1, max_length=MAX_NAME)
    session: Optional[str] = Field(None, min_length=1, max_length=MAX_NAME)


def validation_message(errors: Sequence[Mapping[str, object]]) -> str:
    """A request's first validation error in one line, `<field>: <reason>` (the body's own name left
    out), as both the HTTP API and the MCP tools report it."""
    if not errors:
        return "invalid request"
    first = errors[0]
    loc = first.get("loc", ())
    parts = loc if isinstance(loc, (tuple, list)) else ()
    where = ".".join(str(part) for part in parts if part != "body")
    message = str(first.get("msg", "invalid request")).splitlines()[0]
    return f"{where}: {message}" if where else message


class AddResult(BaseModel):
    turn_ids: list[str] = Field(description="Ids of the turns stored by this add, in order.")
    skipped: list[str] = Field(default_factory=list, description="Given turn ids that were already stored.")
    memories: int = Field(description="Memories the user has after the add (after consolidation).")
    config_hash: str


class Hit(BaseModel):
    """One retrieved memory with where it came from and how it ranked."""

    memory_id: str
    text: str = Field(description="The memory as stored (its content).")
    turn_ids: list[str] = Field(description="The turns it was extracted from.")
    session: str = Field(description="The session it belongs to.")
    session_date: str | None = Field(description="Its date (ISO 8601), if it has one.")
    score: float = Field(description="Final retrieval score (fusion plus ranking terms).")
    rank: int = Field(description="1-based rank by score.")
    views: dict[str, int] = Field(description="View label -> rank in that view (semantic, keyword, ...).")
    in_context: bool = Field(description="Whether it fits the context the config hands a reader.")


class SearchResult(BaseModel):
    hits: list[Hit]
    question_type: str = Field(description="The type the query was resolved as (it selects per-type overrides).")
    config_hash: str


class ContextResult(BaseModel):
    """The exact text a reader is handed, as evaluation formats it."""

    context: str
    tokens: int = Field(description="Estimated tokens, as the config's context budget counts them.")
    memory_ids: list[str]
    turn_ids: list[str]
    question_type: str
    config_hash: str


class AnswerResult(BaseModel):
    answer: str
    failed: bool = False
    error: str | None = None
    context: str = Field(description="The context the kept answer was read from.")
    memory_ids: list[str]
    turn_ids: list[str]
    question_type: str
    config_hash: str


class ForgetResult(BaseModel):
    forgotten_turns: int
    config_hash: str
