"""A labelling run: candidates → checks → a custom-format dev set, resumable through its journal.

Order is fixed (conversations in file order; per conversation the trace seeds, then the
generator's slots session by session), so a resumed run makes the same decisions as one that
was never interrupted: the journal replays every call already answered. A call that fails (the
server gone) stops the run: what is kept so far is written and the same command continues.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evolvemem.contracts.usage import Usage
from evolvemem.data.custom import custom_records
from evolvemem.data.models import Conversation, Dataset, Question
from evolvemem.labelling.checks import (
    AnswerChecks,
    duplicate_check,
    verbatim_check,
)
from evolvemem.labelling.generate import (
    GENERATE_MAX_TOKENS,
    GENERATE_PROMPT,
    fitted,
    generation_prompt,
    parse_candidate,
    slots_for,
)
from evolvemem.labelling.journal import Journal, journal_path
from evolvemem.labelling.kinds import (
    ADVERSARIAL_CATEGORIES,
    DEFAULT_MATCH_F1,
    DEFAULT_PER_SESSION,
    LABEL_KINDS,
    Candidate,
    CheckResult,
    RejectReason,
)
from evolvemem.labelling.model_calls import JournaledModel
from evolvemem.labelling.offline import offline_candidates
from evolvemem.labelling.relative_answers import with_resolved_answer
from evolvemem.llm.client import LLMCallFailed
from evolvemem.prompts import load_prompt

OFFLINE = "offline"
PARSE_CHECK = "well_formed"  # the generator's reply is a usable question
Progress = Callable[[int, int], None]  # (conversations done, total)


@dataclass(frozen=True)
class LabelSettings:
    model: str  # a litellm model name, or "offline"
    types: tuple[str, ...] = tuple(LABEL_KINDS)
    per_session: int = DEFAULT_PER_SESSION
    sessions: int | None = None  # sessions labelled per conversation (None: all)
    match_f1: float = DEFAULT_MATCH_F1
    retrieval_config: str = "default"
    api_base: str | None = None
    context_window: int | None = None
    embedding_model: str | None = None
    cache_enabled: bool = True

    @property
    def offline(self) -> bool:
        return self.model == OFFLINE


@dataclass
class LabelSummary:
    out: Path
    journal: Path
    offline: bool
    candidates: int = 0
    kept: Counter[str] = field(default_factory=Counter)  # by kind
    rejected: Counter[str] = field(default_factory=Counter)  # by RejectReason value
    reached: Counter[str] = field(default_factory=Counter)  # candidates each check was run on, by check name
    failed: Counter[str] = field(default_factory=Counter)  # ... and rejected, by check name
    spent: Usage = field(default_factory=Usage)  # new model calls of this run
    journaled: Usage = field(default_factory=Usage)  # every call in the journal, this run's included
    replayed: int = 0  # calls answered from the journal
    carried: int = 0  # labelled questions of the input, kept as they were
    dropped_conversations: list[str] = field(default_factory=list)  # no question kept for them
    stopped: str | None = None  # why the run stopped early

    def as_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "journal": str(self.journal),
            "offline": self.offline,
            "candidates": self.candidates,
            "kept": dict(self.kept),
            "kept_total": sum(self.kept.values()),
            "rejected": dict(self.rejected),
            "checks": {
                name: {"reached": n, "failed": self.failed[name], "rejection_rate": round(self.failed[name] / n, 4)}
                for name, n in self.reached.items()
            },
            "spent": self.spent.as_dict(),
            "journaled": self.journaled.as_dict(),
            "replayed_calls": self.replayed,
            "carried": self.carried,
            "dropped_conversations": self.dropped_conversations,
            "stopped": self.stopped,
        }


def question_id(candidate: Candidate) -> str:
    digest = hashlib.sha256(f"{candidate.conversation_id}\n{candidate.question}".encode()).hexdigest()[:12]
    return f"{candidate.conversation_id}-label-{digest}"


def _record(candidate: Candidate, checks: Sequence[CheckResult], model: str) -> dict[str, Any]:
    kind = candidate.label_kind
    return {
        "id": question_id(candidate),
        "conversation_id": candidate.conversation_id,
        "question": candidate.question,
        "answer": candidate.answer,
        "evidence": list(candidate.evidence),
        "category": kind.name,
        "question_type": kind.question_type,
        "provenance": {"generator": candidate.generator, "model": model, "checks": [c.as_dict() for c in checks]},
    }


class _Labeller:
    def __init__(
        self,
        dataset: Dataset,
        settings: LabelSettings,
        summary: LabelSummary,
        model: JournaledModel | None,
        checks: AnswerChecks | None,
    ):
        self.dataset, self.settings, self.summary = dataset, settings, summary
        self.model, self.checks = model, checks
        self.records: list[dict[str, Any]] = []

    def judge(self, candidate: Candidate | str, conversation: Conversation, kept: list[str]) -> None:
        """Check one candidate (or count a malformed reply) and keep it when every check passes."""
        self.summary.candidates += 1
        self.summary.reached[PARSE_CHECK] += 1
        if isinstance(candidate, str):
            self.summary.failed[PARSE_CHECK] += 1
            self.summary.rejected[RejectReason.MALFORMED.value] += 1
            return
        candidate = with_resolved_answer(candidate, conversation)
        results = [verbatim_check(candidate, conversation)]
        reason: RejectReason | None = None if results[-1].passed else RejectReason.VERBATIM
        if reason is None:
            results.append(duplicate_check(candidate, kept))
            reason = None if results[-1].passed else RejectReason.DUPLICATE
        if reason is None and self.checks is not None:
            model_results, reason = self.checks.run(candidate, conversation)
            results += model_results
        elif reason is None:
            results.append(CheckResult("answer checks", True, "not run: offline labeller (no model)"))
        for result in results:
            self.summary.reached[result.check] += 1
            self.summary.failed[result.check] += int(not result.passed)
        if reason is not None:
            self.summary.rejected[reason.value] += 1
            return
        kept.append(candidate.question)
        self.summary.kept[candidate.kind] += 1
        self.records.append(_record(candidate, results, self.settings.model))

    def conversation(self, conversation: Conversation, seeds: Sequence[Question], kept: list[str]) -> None:
        if self.model is None:
            for candidate in offline_candidates(conversation, self.settings.types, self.settings.per_session):
                self.judge(candidate, conversation, kept)
            return
        from evolvemem.labelling.seeds import seed_candidate

        assert self.checks is not None
        for seed in seeds:
            self.judge(seed_candidate(seed, conversation, self.model, self.checks.retrieval), conversation, kept)
        version = load_prompt(GENERATE_PROMPT).version
        model = self.model
        for whole in slots_for(conversation, self.settings.types, self.settings.per_session, self.settings.sessions):
            slot = fitted(whole, lambda prompt: model.fits(prompt, GENERATE_MAX_TOKENS))
            reply = model.ask(generation_prompt(slot), purpose="generate", max_tokens=GENERATE_MAX_TOKENS)
            generator = {
                "kind": "llm",
                "model": model.model,
                "prompt": f"{GENERATE_PROMPT}@{version}",
                "type": slot.kind,
                "sessions": [s.session_id for s in slot.sessions],
                "focus": [t.turn_id for t in slot.focus],
                **({"narrowed_to_fit": True} if slot is not whole else {}),
            }
            self.judge(parse_candidate(reply.parsed, slot, generator), conversation, kept)


def label_dataset(
    dataset: Dataset,
    settings: LabelSettings,
    out: Path,
    *,
    seeds: Sequence[Question] = (),
    progress: Progress | None = None,
) -> LabelSummary:
    """Label `dataset`'s conversations (and `seeds`, traced queries) and write the dev set to `out`."""
    summary = LabelSummary(out=out, journal=journal_path(out), offline=settings.offline)
    model: JournaledModel | None = None
    checks: AnswerChecks | None = None
    if not settings.offline:
        from evolvemem.labelling.contexts import Retrieval
        from evolvemem.llm.cache import ResponseCache
        from evolvemem.llm.client import LLMClient
        from evolvemem.roles.factory import client_options_from_env
        from evolvemem.space.config import load_config

        config, _clamps = load_config(settings.retrieval_config)
        client = LLMClient(
            settings.model,
            api_base=settings.api_base,
            context_window=settings.context_window,
            cache=ResponseCache(enabled=settings.cache_enabled),
            **client_options_from_env(),
        )
        model = JournaledModel(client, Journal(summary.journal))
        checks = AnswerChecks(model, Retrieval(dataset, config, settings.embedding_model), settings.match_f1)
    labeller = _Labeller(dataset, settings, summary, model, checks)
    carried = [q for q in dataset.questions if q.answers]
    summary.carried = len(carried)
    by_conversation: dict[str, list[Question]] = {}
    for seed in seeds:
        by_conversation.setdefault(seed.conversation_id, []).append(seed)
    conversations = list(dataset.conversations.values())
    try:
        for done, conversation in enumerate(conversations):
            kept = [q.text for q in carried if q.conversation_id == conversation.conversation_id]
            labeller.conversation(conversation, by_conversation.get(conversation.conversation_id, []), kept)
            if progress:
                progress(done + 1, len(conversations))
    except LLMCallFailed as exc:
        summary.stopped = str(exc)
    finally:
        if model is not None:
            summary.spent, summary.replayed = model.spent, model.replayed
            summary.journaled = model.journal.total_usage()
        write_dev_set(dataset, carried, labeller.records, settings, summary)
    return summary


def write_dev_set(
    dataset: Dataset,
    carried: Sequence[Question],
    records: list[dict[str, Any]],
    settings: LabelSettings,
    summary: LabelSummary,
) -> None:
    """The custom-format file: conversations with at least one question, the input's labelled
    questions, then the kept ones (a conversation without questions would not load)."""
    header, conversation_records, carried_records = custom_records(
        Dataset(
            dataset.name, dataset.conversations, list(carried), dataset.category_names, dataset.adversarial_categories
        )
    )
    questions = carried_records + records
    asked = {q["conversation_id"] for q in questions}
    summary.dropped_conversations = [c["id"] for c in conversation_records if c["id"] not in asked]
    header["name"] = f"{dataset.name}-labelled" + ("-offline" if settings.offline else "")
    kinds = sorted({r["category"] for r in records})
    header["category_names"] = {**header["category_names"], **{k: k for k in kinds}}
    header["adversarial_categories"] = sorted(set(header["adversarial_categories"]) | set(ADVERSARIAL_CATEGORIES))
    document = {
        **header,
        "conversations": [c for c in conversation_records if c["id"] in asked],
        "questions": questions,
    }
    summary.out.parent.mkdir(parents=True, exist_ok=True)
    summary.out.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
