"""Text a model copied back from a prompt's example instead of writing about the input.

Small models echo few-shot examples: a sentence of the example, or the invented person the
example is about. An item is "copied" when it shares a run of `RUN` words with the example, or
names a capitalised word that only the example uses (absent from the rest of the prompt)."""

from __future__ import annotations

import re

RUN = 5
_WORD = re.compile(r"[A-Za-z0-9']+")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _runs(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + RUN]) for i in range(len(words) - RUN + 1)}


class EchoDetector:
    def __init__(self, example: str, rest_of_prompt: str):
        self._example_runs = _runs(_words(example))
        rest = set(_words(rest_of_prompt))
        self._example_names = {w.lower() for w in re.findall(r"\b[A-Z][a-z]{2,}\b", example)} - rest

    def copied(self, text: str) -> bool:
        words = _words(text)
        return bool(_runs(words) & self._example_runs) or any(w in self._example_names for w in words)
