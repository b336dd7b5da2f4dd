"""`RunSpec` and `GuardSettings`: everything that defines a run, stored in its manifest so `--resume` needs only the
run directory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from evolvemem.contracts.local_models import LocalModels
from evolvemem.contracts.vocab import Objective
from evolvemem.errors import EvolveMemError
from evolvemem.llm.client import redact_url
from evolvemem.loop.scorer import Scoring
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


DEFAULT_SCREEN_FRACTION = 0.25  # the share of dev questions a screening minibatch takes


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
    parsimony: bool = True  # a round that switches a lever on must gain significantly to be built on
    max_ms: float | None = None  # --max-ms: a round whose retrieval takes longer a question is refused

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise EvolveMemError(f"--alpha must be between 0 and 1 (exclusive), not {self.alpha:g}")
        for flag, value in (
            ("--tau-rev", self.revert_threshold),
            ("--min-effect", self.min_effect),
            ("--max-loss", self.max_loss),
        ):
            if value < 0:
                raise EvolveMemError(f"{flag} must be 0 or more, not {value:g}")
        if self.explore_dims < 1:
            raise EvolveMemError(f"--explore-dims must be 1 or more, not {self.explore_dims}")
        if self.max_ms is not None and not self.max_ms > 0:
            raise EvolveMemError(f"--max-ms must be more than 0, not {self.max_ms:g}")
        if self.folds < 0:
            raise EvolveMemError(f"--folds must be 0 or more, not {self.folds}")

    def over_max_ms(self, ms: float | None) -> str:
        """Why a config's retrieval breaks `--max-ms` ("" when it does not, there is no limit, or it
        was not timed)."""
        if self.max_ms is None or ms is None or ms <= self.max_ms:
            return ""
        return f"its retrieval takes {ms:.2f} ms a question, over --max-ms {self.max_ms:g}"

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GuardSettings":
        """From a manifest (settings a newer version dropped are ignored; a run started before
        parsimony existed goes on without it, as it began)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**{"parsimony": False, **known})


def manifest_budget(manifest: Mapping[str, object]) -> TokenBudget:
    """The token budget a run directory's contexts were measured at, from its manifest: an `evolve
    run`'s spec, or an `evolve eval`'s own key. A run started before the budget travelled kept it as
    `context_tokens`, which only the evidence objective applied."""
    spec = manifest.get("spec")
    if isinstance(spec, Mapping):
        tokens = spec.get("token_budget")
        if tokens is None and spec.get("objective") == CONTEXTS_ONLY:
            tokens = spec.get("context_tokens")
        budgets = spec.get("budgets")
        if isinstance(tokens, int) and isinstance(budgets, list) and len(budgets) > 1:
            return TokenBudget(tokens, max(budgets))  # a frontier run ranks as for its largest budget
    else:
        tokens = manifest.get("token_budget")
    return TokenBudget(tokens if isinstance(tokens, int) else None)


def parse_budgets(text: str | None) -> list[int]:
    """`--budgets 600,1500,3000` as a list ([] when not given); `RunSpec` checks the values."""
    if text is None:
        return []
    parts = [part.strip() for part in text.split(",")]
    try:
        return [int(part) for part in parts]
    except ValueError:
        raise EvolveMemError(f"--budgets takes whole numbers of tokens separated by commas, not {text!r}") from None


def budgets_problem(budgets: Sequence[object], token_budget: int | None, objective: str) -> str:
    """What is wrong with a `--budgets` list ("" when nothing): whole numbers of tokens, 1 or
    more, distinct and ascending (the first is the primary), under the evidence objective, and
    not beside a different `--context-tokens`."""
    if not budgets:
        return ""
    if objective != CONTEXTS_ONLY:
        return f"--budgets scores contexts only: it needs --objective {CONTEXTS_ONLY}"
    if any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in budgets):
        return f"--budgets are whole numbers of tokens, 1 or more: {', '.join(map(str, budgets))}"
    if len(set(budgets)) != len(budgets) or list(budgets) != sorted(budgets):  # type: ignore[type-var]
        return f"--budgets must be distinct and ascending: {', '.join(map(str, budgets))}"
    if token_budget is not None and token_budget != budgets[0]:
        return "--budgets and --context-tokens are exclusive (the first budget is the run's primary one)"
    return ""


def screening_enabled(fraction: float) -> bool:
    """0 (no minibatch) and 1 (the minibatch is the whole dev set) both mean: no screening."""
    return 0.0 < fraction < 1.0


def candidates_problem(k: int, screen_fraction: float, screen_budget: int, objective: str) -> str:
    """Why a run cannot screen `k` candidates a round with these settings ("" when it can)."""
    if k < 1:
        return "--candidates must be 1 or more"
    if k == 1:
        return ""
    if objective == CONTEXTS_ONLY:
        return (
            "--candidates needs an objective that answers (--objective balanced, all or main): under the "
            "evidence objective a round costs milliseconds a question and is not screened"
        )
    if not screening_enabled(screen_fraction):
        return "--candidates compares candidates on the screening minibatch: --screen-fraction must be between 0 and 1"
    if screen_budget > 1:
        return "--screen-budget explores one candidate after another; with --candidates a round screens them at once"
    return ""


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines a run. It checks itself when made (one line naming the setting, the
    same whether the CLI or a library caller made it); `for_models` fills the defaults that hang
    on which roles a model plays."""

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
    screen_fraction: float = DEFAULT_SCREEN_FRACTION
    screen_budget: int = 1  # screenings per round before the incumbent is carried
    screen_alpha: float = 0.2  # a minibatch gain of at least the guard's min effect must have p below this
    candidates: int = 1  # configs a round screens at once (loop/candidates.py); > 1 needs screening
    context_reuse: bool = True  # reuse answers to an unchanged context (answering/context_reuse.py)
    # the run's token budget (--context-tokens): every context of every round is cut at this many
    # estimated tokens, with or without a model answering; the `evidence` objective always has one
    # (set when the run opens from the answer role's window share when not given). It travels with
    # every config the run hands on (space/budget.py)
    token_budget: int | None = None
    # --budgets: the token budgets a frontier run scores every round at, ascending; the first is
    # the primary one (`token_budget`, which drives the loop's decisions), the others are cuts of
    # the same ranking recorded as their own phases (`budget_phase`), each keeping its best round
    budgets: list[int] = field(default_factory=list)
    # rung 0 of the ladder: a candidate that changes the context is first compared on the evidence
    # recall of its contexts (no answer call) and stops there when significantly worse
    evidence_rung: bool = True
    # a screened candidate's dev evaluation goes in looks and stops for futility (loop/sequential.py)
    sequential: bool = True

    def __post_init__(self) -> None:
        from evolvemem.diagnosers import diagnoser_entry
        from evolvemem.scoring.locomo import check_protocol

        check_protocol(self.protocol)
        if self.objective not in OBJECTIVES:
            raise EvolveMemError(f"--objective must be {' or '.join(OBJECTIVES)}, not {self.objective!r}")
        if self.rounds < 0:
            raise EvolveMemError("--rounds must be 0 or more")
        entry = diagnoser_entry(self.diagnoser)
        if entry.modes and self.diagnosis_mode not in entry.modes:
            raise EvolveMemError(f"--diagnosis-mode must be {' or '.join(entry.modes)}, not {self.diagnosis_mode!r}")
        if not 0.0 <= self.screen_fraction <= 1.0:
            raise EvolveMemError(f"--screen-fraction must be between 0 and 1, not {self.screen_fraction:g}")
        if self.screen_budget < 1:
            raise EvolveMemError("--screen-budget must be 1 or more")
        if not 0.0 < self.screen_alpha < 1.0:
            raise EvolveMemError(f"--screen-alpha must be between 0 and 1 (exclusive), not {self.screen_alpha:g}")
        problem = candidates_problem(self.candidates, self.screen_fraction, self.screen_budget, self.objective)
        if problem:
            raise EvolveMemError(problem)
        problem = budgets_problem(self.budgets, self.token_budget, self.objective)
        if problem:
            raise EvolveMemError(problem)
        if self.budgets and self.token_budget is None:
            object.__setattr__(self, "token_budget", self.budgets[0])
        if self.token_budget is not None and self.token_budget < 1:
            raise EvolveMemError(f"--context-tokens must be 1 or more, not {self.token_budget}")
        if self.concurrency < 1:
            raise EvolveMemError(f"--concurrency must be 1 or more, not {self.concurrency}")
        if self.patience < 0:
            raise EvolveMemError(f"--patience must be 0 or more, not {self.patience}")

    @classmethod
    def for_models(
        cls,
        *,
        objective: str | None = None,
        diagnoser: str | None = None,
        screen_fraction: float | None = None,
        **given: Any,
    ) -> RunSpec:
        """A spec whose unset objective, diagnoser and screen fraction follow the models in
        `given["models"]`: with a model answering, the balanced objective and a screened round;
        offline, the evidence objective (default_objective) and no screening unless several
        candidates are compared; the llm diagnoser when a model diagnoses, else the rubric."""
        from evolvemem.roles.factory import ModelSettings

        settings = ModelSettings(**given.get("models", {}))
        answered = settings.for_role("answer") != "offline"
        if screen_fraction is None:  # K candidates are compared on the minibatch, offline too
            screen_fraction = DEFAULT_SCREEN_FRACTION if answered or given.get("candidates", 1) > 1 else 0.0
        return cls(
            objective=objective or default_objective(answered),
            diagnoser=diagnoser or ("llm" if settings.for_role("diagnose") != "offline" else "rubric"),
            screen_fraction=screen_fraction,
            **given,
        )

    @property
    def scoring(self) -> Scoring:
        """How the run's rounds are scored (the session's round bracket)."""
        return Scoring(self.protocol, self.concurrency, self.context_reuse)

    @property
    def budget(self) -> TokenBudget:
        """The token budget every context of this run is measured at (a frontier run: its primary
        budget, ranked as for its largest)."""
        return TokenBudget(self.token_budget, max(self.budgets) if len(self.budgets) > 1 else None)

    @property
    def cuts(self) -> tuple[tuple[int, TokenBudget], ...]:
        """A frontier run's further budgets: (tokens, the primary's ranking cut there)."""
        return tuple((b, self.budget.cut_at(b)) for b in self.budgets[1:])

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
        data.setdefault("sequential", False)  # nor one started before sequential evaluation
        data["token_budget"] = manifest_budget({"spec": data}).tokens  # older runs: context_tokens
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})
