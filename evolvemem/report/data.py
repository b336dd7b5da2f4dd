"""Everything a report shows, gathered by SQL from one run store into small dataclasses.

The page (html.py) and the PNG (png.py) only format what is here, so what a report says is
always what the store holds. Works for `evolve run` directories (phase 'dev' plus the test
phases), `evolve eval` (one round, phase 'eval') and `evolve transfer` (phase 'transfer')."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evolvemem.contracts.local_models import LocalModels
from evolvemem.contracts.records import FAILURE_CLASSES
from evolvemem.contracts.usage import Usage
from evolvemem.contracts.vocab import EVALUATED_PHASES, Phase
from evolvemem.loop.frontier import FrontierPoint, frontier_points
from evolvemem.loop.held_out import stored_held_out
from evolvemem.loop.outcome import RoundFacts, RoundOutcome, round_outcomes
from evolvemem.loop.paired import Comparison, PairedStat
from evolvemem.loop.spec import OBJECTIVE_MEANING, GuardSettings, RunSpec, objective_label, objective_metric
from evolvemem.scoring.judge_summary import JudgeTally
from evolvemem.space.action_space import ActionSpace
from evolvemem.space.changes import Change
from evolvemem.space.emerged import run_space
from evolvemem.store.costs import EvaluationCost, RoundCost, total_cost
from evolvemem.store.rows import (
    DecisionRow,
    DiagnosisSummary,
    FlippedQuestion,
    JSONObject,
    Manifest,
    ProposedDimension,
    RoundSummary,
    ScreeningRow,
    SQLRow,
)

if TYPE_CHECKING:
    from evolvemem.store.run_store import RunStore

# The two groups the balanced objective judges apart, as the page and the PNG name them.
GROUP_NAMES = {"main": "main (answerable)", "adversarial": "adversarial (unanswerable)"}
SNAPSHOT_FILES = ("config.toml", "decision.json", "diagnosis_input.json", "diagnosis_prompt.md", "proposal.json")


@dataclass
class PhaseUsage:
    """LLM usage of one (round, phase), summed over roles, and its calls per role."""

    label: str
    round: int
    phase: str
    usage: Usage = field(default_factory=Usage)
    calls_by_role: dict[str, int] = field(default_factory=dict)


@dataclass
class RoundView:
    """One evaluated round as the report shows it: its outcome (loop/outcome.py: scores, the guard's
    decision after it, and why) and what only the report reads beside it — failure classes, the
    phase's usage per role, the diagnosis and the snapshot files."""

    outcome: RoundOutcome
    failures: dict[str, int]
    n_correct: int
    usage: PhaseUsage
    delta: float | None = None  # the decision's, else the change from the previous scored round
    diagnoser: str = ""
    rationale: str = ""
    proposed: list[Change] = field(default_factory=list)  # what the diagnoser asked for (no `old`)
    rejected: list[str] = field(default_factory=list)
    missing_topics: list[str] = field(default_factory=list)
    parse_error: str = ""
    files: list[str] = field(default_factory=list)  # snapshot files, relative to the run directory
    # the flags of the diagnosis itself: after a rubric fallback the outcome's `flags` are the
    # rubric's (the proposal applied) and these the replaced diagnosis's
    diagnoser_flags: list[str] = field(default_factory=list)

    @property
    def round(self) -> int:
        return self.outcome.round

    @property
    def scores(self) -> RoundSummary:
        """The store's own row of the evaluation."""
        return self.outcome.summary

    @property
    def score(self) -> float | None:
        """The dev objective's headline number (main F1 for `main`, else all F1)."""
        return self.outcome.score

    @property
    def by_category(self) -> JSONObject:
        """Per-category figures (key -> n, f1, evidence_recall, ...; none for an older round)."""
        return self.scores.by_category or {}

    @property
    def decision(self) -> str | None:
        return self.outcome.next_step

    @property
    def reason(self) -> str:
        return self.outcome.reason or ""

    @property
    def verdict(self) -> str:
        return self.outcome.verdict or ""

    @property
    def fallback(self) -> str:
        """Why the model's diagnosis was replaced by the rubric's best action."""
        return self.outcome.fallback or ""

    @property
    def flags(self) -> list[str]:
        """The applied proposal's changes that the round's own evidence contradicts (loop/evidence_check.py)."""
        return self.outcome.flags

    @property
    def changes(self) -> list[Change]:
        return self.outcome.changes

    @property
    def paired(self) -> Comparison | None:
        """This round vs the incumbent on the same dev questions (loop/paired.py); None in stores
        written before it was recorded."""
        return self.outcome.paired

    @property
    def accepted(self) -> bool | None:
        return self.outcome.accepted

    @property
    def significant_loss(self) -> bool | None:
        d = self.outcome.decision
        return d.significant_loss if d else None

    @property
    def compared_with(self) -> int | None:
        d = self.outcome.decision
        return d.compared_with if d else None

    @property
    def best_so_far(self) -> float | None:
        d = self.outcome.decision
        return d.best_score if d else None

    @property
    def reextracted_sessions(self) -> list[str]:
        d = self.outcome.decision
        return list((d.reextracted_sessions if d else None) or [])

    @property
    def memories_added(self) -> int:
        return self.outcome.memories_added

    @property
    def emerged_used(self) -> list[str]:
        """Levers that emerged in the run, switched on here."""
        return list(self.outcome.emerged_used)

    def group(self, name: str) -> PairedStat | None:
        """One group's paired statistics (None when the round was not compared or the group is empty)."""
        paired = self.paired
        stat = paired.groups.get(name) if paired else None
        return stat if stat is not None and stat.n else None


@dataclass
class FinalScore:
    """Start or best config: its dev round and, when the run finished, its one test score."""

    which: str
    round: int
    dev: RoundSummary
    test: RoundSummary | None


@dataclass
class CategoryScores:
    """One category's F1 under the start and the best config, on dev and (when scored) on test."""

    key: str
    label: str
    dev: tuple[float | None, float | None]
    test: tuple[float | None, float | None]
    n_test: int | None


@dataclass
class AblationRow:
    """One variant of `evolve ablate`: the best config with one mechanism off (or one override dropped)."""

    label: str
    n_questions: int
    all_f1: float | None
    main_f1: float | None
    adversarial_f1: float | None
    evidence_recall: float | None
    delta_all: float | None
    delta_main: float | None
    delta_adversarial: float | None


@dataclass
class FlagCount:
    """How often one proposer's proposals went against the round's own evidence."""

    proposer: str
    proposals: int
    flagged: int  # proposals with at least one flag
    flags: int  # flags in all


@dataclass
class ReportData:
    run_dir: Path
    run_id: str
    kind: str
    phase: str
    objective: str
    diagnoser: str
    guard: GuardSettings
    header: list[tuple[str, str]]
    rounds: list[RoundView]
    categories: list[tuple[str, str]]  # (key, label)
    failure_classes: list[str]
    best_round: int | None
    usage: list[PhaseUsage]
    finals: list[FinalScore]
    best_vs_start: list[Change]
    proposed_dimensions: list[ProposedDimension]
    generated_at: str
    category_scores: list[CategoryScores] = field(default_factory=list)
    test_flips: list[FlippedQuestion] = field(default_factory=list)
    ablation: list[AblationRow] = field(default_factory=list)
    ablation_round: int | None = None
    # what each round's evaluations cost against full evaluation (store/costs.py), and the
    # minibatch screenings of its candidates (loop/screening.py)
    costs: list[RoundCost] = field(default_factory=list)
    cost_total: EvaluationCost | None = None
    screenings: list[ScreeningRow] = field(default_factory=list)
    # the held-out verdict: best − start on the same test questions, paired (loop/held_out.py)
    held_out: Comparison | None = None
    # the LLM judge's verdicts per evaluation (round, phase) when a judge scored them, and its model
    judge: list[tuple[int, str, JudgeTally]] = field(default_factory=list)
    judge_model: str = ""
    judge_version: str = ""
    # a `--budgets` run: each budget's best config and its figures (loop/frontier.py)
    frontier: list[FrontierPoint] = field(default_factory=list)

    def round(self, number: int) -> RoundView | None:
        return next((r for r in self.rounds if r.round == number), None)

    @property
    def score_label(self) -> str:
        """What the per-round score is: the dev objective's headline of a run, or plain F1 of an evaluation."""
        label = objective_label(self.objective)
        return f"dev {label}" if self.phase == "dev" else label

    @property
    def metric(self) -> str:
        """The per-question figure the rounds are compared on: `f1`, or `evidence_recall` for an evidence run
        (whose contexts were never answered: it has no F1)."""
        return objective_metric(self.objective)

    @property
    def metric_label(self) -> str:
        return "evidence recall" if self.metric == "evidence_recall" else "F1"

    @property
    def objective_meaning(self) -> str:
        return OBJECTIVE_MEANING.get(self.objective, "")

    @property
    def judged(self) -> list[RoundView]:
        """Rounds the guard compared with an incumbent (round 0 is the start, never judged)."""
        return [r for r in self.rounds if r.paired is not None and r.accepted is not None]

    def held(self, r: RoundView) -> tuple[int, int]:
        """Conversations not hurt beyond the guard's tolerance, of those compared (as loop/paired.py counts)."""
        convs = r.paired.by_conversation if r.paired else {}
        return sum(d >= -self.guard.consistency_tolerance for d in convs.values()), len(convs)

    def flag_counts(self) -> list[FlagCount]:
        """Flagged proposals per proposer: the run's diagnoser, and the rubric when it stood in for a
        model's diagnosis (its proposal was then the one applied and flagged)."""
        counts: dict[str, FlagCount] = {}

        def add(proposer: str, flags: list[str]) -> None:
            c = counts.setdefault(proposer, FlagCount(proposer, 0, 0, 0))
            c.proposals, c.flagged, c.flags = c.proposals + 1, c.flagged + bool(flags), c.flags + len(flags)

        for r in self.rounds:
            if r.diagnoser or r.diagnoser_flags:
                add(r.diagnoser or self.diagnoser or "diagnoser", r.diagnoser_flags)
            if r.fallback:
                add("rubric (fallback)", r.flags)
        return list(counts.values())


def category_label(key: str, name: str | None) -> str:
    name = (name or "").strip()
    if not name or name.replace(" ", "_").replace("-", "_") == key:
        return name or key
    return f"{key} · {name}"


def _models_text(models: Any) -> str:
    if not isinstance(models, dict) or not models:
        return "-"
    values = {str(v) for v in models.values()}
    if len(values) == 1:
        return f"every role: {values.pop()}"
    return ", ".join(f"{role}: {model}" for role, model in models.items())


def _header(run_dir: Path, manifest: Manifest, objective: str) -> list[tuple[str, str]]:
    spec = manifest.get("spec") or {}
    rows = [
        ("run", run_dir.name),
        ("kind", str(manifest.get("kind", "?"))),
        ("benchmark", str(manifest.get("benchmark", "?"))),
    ]
    optional = [
        ("data", manifest.get("data_source")),
        ("data hash", manifest.get("data_hash")),
        ("split", manifest.get("split")),
        ("config", manifest.get("config_source")),
        ("source run", manifest.get("source_run")),
    ]
    rows += [(k, str(v)) for k, v in optional if v not in (None, "")]
    rows.append(("models", _models_text(manifest.get("models"))))
    local = LocalModels.from_spec(manifest).or_else(LocalModels.from_spec(spec))
    named = (
        ("embedding model", local.embedding),
        ("rerank model", local.rerank),
        ("second embedding model", local.second_embedding),
        ("encoder", local.encoder.value if local.encoder is not None else None),
    )
    rows += [(k, v) for k, v in named if v]
    rows += [
        ("diagnoser", str(manifest.get("diagnoser", "-"))),
        ("seed", str(manifest.get("seed", "-"))),
        ("dev objective", f"{objective}: {OBJECTIVE_MEANING.get(objective, '')}" if spec else "-"),
        ("adversarial protocol", str(manifest.get("adversarial_protocol") or spec.get("protocol") or "official")),
        ("evolvemem version", str(manifest.get("version", "-"))),
        ("command", str(manifest.get("command", "-"))),
    ]
    if spec.get("guard"):
        g = spec["guard"]
        folds = f", every one of {g['folds']} folds must hold" if (g.get("folds") or 0) > 1 else ""
        rows.append(
            (
                "guard",
                f"paired tests at alpha {g.get('alpha')}, smallest gain {g.get('min_effect')}, largest "
                f"loss {g.get('max_loss')}, a majority of conversations must hold{folds}; revert on a "
                f"significant loss or a fall of more than {g.get('revert_threshold')}; explore after "
                f"{g.get('stagnation_rounds')} rounds without a significant gain "
                f"({g.get('explore_dims')} dimensions); patience {spec.get('patience')}",
            )
        )
    return rows


def _proposal_changes(proposal: JSONObject) -> list[Change]:
    """What a stored proposal asked for, as changes without an old value."""
    changes = [Change(k, None, v) for k, v in (proposal.get("changes") or {}).items()]
    for qtype, values in (proposal.get("overrides") or {}).items():
        changes += [Change(k, None, v, qtype) for k, v in (values or {}).items()]
    return changes


def _usage_label(round_no: int, phase: str) -> str:
    if round_no < 0:
        return "setup (extraction, indexing)"
    if phase.startswith("test_"):
        return f"test, {phase.removeprefix('test_')} config (round {round_no})"
    if phase.startswith("screen"):
        return f"round {round_no}, minibatch screening {phase.removeprefix('screen')}"
    return f"round {round_no}"


def _best_vs_start(
    rounds: list[RoundView], best_round: int | None, store: RunStore, phase: str, space: ActionSpace
) -> list[Change]:
    if best_round is None or not rounds or best_round == rounds[0].round:
        return []
    from evolvemem.space.config import parse_config
    from evolvemem.space.ops import diff_configs

    configs = {r.round: r.config for r in store.round_summaries((phase,)) if r.round in (rounds[0].round, best_round)}
    if len(configs) < 2:
        return []
    start = parse_config(configs[rounds[0].round], source=f"round {rounds[0].round}", space=space)[0]
    best = parse_config(configs[best_round], source=f"round {best_round}", space=space)[0]
    return diff_configs(start, best)


def _round_view(
    outcome: RoundOutcome,
    counts: dict[str, int],
    diagnosis: DiagnosisSummary | None,
    usage: PhaseUsage,
    run_dir: Path,
    previous: float | None,
) -> RoundView:
    """One evaluated round as the report shows it: its outcome, failures, usage, diagnosis and
    snapshot files; its Δ is the decision's, else the change from `previous` (the last scored round)."""
    proposal = (diagnosis.proposal if diagnosis else None) or {}
    folder = run_dir / "rounds" / f"round_{outcome.round:02d}"
    d = outcome.decision
    step = None if previous is None or outcome.score is None else outcome.score - previous
    return RoundView(
        outcome=outcome,
        failures={k: v for k, v in counts.items() if k != "correct"},
        n_correct=counts.get("correct", 0),
        usage=usage,
        delta=d.delta if d is not None and d.delta is not None else step,
        diagnoser=(diagnosis.diagnoser if diagnosis else None) or "",
        rationale=str(proposal.get("rationale") or ""),
        proposed=_proposal_changes(proposal),
        rejected=[str(x) for x in proposal.get("rejected") or []],
        missing_topics=[str(x) for x in proposal.get("missing_topics") or []],
        parse_error=(diagnosis.parse_error if diagnosis else None) or "",
        files=[f"rounds/{folder.name}/{name}" for name in SNAPSHOT_FILES if (folder / name).is_file()],
        diagnoser_flags=_texts(_diagnosis_flags(d, proposal)),
    )


def _diagnosis_flags(d: DecisionRow | None, proposal: JSONObject) -> object:
    """The flags of the round's diagnosis itself. Stores before the diagnosis kept its own flags
    hold them only in the decision: those are the diagnoser's unless it fell back to the rubric."""
    if d is None or "flags" in proposal:
        return proposal.get("flags")
    return None if d.fallback else d.flags


def _phase_usage(store: RunStore) -> dict[tuple[int, str], PhaseUsage]:
    """LLM usage per (round, phase), summed over the roles, with each role's calls."""
    usage: dict[tuple[int, str], PhaseUsage] = {}
    for role_usage in store.usage_by_role():
        key = (role_usage.round, role_usage.phase)
        u = usage.setdefault(key, PhaseUsage(_usage_label(*key), *key))
        u.usage = u.usage + role_usage.usage
        u.calls_by_role[role_usage.role] = u.calls_by_role.get(role_usage.role, 0) + role_usage.usage.calls
    return usage


def _round_views(
    store: RunStore, phase: str, outcomes: list[RoundOutcome], usage: dict[tuple[int, str], PhaseUsage]
) -> tuple[list[RoundView], dict[str, str]]:
    """Every evaluated round of `phase` (`outcomes`) as the report shows it, and the categories they
    score (key -> label)."""
    run_dir = Path(store.run_dir)
    diagnoses = store.diagnosis_summaries()
    failures = store.failure_counts(phase)
    rounds: list[RoundView] = []
    categories: dict[str, str] = {}
    previous: float | None = None
    for outcome in outcomes:
        number = outcome.round
        for key, cat in (outcome.summary.by_category or {}).items():
            categories.setdefault(key, category_label(key, (cat or {}).get("name")))
        phase_usage = usage.get((number, phase)) or PhaseUsage(_usage_label(number, phase), number, phase)
        view = _round_view(outcome, failures.get(number, {}), diagnoses.get(number), phase_usage, run_dir, previous)
        rounds.append(view)
        previous = outcome.score if outcome.score is not None else previous
    return rounds, categories


def _finals(rounds: list[RoundView], best_round: int | None, tests: dict[str, RoundSummary]) -> list[FinalScore]:
    """The start and the best dev round, each with its held-out test score when it has one."""
    finals: list[FinalScore] = []
    for which, number in (("start", rounds[0].round), ("best", best_round)):
        r = next((x for x in rounds if x.round == number), None)
        if r is None or number is None:
            continue
        finals.append(FinalScore(which, number, r.scores, tests.get(f"test_{which}")))
    return finals


def gather(store: RunStore) -> ReportData:
    """Read one run store (an open `RunStore`) into a `ReportData`."""
    manifest = store.manifest()
    run_dir = Path(store.run_dir)
    spec = manifest.get("spec") or {}
    # a run's spec always names its objective; an `evolve eval` directory has no spec and no decisions
    objective = str(spec.get("objective") or ("balanced" if spec else "all"))
    present = store.phases_present()
    phase = next((p for p in EVALUATED_PHASES if p in present), "dev")

    space = run_space(run_dir)  # the run's configs may use its levers
    usage = _phase_usage(store)
    facts = RoundFacts.read(store)
    outcomes = round_outcomes(store, (phase,), objective, {d.name for d in space.added()}, facts)
    rounds, categories = _round_views(store, phase, outcomes, usage)

    classes: list[str] = [str(c) for c in FAILURE_CLASSES]
    classes += sorted({c for r in rounds for c in r.failures} - set(classes))
    scored = [r for r in rounds if r.score is not None]
    # the guard's best (the store's rule: paired evidence, not the highest mean); a single evaluation has none
    best_round = store.best_round() if phase == "dev" and scored else None
    tests = store.test_scores()
    finals = _finals(rounds, best_round, tests) if phase == "dev" and scored else []

    sorted_categories = sorted(categories.items(), key=lambda kv: (not kv[0].isdigit(), kv[0].zfill(8)))
    test_flips = (
        flipped_questions(store, ("test_start", finals[0].round), ("test_best", finals[1].round))
        if len(finals) == 2 and finals[0].test and finals[1].test
        else []
    )
    ablation, ablation_round = _ablation(store)
    setup = [u for key, u in sorted(usage.items()) if key[0] < 0]
    later = [u for key, u in sorted(usage.items()) if key[0] >= 0 and key[1] != phase]
    costs = list(facts.costs.values()) if phase == "dev" else []
    return ReportData(
        run_dir=run_dir,
        run_id=run_dir.name,
        kind=str(manifest.get("kind", "run")),
        phase=phase,
        objective=objective,
        diagnoser=str(spec.get("diagnoser") or manifest.get("diagnoser") or ""),
        guard=GuardSettings.from_dict(spec.get("guard") or {}),
        header=_header(run_dir, manifest, objective),
        rounds=rounds,
        categories=sorted_categories,
        failure_classes=classes,
        best_round=best_round,
        usage=setup + [r.usage for r in rounds] + later,
        finals=finals,
        best_vs_start=_best_vs_start(rounds, best_round, store, phase, space),
        proposed_dimensions=sorted(store.proposed_dimensions(), key=lambda d: (d.round, d.name)),
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        category_scores=_category_scores(rounds, finals, sorted_categories, tests),
        test_flips=test_flips,
        held_out=stored_held_out(store) if len(finals) == 2 else None,
        ablation=ablation,
        ablation_round=ablation_round,
        costs=costs,
        cost_total=total_cost(costs) if costs else None,
        screenings=list(facts.screenings) if phase == "dev" else [],
        **_judge_fields(store, manifest),
        frontier=_frontier(store, spec, best_round),
    )


def _frontier(store: RunStore, spec: JSONObject, best_round: int | None) -> list[FrontierPoint]:
    """A `--budgets` run's points ([] for any other run)."""
    if best_round is None or len(spec.get("budgets") or []) < 2:
        return []
    return frontier_points(store, RunSpec.from_dict(dict(spec)), best_round)


def _judge_fields(store: RunStore, manifest: Manifest) -> dict[str, Any]:
    """The judge's tallies of every evaluation it scored, its model and version (none: no judge)."""
    model = str((manifest.get("models") or {}).get("judge") or "offline")
    tallies = store.judge_tallies(tuple(p.value for p in Phase)) if model != "offline" else {}
    shown = [(r, p, t) for (r, p), t in tallies.items() if t.judged or manifest.get("judge")]
    if not shown:
        return {}
    return {"judge": shown, "judge_model": model, "judge_version": str(manifest.get("judge") or model)}


def flipped_questions(store: RunStore, a: tuple[str, int], b: tuple[str, int]) -> list[FlippedQuestion]:
    """Questions right under (phase, round) `a` and wrong under `b`, or the reverse (the store's reader)."""
    return store.flipped_questions(a, b)


def _category_scores(
    rounds: list[RoundView], finals: list[FinalScore], categories: list[tuple[str, str]], tests: dict[str, RoundSummary]
) -> list[CategoryScores]:
    """Per category: start and best F1 on dev (their rounds) and on test (the two test scorings)."""
    by = {f.which: f for f in finals}
    if "start" not in by or "best" not in by:
        return []
    dev = {which: (next((r for r in rounds if r.round == by[which].round), None)) for which in ("start", "best")}

    def f1(cats: dict[str, Any] | None, key: str) -> float | None:
        return ((cats or {}).get(key) or {}).get("f1")

    test_cats = {which: _categories_of(tests.get(f"test_{which}")) for which in ("start", "best")}
    keys = dict(categories)
    for key, cat in test_cats["start"].items():
        keys.setdefault(key, category_label(key, (cat or {}).get("name")))
    return [
        CategoryScores(
            key,
            label,
            (
                f1(dev["start"].by_category if dev["start"] else None, key),
                f1(dev["best"].by_category if dev["best"] else None, key),
            ),
            (f1(test_cats["start"], key), f1(test_cats["best"], key)),
            ((test_cats["start"].get(key) or {}).get("n")),
        )
        for key, label in keys.items()
    ]


def _ablation(store: RunStore) -> tuple[list[AblationRow], int | None]:
    """The latest `evolve ablate` of this run (its rounds are phase "ablate" and "ablate:<variant>")."""
    rows = [s.as_row() for s in store.ablation_rounds()]
    if not rows:
        return [], None
    latest = max(r["round"] for r in rows)
    rows = [r for r in rows if r["round"] == latest]
    full = next((r for r in rows if r["phase"] == "ablate"), None)

    def delta(row: SQLRow, key: str) -> float | None:
        if full is None or row is full or row[key] is None or full[key] is None:
            return None
        return float(row[key]) - float(full[key])

    ordered = ([full] if full else []) + [r for r in rows if r is not full]
    return [
        AblationRow(
            "full config" if r is full else r["phase"].removeprefix("ablate:"),
            r["n_questions"] or 0,
            r["all_f1"],
            r["main_f1"],
            r["adversarial_f1"],
            r["evidence_recall"],
            delta(r, "all_f1"),
            delta(r, "main_f1"),
            delta(r, "adversarial_f1"),
        )
        for r in ordered
    ], latest


def _texts(raw: object) -> list[str]:
    """A JSON list of flags as text (NULL in older stores: none)."""
    if isinstance(raw, str):
        raw = json.loads(raw or "[]")
    return [str(x) for x in raw] if isinstance(raw, list) else []


def _categories_of(summary: RoundSummary | None) -> JSONObject:
    return (summary.by_category if summary else None) or {}
