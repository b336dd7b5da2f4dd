"""Targeted re-extraction: when dev failures show extraction gaps (no memory covers a gold
evidence turn), re-extract the sessions holding those turns. Topics come from dev failures
only; memories added are versioned with the round that will first use them."""

from __future__ import annotations

from dataclasses import dataclass, field
from evolvemem.contracts.vocab import FailureClass, Phase
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.contracts.usage import Usage
from evolvemem.store.run_store import RunStore
from evolvemem.workspace import Workspace


@dataclass
class ReextractResult:
    sessions: list[str] = field(default_factory=list)
    units: list[MemoryUnit] = field(default_factory=list)
    added: int = 0
    cost: Usage = field(default_factory=Usage)


def uncovered_sessions(
    store: RunStore, ws: Workspace, round_no: int, dev_conversations: set[str], already: set[str]
) -> dict[str, set[str]]:
    """conversation id → session ids whose dev evidence no memory covers (not re-extracted yet)."""
    out: dict[str, set[str]] = {}
    for conv_id, evidence_ids in store.failed_evidence(round_no, Phase.DEV, FailureClass.EXTRACTION_GAP):
        if conv_id not in dev_conversations:
            continue
        conv = ws.dataset.conversations[conv_id]
        turn_session = {t.turn_id: t.session_id for t in conv.turns()}
        for turn_id in evidence_ids:
            session = turn_session.get(turn_id)
            key = f"{conv_id}/{session}"
            if session and turn_id not in ws.covered_turns[conv_id] and key not in already:
                out.setdefault(conv_id, set()).add(session)
    return out


def reextract(ws: Workspace, targets: dict[str, set[str]], next_round: int) -> ReextractResult:
    result = ReextractResult()
    for conv_id, sessions in sorted(targets.items()):
        conv = ws.dataset.conversations[conv_id]
        turn_ids = {t.turn_id for s in conv.sessions if s.session_id in sessions for t in s.turns}
        units, cost = ws.roles.extractor.extract(conv, turn_ids=turn_ids)
        result.cost = result.cost + cost
        units = [u.evolve(added_round=next_round) for u in units]
        fresh = ws.add_memories(conv_id, units)
        result.added += len(fresh)
        result.units.extend(fresh)
        result.sessions.extend(f"{conv_id}/{s}" for s in sorted(sessions))
    return result
