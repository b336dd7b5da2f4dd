"""What a diagnoser reads and returns: `DiagnosisInput` (with its rows: `ScoreSummary`, `TypeRow`,
`CategoryRow`, `WorstCase`, `HistoryEntry`), `Proposal`, `DiagnosisResult`, `Diagnoser`.

A proposal is validated against the run's action space: a value that fails validation is
dropped with a reason (never applied, never a crash); a dimension the space does not know is
recorded as a proposed new dimension (refused: it has no definition). A definition in
`new_dimensions` (name, description, maps_to) can become a lever of the run (space/emerged.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Union

from evolvemem.contracts.vocab import Decision, FailureClass
from evolvemem.contracts.records import FAILURE_CLASSES
from evolvemem.contracts.usage import Usage
from evolvemem.qtypes import QUESTION_TYPES
from evolvemem.space.action_space import ActionSpace
from evolvemem.space.changes import Change

if TYPE_CHECKING:
    from evolvemem.space.changes import ClampReport
    from evolvemem.space.config import RetrievalConfig

# A value of one dimension of the action space, as a proposal carries it (clamped to its range).
ConfigValue = Union[bool, int, float, str]


def move_direction(name: str, old: Any, new: Any, space: ActionSpace) -> str:
    """What kind of move a change was: 'on' / 'off' for a dimension leaving or reaching its off
    value, 'up' / 'down' for other numbers, the new value otherwise. Switching a view on and
    widening it are different levers: a dense view that brought no significant gain when switched
    on says nothing about giving it more candidates once it is on."""
    dim = space.get(name)
    off = dim.off if dim is not None else None
    if off is not None and old != new and not isinstance(new, bool):
        if old == off:
            return "on"
        if new == off:
            return "off"
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(new, bool):
        return "up" if new > old else "down"
    return repr(new)


@dataclass(frozen=True)
class _Row:
    """A row of the diagnosis input; the prompt shows it as a dict of its fields."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ScoreSummary(_Row):
    """Scores over one evaluation's answered questions (failed ones left out; 4 decimals)."""

    n: int | None = None
    f1: float | None = None
    evidence_recall: float | None = None
    zero_f1: int | None = None
    mean_context: float | None = None


@dataclass(frozen=True)
class TypeRow(_Row):
    """Scores of one question type, and its F1's move since the previous round."""

    question_type: str
    n: int
    f1: float | None
    evidence_recall: float | None = None
    zero_f1: int | None = None
    abstain_rate: float | None = None
    delta: float | None = None  # None: no previous round, or the type had no F1 there

    def as_dict(self) -> dict[str, Any]:
        """The row as the prompt shows it: `delta` only when there is one."""
        row = super().as_dict()
        if self.delta is None:
            del row["delta"]
        return row


@dataclass(frozen=True)
class CategoryRow(_Row):
    """Scores of one of the benchmark's own categories."""

    category: str
    n: int
    f1: float | None
    zero_f1: int | None


@dataclass(frozen=True)
class WorstCase(_Row):
    """One of a question type's lowest-scoring wrong answers, with the first memories in its context."""

    question_type: str
    category: str
    question: str
    gold: str
    prediction: str
    f1: float | None
    failure: str
    evidence_ids: tuple[str, ...] | None
    context_ids: tuple[str, ...] | None
    context_views: tuple[str, ...] | None

    def as_dict(self) -> dict[str, Any]:
        row = super().as_dict()
        return {k: list(v) if isinstance(v, tuple) else v for k, v in row.items()}


@dataclass(frozen=True)
class GroupOutcome:
    """What a round gained or lost against the incumbent in one group of questions (paired)."""

    diff: float
    p_gain: float
    p_loss: float


@dataclass(frozen=True)
class HistoryEntry:
    """An earlier decision and the true outcome of its change: the score of the round the change
    produced minus the score of the config it was applied to."""

    round: int
    decision: str
    reason: str | None = None
    score: float | None = None
    delta: float | None = None
    changes: tuple[Change, ...] = ()
    outcome_delta: float | None = None
    # did the config this change produced beat the incumbent on paired evidence?
    outcome_accepted: bool | None = None
    # per group: what the produced round gained or lost against the incumbent (paired)
    outcome_groups: dict[str, GroupOutcome] | None = None

    def changes_as_stored(self) -> list[dict[str, Any]]:
        """The changes as the run store keeps them (JSON, keys sorted): what the prompt and the
        stored diagnosis input show."""
        return [dict(sorted(c.as_dict().items())) for c in self.changes]

    def as_dict(self) -> dict[str, Any]:
        row = asdict(self)
        row["changes"] = self.changes_as_stored()
        return row


@dataclass
class DiagnosisInput:
    round: int
    objective: str
    score: float
    overall: ScoreSummary
    by_type: list[TypeRow]
    by_category: list[CategoryRow]
    taxonomy: dict[str, int]
    taxonomy_by_type: dict[str, dict[str, int]]
    worst_cases: list[WorstCase]
    config: dict[str, ConfigValue | None]
    overrides: dict[str, dict[str, ConfigValue | None]]
    history: list[HistoryEntry] = field(default_factory=list)
    mean_context: float = 0.0
    # retrieval view -> answerable questions answered right with a memory from that view in context
    view_credit: dict[str, int] = field(default_factory=dict)
    # dimensions this run keeps fixed (--freeze; model-only settings when the answers are offline):
    # a change to one would be dropped, so a diagnoser should not spend its round on it
    fixed: tuple[str, ...] = ()
    # the token budget the run cuts every context at (--objective evidence, --context-tokens; 0: none):
    # below a budget, more candidates or a larger item cap change nothing the reader sees
    token_budget: int = 0
    # the reader failure split of the round when a model answered (scoring/failure_split.py):
    # evidence in context (full, partial, none, no evidence) -> {"right": n, "wrong": n}, and the
    # kinds of wrong answers given with the full evidence in context; empty: no model answered
    reader_evidence: dict[str, dict[str, int]] = field(default_factory=dict)
    reader_failures: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain values with the rows' own keys (what the run store and the round's snapshot keep)."""
        out = asdict(self)
        out.update(
            overall=self.overall.as_dict(),
            by_type=[r.as_dict() for r in self.by_type],
            by_category=[r.as_dict() for r in self.by_category],
            worst_cases=[r.as_dict() for r in self.worst_cases],
            history=[h.as_dict() for h in self.history],
        )
        return out

    def failures_total(self) -> int:
        return sum(self.taxonomy.get(c, 0) for c in FAILURE_CLASSES)

    def dominant_failure(self) -> str | None:
        """The failure class with the most questions (None when nothing failed)."""
        counts = {c: self.taxonomy.get(c, 0) for c in FAILURE_CLASSES if c != FailureClass.UNKNOWN}
        top = max(counts, key=lambda c: counts[c], default=None)
        return top if top is not None and counts[top] > 0 else None

    def failed_moves(self, space: ActionSpace) -> set[tuple[str, str, str]]:
        """(scope, field, direction) moves whose round brought no gain (not accepted on paired
        evidence; for runs without paired verdicts: a dev score that did not rise): trying
        them again is walking the same lever while the score stays flat. `space` tells what
        switches a field off."""
        bad = set()
        for item in self.history:
            outcome = item.outcome_delta
            if item.decision == Decision.EXPLORED or outcome is None:
                continue
            accepted = item.outcome_accepted
            if accepted if accepted is not None else outcome > 0.001:
                continue
            for change in item.changes:
                old = None if change.old == "(global)" else change.old
                bad.add((change.scope, change.field, move_direction(change.field, old, change.new, space)))
        return bad

    def tried_change_sets(self) -> set[frozenset[tuple[str, str, str]]]:
        """The change sets earlier rounds evaluated as one proposal, each a set of (scope, field,
        new value as text): moves that failed alone can still be new together, not twice."""
        return {
            frozenset(change_key(c.scope, c.field, c.new) for c in item.changes)
            for item in self.history
            if item.changes and item.decision in (Decision.APPLIED, Decision.REVERTED)
        }


def change_key(scope: str, name: str, value: Any) -> tuple[str, str, str]:
    """One change as an element of `tried_change_sets` (values as text, so they hash)."""
    return scope, name, repr(value)


@dataclass
class NewDimension:
    """A lever the diagnoser wants: a bool that switches on a bundle of existing settings
    (`maps_to`), for one question type at a time when `per_type`. The loop materialises a valid
    one (space/emerged.py) or records why it was `refused`."""

    name: str
    description: str = ""
    rationale: str = ""
    maps_to: dict[str, object] = field(default_factory=dict)  # as proposed: checked when materialised
    per_type: object = False  # as proposed; anything but true or false is refused
    refused: str = ""  # why it cannot become a lever ("" = not refused, so far)


@dataclass
class Proposal:
    changes: dict[str, ConfigValue] = field(default_factory=dict)
    overrides: dict[str, dict[str, ConfigValue]] = field(default_factory=dict)
    missing_topics: list[str] = field(default_factory=list)
    rationale: str = ""
    new_dimensions: list[NewDimension] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # changes the round's own evidence contradicts

    @property
    def is_empty(self) -> bool:
        return not self.changes and not self.overrides

    def as_dict(self) -> dict[str, Any]:
        return {
            "changes": self.changes,
            "overrides": self.overrides,
            "missing_topics": self.missing_topics,
            "rationale": self.rationale,
            "rejected": self.rejected,
            "flags": self.flags,
            "new_dimensions": [d.__dict__ for d in self.new_dimensions],
        }

    def drop_fields(self, names: set[str], why: str) -> None:
        """Remove changes to `names` (globally and in overrides), saying why in `rejected`."""
        for scope, settings in [("global", self.changes), *self.overrides.items()]:
            for name in [n for n in settings if n in names]:
                del settings[name]
                self.rejected.append(f"{name} ({scope}): {why}")
        self.overrides = {q: s for q, s in self.overrides.items() if s}

    def apply_to(self, config: RetrievalConfig) -> tuple[RetrievalConfig, list[ClampReport]]:
        """The config with this proposal applied (values clamped by the config's space)."""
        clamps: list[ClampReport] = []
        new, c = config.with_changes(self.changes)
        clamps += c
        for qtype, settings in self.overrides.items():
            new, c = new.with_changes(settings, question_type=qtype)
            clamps += c
        return new, clamps


UNKNOWN_SETTING = (
    "unknown dimension: a setting the action space does not have; a new lever needs a definition "
    "in new_dimensions (name, description, maps_to)"
)


def _check_value(
    space: ActionSpace, name: str, value: object, per_type: bool, rejected: list[str]
) -> tuple[bool, ConfigValue]:
    dim = space[name]
    if per_type and not dim.per_type:
        rejected.append(f"{name} cannot be overridden per question type")
        return False, False
    try:
        return True, dim.clamp(dim.coerce(value))
    except ValueError as exc:
        rejected.append(f"{name}: {exc}")
        return False, False


def _valid_values(
    settings: dict[Any, Any], space: ActionSpace, qtype: str | None, proposal: Proposal
) -> dict[str, ConfigValue]:
    """The settings whose values pass validation, clamped; the others are noted on `proposal`
    (an unknown name as a refused new dimension). `qtype`: the question type of an override,
    None for a change of the global config."""
    valid: dict[str, ConfigValue] = {}
    for name, value in settings.items():
        if name not in space:
            proposed = f"proposed value {value!r}" if qtype is None else f"proposed for {qtype}: {value!r}"
            proposal.new_dimensions.append(NewDimension(str(name), "", proposed, refused=UNKNOWN_SETTING))
            continue
        ok, clean = _check_value(space, name, value, qtype is not None, proposal.rejected)
        if ok:
            valid[name] = clean
    return valid


def proposal_from_raw(raw: Any, space: ActionSpace) -> Proposal:
    """Build a Proposal from a diagnoser's JSON-like output, validated against `space`."""
    proposal = Proposal()
    if not isinstance(raw, dict):
        proposal.rejected.append("the reply is not a JSON object")
        return proposal
    dims = space
    changes = raw.get("changes") or {}
    if isinstance(changes, list):  # tolerate [{"field":..,"value":..}]
        changes = {c.get("field") or c.get("name"): c.get("value") for c in changes if isinstance(c, dict)}
    if not isinstance(changes, dict):
        proposal.rejected.append("changes must be an object")
        changes = {}
    proposal.changes.update(_valid_values(changes, dims, None, proposal))
    overrides = raw.get("overrides") or raw.get("per_category_overrides") or {}
    if isinstance(overrides, dict):
        for qtype, settings in overrides.items():
            if qtype not in QUESTION_TYPES:
                proposal.rejected.append(f"unknown question type {qtype!r}")
                continue
            if not isinstance(settings, dict):
                proposal.rejected.append(f"override for {qtype} must be an object")
                continue
            valid = _valid_values(settings, dims, qtype, proposal)
            if valid:
                proposal.overrides.setdefault(qtype, {}).update(valid)
    items = raw.get("new_dimensions") or []
    for item in items if isinstance(items, list) else [items]:
        if not isinstance(item, dict) or not item.get("name"):
            proposal.new_dimensions.append(NewDimension(str(item)[:60], refused="not a definition with a name"))
            continue
        maps_to = item.get("maps_to")
        proposal.new_dimensions.append(
            NewDimension(
                str(item["name"])[:60],
                str(item.get("description") or "")[:500],
                str(item.get("rationale") or "")[:500],
                maps_to if isinstance(maps_to, dict) else {},
                item.get("per_type", False),
                "" if maps_to is None or isinstance(maps_to, dict) else "maps_to must be an object of settings",
            )
        )
    defined = {d.name for d in proposal.new_dimensions if not d.refused and d.maps_to}
    for item in [d for d in proposal.new_dimensions if d.refused == UNKNOWN_SETTING and d.name in defined]:
        proposal.new_dimensions.remove(item)  # defined in this reply: it cannot be switched on before it exists
        proposal.rejected.append(
            f"{item.name}: a new lever joins the action space after this round; switch it on in a later round"
        )
    topics = raw.get("missing_topics") or []
    proposal.missing_topics = [str(t) for t in topics if isinstance(t, (str, int, float))][:20]
    proposal.rationale = str(raw.get("rationale") or raw.get("analysis") or "")[:2000]
    return proposal


@dataclass
class DiagnosisResult:
    proposal: Proposal
    prompt: str = ""
    raw_response: str = ""
    parse_error: str = ""
    cost: Usage = field(default_factory=Usage)
    trimmed: list[str] = field(default_factory=list)  # what the prompt left out to fit the window


class Diagnoser(Protocol):
    name: str

    def diagnose(self, inp: DiagnosisInput, config: RetrievalConfig) -> DiagnosisResult:
        """Read one round's diagnosis input and propose a change to `config`."""
        ...

    def alternatives(self, inp: DiagnosisInput, config: RetrievalConfig, k: int) -> list[Proposal]:
        """Up to `k` further changes to `config`, after the one `diagnose` just proposed, for a
        round that screens several candidates at once (the loop drops repeats)."""
        ...

    def observe(self, config: RetrievalConfig, score: float) -> None:
        """Learn the dev score a config earned (only model-based searchers use it)."""
        ...
