"""Build the roles for a run from model settings: `offline` implementations when no model is
configured for a role, litellm-backed ones otherwise. The engine only sees the Protocols."""

from __future__ import annotations

import os
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from evolvemem.contracts.roles import AnswerJudge, Answerer, Decomposer, Extractor, QuestionClassifier, Verifier
from evolvemem.contracts.usage import Usage
from evolvemem.errors import ConfigError
from evolvemem.llm.cache import ResponseCache
from evolvemem.llm.client import LLMClient
from evolvemem.llm.usage import UsageLedger
from evolvemem.memory.llm_extract import LLMExtractor
from evolvemem.memory.offline_extract import OfflineExtractor
from evolvemem.retrieval.decompose import LLMDecomposer, RuleDecomposer
from evolvemem.roles.answer_llm import LLMAnswerer
from evolvemem.roles.answer_offline import OfflineAnswerer
from evolvemem.roles.classify import LLMQuestionClassifier
from evolvemem.roles.verify import LLMVerifier, OfflineVerifier
from evolvemem.scoring.judge import LLMJudge

OFFLINE = "offline"
ROLE_NAMES = ("extract", "decompose", "answer", "verify", "judge", "diagnose", "classify")
# Client tuning from the environment (a local server, a strict rate limit, fast tests):
# variable -> (LLMClient keyword, type, smallest allowed value)
CLIENT_ENV = {
    "EVOLVEMEM_LLM_TIMEOUT": ("timeout", float, 0.01),
    "EVOLVEMEM_LLM_MAX_RETRIES": ("max_retries", int, 0),
    "EVOLVEMEM_LLM_BACKOFF_BASE": ("backoff_base", float, 0.0),
    # 0: ask for JSON in the prompt only (no response_format), for servers whose JSON mode misbehaves
    "EVOLVEMEM_LLM_JSON_MODE": ("json_mode", int, 0),
    # failed calls in a row after which a model is not called again (0: never stop)
    "EVOLVEMEM_LLM_BREAKER": ("breaker", int, 0),
}


def client_options_from_env() -> dict[str, Any]:
    """LLMClient keywords set through EVOLVEMEM_LLM_* variables; a bad value is a ConfigError."""
    options: dict[str, Any] = {}
    for variable, (keyword, kind, minimum) in CLIENT_ENV.items():
        raw = os.environ.get(variable, "").strip()
        if not raw:
            continue
        try:
            value = kind(raw)
        except ValueError:
            raise ConfigError(f"{variable}={raw!r} is not a {kind.__name__}") from None
        if value < minimum:
            raise ConfigError(f"{variable}={raw!r} must be at least {minimum}")
        options[keyword] = value
    return options


@dataclass(frozen=True)
class ModelSettings:
    """Which model each role uses. `model` is the default for every role; a per-role value
    overrides it; None or "offline" means the offline implementation (the judge is off)."""

    model: str | None = None
    extract_model: str | None = None
    answer_model: str | None = None
    diagnosis_model: str | None = None
    judge_model: str | None = None
    classify_model: str | None = None
    api_base: str | None = None
    context_window: int | None = None  # tokens; None: from litellm's table or the server

    def for_role(self, role: str) -> str:
        specific = {
            "extract": self.extract_model,
            "decompose": self.answer_model,
            "answer": self.answer_model,
            "verify": self.answer_model,
            "diagnose": self.diagnosis_model,
            "judge": self.judge_model,
            "classify": self.classify_model,
        }[role]
        chosen = specific or (None if role in ("judge", "classify") else self.model)
        return chosen if chosen and chosen != OFFLINE else OFFLINE

    def is_offline(self) -> bool:
        return all(self.for_role(r) == OFFLINE for r in ROLE_NAMES)

    def as_dict(self) -> dict[str, str]:
        return {role: self.for_role(role) for role in ROLE_NAMES}


@dataclass
class Roles:
    extractor: Extractor
    decomposer: Decomposer
    answerer: Answerer
    verifier: Verifier
    judge: AnswerJudge | None
    settings: ModelSettings
    diagnosis_client: LLMClient | None = None
    ledger: UsageLedger | None = None
    clients: dict[str, LLMClient] = field(default_factory=dict)
    classifier: QuestionClassifier | None = None
    cache_enabled: bool = True  # whether the clients read and write the LLM response cache

    def usage_snapshot(self) -> dict[str, Usage]:
        """Per-role LLM usage so far (empty for offline roles)."""
        return self.ledger.snapshot() if self.ledger is not None else {}

    @property
    def model_answers(self) -> bool:
        """The answerer is a model (not the offline reader): what the reader failure split measures."""
        return self.settings.for_role("answer") != OFFLINE

    @property
    def uses_llm(self) -> bool:
        return not self.settings.is_offline()

    def stopped_model(self) -> str | None:
        """A model whose circuit breaker tripped, and why (None when every model still answers)."""
        for client in self.clients.values():
            why = client.breaker_open()
            if why:
                return f"{client.model} {why}"
        return None

    def client_of(self, role: str) -> LLMClient | None:
        """The LLMClient a role uses, or None when the role is offline."""
        model = self.settings.for_role(role)
        return None if model == OFFLINE else self.clients.get(model)

    @property
    def mechanism_client(self) -> LLMClient | None:
        """Question-time mechanisms (LLM traversal, sufficiency checks, routing) use the answer model."""
        return self.client_of("answer")

    @property
    def extract_client(self) -> LLMClient | None:
        """Ingestion-time mechanisms (episodes, foresight, recurrence) use the extraction model."""
        return self.client_of("extract")


def build_roles(settings: ModelSettings, cache_enabled: bool = True, reply_cache: Path | None = None) -> Roles:
    """Instantiate every role. LLM clients share one usage ledger and one response cache (under
    `reply_cache`, else the user's cache directory)."""
    ledger = UsageLedger()
    clients: dict[str, LLMClient] = {}

    def client_for(role: str) -> LLMClient:
        model = settings.for_role(role)
        if model not in clients:
            clients[model] = LLMClient(
                model,
                api_base=settings.api_base,
                usage=ledger,
                context_window=settings.context_window,
                cache=ResponseCache(reply_cache, enabled=cache_enabled),
                **client_options_from_env(),
            )
        return clients[model]

    extractor: Extractor
    answerer: Answerer
    verifier: Verifier
    decomposer: Decomposer
    if settings.for_role("extract") == OFFLINE:
        extractor = OfflineExtractor()
    else:
        extractor = LLMExtractor(client_for("extract"))
    if settings.for_role("answer") == OFFLINE:
        answerer, verifier, decomposer = OfflineAnswerer(), OfflineVerifier(), RuleDecomposer()
    else:
        client = client_for("answer")
        answerer, verifier, decomposer = LLMAnswerer(client), LLMVerifier(client), LLMDecomposer(client)
    judge = None if settings.for_role("judge") == OFFLINE else LLMJudge(client_for("judge"))
    diagnosis_client = None if settings.for_role("diagnose") == OFFLINE else client_for("diagnose")
    classifier = None
    if settings.for_role("classify") != OFFLINE:
        classifier = LLMQuestionClassifier(client_for("classify"))
    return Roles(
        extractor,
        decomposer,
        answerer,
        verifier,
        judge,
        settings,
        diagnosis_client,
        ledger if clients else None,
        clients,
        classifier,
        cache_enabled,
    )
