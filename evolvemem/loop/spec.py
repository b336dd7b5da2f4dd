"""`RunSpec` and `GuardSettings`: everything that defines a run, stored in its manifest so `--resume` needs only the
run directory."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from evolvemem.contracts.local_models import LocalModels
from evolvemem.contracts.vocab import Objective
from evolvemem.llm.client import redact_url
from evolvemem.space.budget import TokenBudget


# What each objective counts as a gain (shown by the CLI's help and the report).
OBJECTIVE_MEANING: dict[str, str] = {
    Objective.BALANCED: "a round is a gain only when answerable (main) or unanswerable (adversarial) questions gain "
    "significantly and the other group does not lose: more abstentions bought with fewer right "
    "answers do not count",
    Objective.ALL: "a round is a gain when mean F1 over all questions gains significantly",
    Objective.MAIN: "a round is a gain when mean F1 over the answerable questions gains significantly",
    Objective.EVIDENCE: "no answer model: a round is a gain when the evidence recall of the answer context over the "
    "answerable questions gains significantly, every context cut at the same token budget "
    "(--context-tokens); a cheap proxy for any reader",
}
OBJECTIVES = tuple(OBJECTIVE_MEANING)
CONTEXTS_ONLY = Objective.EVIDENCE  # the objective whose rounds hand contexts to no reader


def default_objective(model_answers: bool) -> str:
    """The objective a run takes when none is given. With a model answering: `balanced` F1, decided
    on that reader's answers. Offline: `evidence` — the extractive offline reader's F1 barely moves
    with the retrieval config (more context mostly confuses it), so a loop tuned on it ends where it
    started; the evidence its contexts hold is what the config controls, for any reader."""
    return Objective.BALANCED if model_answers else CONTEXTS_ONLY


def objective_group(objective: str) -> str:
    """The group of questions an objective's headline number is over."""
    return "main" if objective in (Objective.MAIN, CONTEXTS_ONLY) else "all"


def objective_column(objective: str) -> str:
    """The `rounds` column holding an objective's headline number."""
    if objective == CONTEXTS_ONLY:
        return "main_evidence_recall"
    return "main_f1" if objective == Objective.MAIN else "all_f1"


def objective_label(objective: str) -> str:
    labels: dict[str, str] = {Objective.MAIN: "main F1", CONTEXTS_ONLY: "evidence recall"}
    return labels.get(objective, "all F1")


def objective_metric(objective: str) -> str:
    """The per-question figure an objective's paired decisions compare."""
    return "evidence_recall" if objective == CONTEXTS_ONLY else "f1"


@dataclass(frozen=True)
class GuardSettings:
    """How the guard judges a round against the incumbent (evolvemem/loop/paired.py)."""

    revert_threshold: float = 0.01  # revert when the objective falls more than this (or significantly)
    stagnation_rounds: int = 2  # explore after this many rounds in a row without a significant gain
    explore_dims: int = 3
    alpha: float = 0.05  # significance level of the paired tests
    min_effect: float = 0.005  # smallest mean F1 gain that counts
    max_loss: float = 0.005  # largest mean F1 loss a group may take (balanced objective)
    consistency_tolerance: float = 0.005  # a conversation "holds" when it loses less than this
    folds: int = 0  # > 1: every fold of dev conversations must hold too

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GuardSettings":
        """From a manifest (settings a newer version dropped are ignored)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class RunSpec:
    benchmark: str
    data: str | None
    diagnoser: str
    rounds: int = 7
    init: str = "weak"
    seed: int = 0
    objective: str = "balanced"
    protocol: str = "official"
    models: dict[str, Any] = field(default_factory=dict)
    guard: GuardSettings = field(default_factory=GuardSettings)
    concurrency: int = 8
    local_models: LocalModels = field(default_factory=LocalModels)  # kept as three flat manifest keys
    patience: int = 4
    reextract: bool = True
    cache_enabled: bool = True
    frozen: list[str] = field(default_factory=list)  # dimensions the loop may not change (--freeze)
    diagnosis_mode: str = "free"  # llm diagnoser: free-form changes, or a choice from the rubric's menu
    # candidates are first scored on a fixed stratified minibatch of this share of the dev
    # questions and fully evaluated only when they pass (loop/screening.py); 0 or 1: off (what
    # `evolve run` picks when the answers are offline: a full evaluation costs seconds there)
    screen_fraction: float = 0.25
    screen_budget: int = 1  # screenings per round before the incumbent is carried
    screen_alpha: float = 0.2  # a minibatch gain of at least the guard's min effect must have p below this
    candidates: int = 1  # configs a round screens at once (loop/candidates.py); > 1 needs screening
    context_reuse: bool = True  # reuse answers to an unchanged context (answering/context_reuse.py)
    # the run's token budget (--context-tokens): every context of every round is cut at this many
    # estimated tokens, with or without a model answering; the `evidence` objective always has one
    # (set when the run opens from the answer role's window share when not given). It travels with
    # every config the run hands on (space/budget.py)
    token_budget: int | None = None
    # rung 0 of the ladder: a candidate that changes the context is first compared on the evidence
    # recall of its contexts (no answer call) and stops there when significantly worse
    evidence_rung: bool = True

    @property
    def budget(self) -> TokenBudget:
        """The token budget every context of this run is measured at."""
        return TokenBudget(self.token_budget)

    def as_dict(self) -> dict[str, Any]:
        """What the manifest stores: credentials in the server's URL are masked (a resume is told
        the URL again, `--resume RUN --api-base URL`)."""
        out = asdict(self)
        out["guard"] = self.guard.as_dict()
        del out["local_models"]
        out.update(self.local_models.as_spec())
        if out["models"].get("api_base"):
            out["models"] = {**out["models"], "api_base": redact_url(out["models"]["api_base"])}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunSpec":
        data = dict(data)
        data["guard"] = GuardSettings.from_dict(data.get("guard", {}))
        data["local_models"] = LocalModels.from_spec(data)
        data.setdefault("screen_fraction", 0.0)  # a run started before screening existed goes on without it
        data["token_budget"] = TokenBudget.of_run({"spec": data}).tokens  # older runs: context_tokens
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})
