"""Model calls of a labelling run: journaled first, asked only when the journal lacks them."""

from __future__ import annotations

from typing import Any

from evolvemem.contracts.usage import Usage
from evolvemem.labelling.journal import Journal, JournaledReply, call_key
from evolvemem.llm.client import ChatMessage, LLMClient, LLMJSONError

LABEL_ROLE = "label"


class JournaledModel:
    """One model behind the journal. `ask` returns the JSON reply (or the raw text of one that was
    not JSON, which the caller rejects with a reason); a failed call raises LLMCallFailed and
    leaves no entry, so it is asked again when the run resumes."""

    def __init__(self, client: LLMClient, journal: Journal):
        self.client = client
        self.journal = journal
        self.spent = Usage()  # new calls made by this run
        self.replayed = 0  # calls answered from the journal

    @property
    def model(self) -> str:
        return self.client.model

    def fits(self, prompt: str, max_tokens: int) -> bool:
        """Whether `prompt` and a reply of `max_tokens` fit the model's window (unknown: yes)."""
        return self.client.fits(_messages(prompt), max_tokens)

    def ask(self, prompt: str, *, purpose: str, max_tokens: int) -> JournaledReply:
        messages = _messages(prompt)
        key = call_key(self.client.model, messages)
        known = self.journal.get(key)
        if known is not None:
            self.replayed += 1
            return known
        try:
            parsed, reply = self.client.complete_json(messages, role=LABEL_ROLE, max_tokens=max_tokens)
            outcome = JournaledReply(parsed, reply.text, reply.as_cost())
        except LLMJSONError as exc:
            outcome = JournaledReply(None, exc.raw_text, exc.reply.as_cost())
        self.spent = self.spent + outcome.usage
        self.journal.put(key, outcome, {"purpose": purpose})
        return outcome


def reply_field(parsed: Any, name: str) -> str | None:
    """A string field of a JSON object reply (case-insensitive name), else None."""
    if not isinstance(parsed, dict):
        return None
    for key, value in parsed.items():
        if str(key).strip().lower() == name:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return str(value)
            return value.strip() if isinstance(value, str) and value.strip() else None
    return None


def _messages(prompt: str) -> list[ChatMessage]:
    """A labelling call: the prompt as one user message (what the journal keys and the window counts)."""
    return [{"role": "user", "content": prompt}]
