"""What every benchmark loads into: conversations of dated sessions of turns, and questions."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Turn:
    """One utterance. `turn_id` is unique within its conversation (LoCoMo: "D3:7")."""

    turn_id: str
    speaker: str
    text: str
    session_id: str
    timestamp: datetime | None = None
    image_caption: str | None = None

    @property
    def full_text(self) -> str:
        """The text with a shared image represented by its caption."""
        if self.image_caption:
            return f"{self.text} [shares a photo of {self.image_caption}]".strip()
        return self.text


@dataclass(frozen=True)
class Session:
    session_id: str
    timestamp: datetime | None
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    sessions: tuple[Session, ...]
    speakers: tuple[str, ...] = ()

    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]


@dataclass(frozen=True)
class Question:
    """A question about one conversation.

    `category` is the benchmark's own label (LoCoMo "1".."5"); `question_type` is the
    domain-agnostic type that per-type overrides key on. `answers` holds the gold answer(s);
    `adversarial_answer` is LoCoMo's trap answer for category 5 (used only by the opt-in
    `paper` protocol). `choices` is set for multiple-choice benchmarks."""

    question_id: str
    conversation_id: str
    text: str
    category: str
    question_type: str
    answers: tuple[str, ...]
    evidence: tuple[str, ...] = ()
    question_date: datetime | None = None
    adversarial_answer: str | None = None
    choices: tuple[str, ...] = ()
    correct_choice: str | None = None
    # where question_type came from: "benchmark" (its own labels), "rules" or "llm" (classified)
    type_source: str = "benchmark"

    @property
    def answer(self) -> str:
        return self.answers[0] if self.answers else ""


@dataclass
class Dataset:
    """A benchmark's conversations and questions, plus how its categories are reported."""

    name: str
    conversations: dict[str, Conversation]
    questions: list[Question]
    category_names: dict[str, str] = field(default_factory=dict)
    # the categories of the adversarial questions (LoCoMo: "5"); scores read the question type (qtypes.is_adversarial)
    adversarial_categories: tuple[str, ...] = ()
    source: str = ""
    content_hash: str = ""
    # what loading noticed but did not refuse (e.g. evidence ids that name no turn): commands print them
    warnings: tuple[str, ...] = ()

    def subset(self, conversation_ids: set[str]) -> "Dataset":
        return Dataset(
            warnings=self.warnings,
            name=self.name,
            conversations={k: v for k, v in self.conversations.items() if k in conversation_ids},
            questions=[q for q in self.questions if q.conversation_id in conversation_ids],
            category_names=self.category_names,
            adversarial_categories=self.adversarial_categories,
            source=self.source,
            content_hash=self.content_hash,
        )
