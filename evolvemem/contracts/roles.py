"""The role Protocols the engine talks to, and what they return.

The engine never knows whether a role is `llm` or `offline`: both implement the same Protocol
and return the same small result types, with their `Usage` (zero offline)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.usage import Usage
from evolvemem.data.models import Conversation, Question

# What our answerers say when the context does not hold the answer: it contains an official
# LoCoMo abstention phrase, so the official scorer counts it as declining.
ABSTENTION_TEXT = "Not mentioned in the conversation."


@dataclass(frozen=True)
class PromptLevers:
    """Answer-side settings that add an instruction to an LLM reader's prompt: `quote_then_answer`
    (quote the supporting line, then answer) and `abstain_when = never` (answer anyway). A reader
    of memory objects has no prompt and ignores them."""

    quote_first: bool = False
    answer_anyway: bool = False


NO_PROMPT_LEVERS = PromptLevers()  # today's prompts, byte for byte


@dataclass(frozen=True)
class AnswerResult:
    """An answer. `failed` means every call failed (recorded as failed, not scored as wrong)."""

    text: str
    cost: Usage = Usage()
    failed: bool = False
    error: str = ""
    notes: dict[str, object] = field(default_factory=dict)

    def trimmed(self) -> tuple[str, ...]:
        """What the prompts behind this answer left out to fit the model's window (notes["trimmed"])."""
        value = self.notes.get("trimmed", ())
        return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else ()


class Extractor(Protocol):
    name: str  # e.g. "offline" or "llm:openai/gpt-4o-mini"
    version: str  # changes when the prompt or rules change (part of the memory cache key)

    def extract(self, conversation: Conversation, turn_ids: set[str] | None = None) -> tuple[list[MemoryUnit], Usage]:
        """Memories for a conversation (or only for the given turns, for re-extraction)."""
        ...


class Decomposer(Protocol):
    name: str

    def decompose(self, question: str, max_sub_queries: int) -> tuple[list[str], Usage]:
        """Sub-queries for a question (the question itself when it does not split)."""
        ...


class Answerer(Protocol):
    name: str

    def answer(
        self,
        question: Question,
        context: Sequence[MemoryUnit],
        style: str,
        layout: str = "list",
        levers: PromptLevers = NO_PROMPT_LEVERS,
    ) -> AnswerResult:
        """Answer from the ranked context in the given answer style; `layout` is how an LLM
        reader is shown the context (`context_layout`) and `levers` what its prompt adds (a reader
        of memory objects ignores both)."""
        ...


class Verifier(Protocol):
    name: str

    def verify(
        self, question: Question, context: Sequence[MemoryUnit], answer: AnswerResult, style: str
    ) -> AnswerResult:
        """Second pass: keep, fix, or replace the answer with an abstention."""
        ...


class AnswerJudge(Protocol):
    """The LLM-judge metric (opt-in): 1 right, 0 wrong, None when it could not decide."""

    def judge(self, question: str, gold: str, prediction: str) -> tuple[int | None, Usage]: ...

    @property
    def version(self) -> str:
        """The judge's model and prompt version (the manifest labels the verdicts with it)."""
        ...

    def unreachable(self) -> str | None:
        """Why the judge cannot be asked at all (preflight), None when it answers."""
        ...


class QuestionClassifier(Protocol):
    """Re-types a question that came without a type; None keeps the rule's type."""

    name: str

    def classify(self, text: str) -> tuple[str | None, Usage]: ...


class TextEncoder(Protocol):
    """Sentence embeddings (retrieval/embeddings.py: `Embedder`, cached by content)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised row per text."""
        ...
