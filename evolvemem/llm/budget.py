"""Prompts sized to the model's window: the least useful parts go first, and the record says so.

A role renders its prompt as a series of variants, from the full prompt to ever shorter ones
(older history, extra worst cases, lower-ranked memories, far windows dropped), each with a
note of what it left out. `fit_prompt` sends the first variant that fits the client's window
with room for the reply; when none does, the call fails with a clear message instead of being
sent to a server that must reject it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence, TypeVar

from evolvemem.llm.client import LLMClient, PromptTooLong
from evolvemem.llm.context_window import estimate_tokens


Item = TypeVar("Item")


@dataclass(frozen=True)
class FittedPrompt:
    text: str
    max_tokens: int  # the reply budget to ask for
    trimmed: tuple[str, ...] = ()  # what was left out to fit, in words (empty: the full prompt)
    estimated_tokens: int = 0


def fit_prompt(client: LLMClient, variants: Iterable[tuple[str, str]], max_tokens: int,
               min_reply_tokens: int | None = None) -> FittedPrompt:
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
    raise PromptTooLong(f"{client.model}: even the shortest prompt (~{smallest} tokens) plus {max_tokens} reply "
                        f"tokens does not fit the context window of {window} tokens; raise the server's window "
                        "or pass a larger --context-window", window=window or 0)


def fit_ranked(client: LLMClient, render: Callable[[Sequence[Item]], str], ranked: Sequence[Item], max_tokens: int,
               what: str = "memories") -> tuple[FittedPrompt, int]:
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
