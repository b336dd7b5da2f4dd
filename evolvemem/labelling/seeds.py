"""Traces as seeds: the queries a served memory was asked (`evolve traces export`) become
candidate questions whose gold answer and evidence the model writes from the conversation's best
retrieved lines, then checked like any other candidate."""

from __future__ import annotations

from evolvemem.data.models import Conversation, Question
from evolvemem.labelling.contexts import Retrieval, turn_line
from evolvemem.labelling.kinds import LABEL_KINDS, UNANSWERABLE_ANSWER, Candidate
from evolvemem.labelling.model_calls import JournaledModel, reply_field
from evolvemem.prompts import load_prompt
from evolvemem.qtypes import classify_question
from evolvemem.scoring.metrics import is_abstention

SEED_PROMPT = "label_seed"
SEED_MAX_TOKENS = 96
SEED_LINES = 12  # retrieved turns shown to the model


def kind_of_query(text: str) -> str:
    """The label kind whose question type the rules give the query (single-hop when none has it)."""
    qtype = classify_question(text)
    return next((k.name for k in LABEL_KINDS.values() if k.question_type == qtype and not k.unanswerable), "single-hop")


def seed_candidate(
    seed: Question, conversation: Conversation, model: JournaledModel, retrieval: Retrieval
) -> Candidate | str:
    """The traced query with the model's answer and evidence, or why the reply is unusable."""
    kind = kind_of_query(seed.text)
    shown_ids = retrieval.turn_ids(conversation, seed.text, LABEL_KINDS[kind].question_type)[:SEED_LINES]
    turns = {t.turn_id: t for t in conversation.turns()}
    ordered = [t for t in conversation.turns() if t.turn_id in set(shown_ids)]
    lines = "\n".join(
        f"({t.timestamp.date().isoformat() if t.timestamp else 'undated'}) {turn_line(t)}" for t in ordered
    )
    example_id = ordered[len(ordered) // 2].turn_id if ordered else "1"
    prompt = load_prompt(SEED_PROMPT).render(lines=lines or "(none)", question=seed.text, example_id=example_id)
    reply = model.ask(prompt, purpose="seed", max_tokens=SEED_MAX_TOKENS)
    generator = {
        "kind": "trace",
        "trace": seed.question_id,
        "model": model.model,
        "prompt": f"{SEED_PROMPT}@{load_prompt(SEED_PROMPT).version}",
    }
    answer = reply_field(reply.parsed, "answer")
    if answer is None:
        return "the reply held no answer"
    if is_abstention(answer, lenient=True):
        return Candidate(conversation.conversation_id, "unanswerable", seed.text, UNANSWERABLE_ANSWER, (), generator)
    raw = reply.parsed.get("evidence") if isinstance(reply.parsed, dict) else None
    evidence = tuple(
        dict.fromkeys(str(e).strip().strip("[]") for e in (raw if isinstance(raw, list) else [raw] if raw else []))
    )
    if not evidence:
        return "no evidence turns"
    unknown = [e for e in evidence if e not in turns or e not in shown_ids]
    if unknown:
        return f"evidence {unknown[0]!r} is not a line shown"
    return Candidate(conversation.conversation_id, kind, seed.text, answer, evidence, generator)
