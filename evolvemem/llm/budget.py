"""Prompts sized to the model's window: the least useful parts go first, and the record says so.

A role renders its prompt as a series of variants, from the full prompt to ever shorter ones
(older history, extra worst cases, lower-ranked memories, far windows dropped), each with a
note of what it left out. `fit_prompt` sends the first variant that fits the client's window
with room for the reply; when none does, the call fails with a clear message instead of being
sent to a server that must reject it. A server that does not publish its window names it when it
rejects a prompt; `ask_fitted` then fits the same call to that window and sends it once more."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence, TypeVar

from evolvemem.llm.client import LLMCallFailed, LLMClient, LLMJSONError, LLMReply, PromptTooLong
from evolvemem.llm.context_window import estimate_tokens

log = logging.getLogger(__name__)
Item = TypeVar("Item")


@dataclass(frozen=True)
class FittedPrompt:
    text: str
    max_tokens: int  # the reply budget to ask for
    trimmed: tuple[str, ...] = ()  # what was left out to fit, in words (empty: the full prompt)
    estimated_tokens: int = 0


def fit_prompt(
    client: LLMClient, variants: Iterable[tuple[str, str]], max_tokens: int, min_reply_tokens: int | None = None
) -> FittedPrompt:
    """The first of `variants` ((what it leaves out, prompt text), fullest first) that fits with
    `max_tokens` for the reply; failing that, the shortest one with a smaller reply budget (not
    below `min_reply_tokens`)."""
    window = client.context_window()
    notes: list[str] = []
    shortest: tuple[str, int, tuple[str, ...]] | None = None
    for note, text in variants:
        if note:
            notes.append(note)
        tokens = estimate_tokens([{"role": "user", "content": text}])
        if window is None or tokens + max_tokens <= window:
            return FittedPrompt(text, max_tokens, tuple(notes), tokens)
        if shortest is None or tokens < shortest[1]:
            shortest = (text, tokens, tuple(notes))
    smallest = shortest[1] if shortest else 0
    if shortest and window and min_reply_tokens and window - smallest >= min_reply_tokens:
        return FittedPrompt(shortest[0], window - smallest, (*shortest[2], "part of the reply budget"), smallest)
    raise PromptTooLong(
        f"{client.model}: even the shortest prompt (~{smallest} tokens) plus {max_tokens} reply "
        f"tokens does not fit the context window of {window} tokens; raise the server's window "
        "or pass a larger --context-window",
        window=window or 0,
    )


def fit_ranked(
    client: LLMClient,
    render: Callable[[Sequence[Item]], str],
    ranked: Sequence[Item],
    max_tokens: int,
    what: str = "memories",
) -> tuple[FittedPrompt, int]:
    """The prompt over the longest prefix of `ranked` (best first) that fits the window, and that
    prefix's length: the lowest-ranked items go first. Its note says how many were left out.
    (A context shown in chronological order arrives in that order, so there the latest go first.)"""
    total = len(ranked)

    def variants() -> Iterable[tuple[str, str]]:
        for keep in range(total, -1, -1):
            yield ("" if keep == total else "-"), render(ranked[:keep])

    fitted = fit_prompt(client, variants(), max_tokens)
    kept = total - sum(1 for note in fitted.trimmed if note == "-")
    note = () if kept == total else (f"the {total - kept} lowest-ranked of {total} {what}",)
    return FittedPrompt(fitted.text, fitted.max_tokens, note, fitted.estimated_tokens), kept


def ask_fitted(
    client: LLMClient, fit: Callable[[], FittedPrompt], *, role: str, json_reply: bool = False, temperature: float = 0.0
) -> tuple[FittedPrompt, Any, LLMReply]:
    """Send the prompt `fit` sizes to the client's window: (the prompt sent, the reply parsed as
    JSON — or its text —, the reply).

    Against a server that does not publish its window the first prompt goes unsized; when the
    server rejects it and names its window (llm/client.py learns it), `fit` runs again against
    that window (shorter variants, a smaller reply budget) and the call is sent once more, so the
    role still gets its reply in the same round. The reply's cost then includes the rejected
    request. A second rejection, or nothing shorter to send, raises as without the retry (the
    exception's cost, or its reply's for an unparseable one, includes the rejection)."""
    fitted = fit()
    try:
        return (fitted, *_send(client, fitted, role, json_reply, temperature))
    except PromptTooLong as exc:
        if not exc.sent:
            raise
        rejected = exc
    try:
        refitted = fit()
        if refitted.text == fitted.text and refitted.max_tokens >= fitted.max_tokens:
            raise rejected  # the same request again would be rejected again
        log.info("%s; re-sent fitted to it (left out: %s)", rejected, "; ".join(refitted.trimmed) or "nothing")
        parsed, reply = _send(client, refitted, role, json_reply, temperature)
    except LLMJSONError as exc:
        exc.reply = dataclasses.replace(exc.reply, billed=rejected.cost + exc.reply.as_cost())
        raise
    except LLMCallFailed as exc:
        if exc is not rejected:
            exc.cost = rejected.cost + exc.cost
        raise
    return refitted, parsed, dataclasses.replace(reply, billed=rejected.cost + reply.as_cost())


def _send(
    client: LLMClient, fitted: FittedPrompt, role: str, json_reply: bool, temperature: float
) -> tuple[Any, LLMReply]:
    messages = [{"role": "user", "content": fitted.text}]
    if json_reply:
        return client.complete_json(messages, role=role, temperature=temperature, max_tokens=fitted.max_tokens)
    reply = client.complete(messages, role=role, temperature=temperature, max_tokens=fitted.max_tokens)
    return reply.text, reply
