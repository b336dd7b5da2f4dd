"""The kinds of question a labeller writes, what a candidate is, and why one is rejected.

A kind names the benchmark-style category a user sees in reports (`category`), the
domain-agnostic `question_type` that per-type overrides key on, and the instruction the
generation prompt gives the model. One table: the CLI's `--types`, the prompts and the output
file all read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from evolvemem.named_table import named_table

UNANSWERABLE_ANSWER = "Not mentioned in the conversation"


@dataclass(frozen=True)
class LabelKind:
    name: str  # the category written to the output file
    question_type: str  # one of evolvemem.qtypes.QUESTION_TYPES
    instruction: str  # what the generation prompt asks for
    sessions: int = 1  # sessions shown to the generator (multi-hop sees two)
    unanswerable: bool = False


LABEL_KINDS: dict[str, LabelKind] = named_table(
    LabelKind(
        "single-hop",
        "single_fact",
        "a question answered by one fact stated in one turn. The answer is a short phrase "
        "(a name, place, object, activity or number).",
    ),
    LabelKind(
        "multi-hop",
        "multi_hop",
        "a question that needs two facts from two different turns, one in each session shown. "
        "Cite both turns. The answer is a short phrase.",
        sessions=2,
    ),
    LabelKind(
        "temporal",
        "temporal",
        "a question about when something happened. The answer is a date, month or year worked out "
        "from the session date (resolve words like 'yesterday' or 'last week' against it).",
    ),
    LabelKind(
        "open-domain",
        "inference",
        "a question that needs a small, safe inference from what was said (what someone would "
        "probably enjoy, or why they did something). The answer is short and follows from the cited turns.",
    ),
    LabelKind(
        "unanswerable",
        "adversarial",
        "a question about a plausible detail that was never said (about a person or thing that is "
        f'mentioned, but a fact the conversation does not give). The answer is "{UNANSWERABLE_ANSWER}" '
        "and no turn is cited.",
        unanswerable=True,
    ),
)
DEFAULT_PER_SESSION = len(LABEL_KINDS)  # one candidate of each kind a session
DEFAULT_MATCH_F1 = 0.5  # token F1 at which a check's answer matches the gold
ADVERSARIAL_CATEGORIES = tuple(name for name, kind in LABEL_KINDS.items() if kind.unanswerable)


class RejectReason(str, Enum):
    """Why a candidate question was not kept (the run prints a count per reason)."""

    MALFORMED = "malformed reply"  # the generator's reply is not a usable question
    VERBATIM = "copies its evidence"  # the question or answer copies an evidence turn word for word
    DUPLICATE = "near-duplicate"  # a question already kept for the conversation says the same
    NOT_ANSWERABLE = "not answerable from its evidence"  # the checker, shown the evidence alone, misses the gold
    LEAK = "answerable without its evidence"  # ... and finds it with the evidence turns removed
    ANSWERED = "unanswerable question answered"  # the checker answers an unanswerable one from the best context
    CHECK_MALFORMED = "malformed check reply"  # a check's reply is not an answer


@dataclass(frozen=True)
class Candidate:
    """A question proposed for one conversation, before its checks."""

    conversation_id: str
    kind: str  # a LABEL_KINDS name
    question: str
    answer: str
    evidence: tuple[str, ...]
    generator: dict[str, Any] = field(default_factory=dict)  # provenance of the proposal

    @property
    def label_kind(self) -> LabelKind:
        return LABEL_KINDS[self.kind]


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict on a candidate, as provenance records it."""

    check: str
    passed: bool
    detail: str = ""
    answer: str | None = None  # the checking call's answer
    f1: float | None = None  # its F1 against the gold under the project's scorer

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"check": self.check, "verdict": "pass" if self.passed else "fail"}
        if self.detail:
            out["detail"] = self.detail
        if self.answer is not None:
            out["answer"] = self.answer
        if self.f1 is not None:
            out["f1"] = round(self.f1, 3)
        return out
