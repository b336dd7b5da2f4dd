"""What goes in and out of a served memory: turns to add, hits, contexts and answers.

Pydantic models, so the library, the HTTP API (its OpenAPI schema) and the MCP tools share one
typed contract. Limits on sizes live here too: a request the models accept is one the memory can
take. The requests are the HTTP API's bodies, and the MCP tools validate their arguments with the
same models (`validation_message` words a refusal the same way at both doors).
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Annotated, Any, Literal, Mapping, Optional, Sequence

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from evolvemem.errors import EvolveMemError
from evolvemem.qtypes import QUESTION_TYPES

MAX_TEXT = 20_000  # characters of one turn or query
MAX_NAME = 200  # characters of a user, speaker, session or turn id
MAX_TURNS = 1_000  # turns in one add
MAX_LIMIT = 200  # hits one search may ask for

# Blank characters, spelled out: "\s" differs between the regex engines that read these patterns
# (pydantic's, Python's, and the ECMA one of JSON Schema clients), so "not blank" is this class.
BLANK = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
NOT_BLANK = f"[^{BLANK}]"  # a pattern that a text with a non-blank character matches
_NOT_BLANK = re.compile(NOT_BLANK)


def blank(text: str) -> bool:
    """Whether `text` has no character but blanks (the rule of every "not blank" in the API)."""
    return _NOT_BLANK.search(text) is None


# What a user id may hold, for every door (the library, the HTTP API, the MCP tools): any text
# that has a non-blank character and no control character. "/" is allowed: the HTTP API takes
# the id percent-encoded in DELETE /v1/users/{user} (team%2Falice), or as the rest of the path.
USER_ID_PATTERN = rf"^[^\x00-\x1f\x7f]*[^{BLANK}\x00-\x1f\x7f][^\x00-\x1f\x7f]*$"
USER_ID_RULE = f"1 to {MAX_NAME} characters, not all blank, with no control characters"
_USER_ID = re.compile(USER_ID_PATTERN)


def _user_id(value: str) -> str:
    if not _USER_ID.fullmatch(value):
        raise PydanticCustomError("user_id", "a user id is " + USER_ID_RULE)
    return value


UserId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_NAME),
    AfterValidator(_user_id),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_NAME,
            "pattern": USER_ID_PATTERN,
            "description": f"A user id: {USER_ID_RULE}.",
        }
    ),
]
_USER_ID_ADAPTER: TypeAdapter[str] = TypeAdapter(UserId)


def check_user_id(user: object, what: str = "user") -> str:
    """`user` if it is a user id by the rule of `UserId`, else one EvolveMemError: for the doors
    that take a bare string (the library's verbs, the MCP tools)."""
    if not isinstance(user, str):
        raise EvolveMemError(f"{what} must be a string: {USER_ID_RULE}")
    try:
        return _USER_ID_ADAPTER.validate_python(user)
    except ValidationError:
        raise EvolveMemError(f"{what} must be {USER_ID_RULE}") from None


def _date_text(value: object) -> object:
    """A date is ISO 8601 text (or a date object from Python): a number or a boolean is refused
    rather than read as seconds since 1970."""
    if isinstance(value, (str, date)):
        return value
    raise PydanticCustomError("iso_date", "must be an ISO 8601 date, as a string")


IsoDatetime = Annotated[datetime, BeforeValidator(_date_text)]


def _whole_number(value: object) -> object:
    """A count is a JSON number: `true` is not 1 and "5" is not 5 (the schema says integer)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PydanticCustomError("whole_number", "must be an integer")
    return value


# Hits one search may ask for (the bounds before the check, so that the schema states them).
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT), BeforeValidator(_whole_number)]
# A turn says something: text with a non-blank character, or an image's caption (the JSON schema
# states it too, so that a request the schema allows is one the memory takes).
_SAYS_SOMETHING: JsonDict = {
    "anyOf": [
        {"properties": {"text": {"pattern": NOT_BLANK}}},
        {"properties": {"image_caption": {"type": "string", "minLength": 1}}, "required": ["image_caption"]},
    ]
}


class TurnIn(BaseModel):
    """One utterance to remember. A chat message (`{"role": ..., "content": ...}`) is accepted
    too: its role is the speaker."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_SAYS_SOMETHING)

    speaker: str = Field(min_length=1, max_length=MAX_NAME, description="Who said it (a name, or a chat role).")
    text: str = Field(max_length=MAX_TEXT, description="What was said.")
    at: IsoDatetime | None = Field(None, description="When (ISO 8601); default: the session's date, else none.")
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

    @model_validator(mode="after")
    def _says_something(self) -> TurnIn:
        if blank(self.text) and not self.image_caption:
            raise PydanticCustomError("empty_turn", "a turn needs text with a non-blank character, or an image_caption")
        return self


QuestionType = Literal[QUESTION_TYPES]  # type: ignore[valid-type]


class AddRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: UserId
    turns: list[TurnIn] = Field(min_length=1, max_length=MAX_TURNS)
    session: Optional[str] = Field(
        None, min_length=1, max_length=MAX_NAME, description="Session of turns that name none."
    )
    at: Optional[IsoDatetime] = Field(None, description="Date of turns that give none (ISO 8601).")


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: UserId
    query: str = Field(min_length=1, max_length=MAX_TEXT, pattern=NOT_BLANK)
    question_type: Optional[QuestionType] = Field(
        None, description="Selects the config's per-type overrides; default: classified from the query."
    )
    at: Optional[IsoDatetime] = Field(None, description="When it is asked; default: the user's last session.")


class SearchRequest(QueryRequest):
    limit: Optional[Limit] = Field(
        None,
        description="Top candidates to return; default: the ones the context holds.",
    )


class ForgetRequest(BaseModel):
    """A forget as MCP's `forget` takes it (the HTTP API takes the same in its path and query)."""

    model_config = ConfigDict(extra="forbid")
    user: UserId
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
