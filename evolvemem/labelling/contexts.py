"""What a check or a generator is shown: turns as dated lines, and the best retrieved context.

The retrieved context is the project's own first answer context (`answering/first_context.py`:
a Workspace over the conversations with the offline extractor, one memory per turn, and a retrieval
config — by default the `default` preset — routed by the router's rules), so "unanswerable against
the best context" means what a tuned memory would hand a reader."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from evolvemem.answering.evaluate import EffectiveConfigs
from evolvemem.answering.first_context import RULES, FirstContext, first_context
from evolvemem.data.dates import format_day
from evolvemem.data.models import Conversation, Dataset, Question, Session, Turn
from evolvemem.memory.offline_extract import resolve_relative_dates
from evolvemem.roles.context_format import format_context

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig
    from evolvemem.workspace import Workspace

TURN_CHARS = 400  # a turn longer than this is cut in prompts (a pasted document would crowd out the rest)


def turn_line(turn: Turn, with_id: bool = True) -> str:
    text = " ".join(turn.full_text.split())
    if len(text) > TURN_CHARS:
        text = text[: TURN_CHARS - 1] + "…"
    label = f"[{turn.turn_id}] " if with_id else ""
    return f"{label}{turn.speaker}: {text}"


def session_block(session: Session, with_ids: bool = True) -> str:
    when = format_day(session.timestamp) if session.timestamp else "date unknown"
    lines = [f"Session {session.session_id} ({when}):"]
    lines += [turn_line(t, with_ids) for t in session.turns]
    return "\n".join(lines)


def evidence_context(conversation: Conversation, evidence: Sequence[str], *, date_notes: bool = False) -> str:
    """The evidence turns alone, each under its session's date, in conversation order.

    `date_notes` adds what each relative date in a line means ("[yesterday = 7 May 2023]"): the
    reviewer sees them, because a 1.5B judge cannot do the date arithmetic and calls a resolved
    gold "wrong". The checks do not: their answers are resolved instead (relative_answers)."""
    wanted = set(evidence)
    lines = []
    for session in conversation.sessions:
        when = format_day(session.timestamp) if session.timestamp else "date unknown"
        for turn in session.turns:
            if turn.turn_id not in wanted:
                continue
            notes = (
                resolve_relative_dates(turn.full_text, session.timestamp) if date_notes and session.timestamp else []
            )
            lines.append(f"({when}) {turn_line(turn, with_id=False)}" + (f" [{'; '.join(notes)}]" if notes else ""))
    return "\n".join(lines) or "(nothing)"


class Retrieval:
    """The best retrieved context of a question over one dataset's conversations."""

    def __init__(self, dataset: Dataset, config: RetrievalConfig, embedding_model: str | None = None):
        from evolvemem.roles.factory import ModelSettings, build_roles
        from evolvemem.workspace import Workspace

        self.config = config
        self._effective = EffectiveConfigs(config)
        empty = Dataset(dataset.name, dataset.conversations, [])
        self.workspace: Workspace = Workspace(empty, build_roles(ModelSettings()), embedding_model)
        self.workspace.build()
        from evolvemem.answering.stores import stores_needed

        self.workspace.ensure_stores(stores_needed(config))  # a config that reads raw turns or episodes

    def first(self, conversation: Conversation, text: str, question_type: str) -> tuple[RetrievalConfig, FirstContext]:
        """The effective config of `question_type` and the first context it gives for `text`, asked
        as of the conversation's last session."""
        last = conversation.sessions[-1].timestamp
        question = Question(
            question_id="label-check",
            conversation_id=conversation.conversation_id,
            text=text,
            category=question_type,
            question_type=question_type,
            answers=(),
            question_date=last,
        )
        effective, _ = self._effective(question_type)
        return effective, first_context(self.workspace, question, effective, RULES)

    def context(self, conversation: Conversation, text: str, question_type: str, without: Sequence[str] = ()) -> str:
        """The config's context for `text`, minus memories drawn from the turns in `without`."""
        effective, first = self.first(conversation, text, question_type)
        dropped = set(without)
        memories = [m for m in first.memories if not dropped.intersection(m.source_turn_ids)]
        return format_context(memories, effective.context_layout)

    def turn_ids(self, conversation: Conversation, text: str, question_type: str) -> list[str]:
        """The source turns of the context for `text`, in rank order."""
        _, first = self.first(conversation, text, question_type)
        seen: dict[str, None] = {}
        for memory in first.memories:
            for turn_id in memory.source_turn_ids:
                seen.setdefault(turn_id, None)
        return list(seen)
