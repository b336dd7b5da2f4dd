"""`rubric`: a deterministic diagnoser, no model — the EvolveMem paper's decision rubric driven
by the failure taxonomy.

Each rule looks at the share of one failure class (or one lagging question type) and, when it
fires, proposes a concrete action. Rules are ranked by how much of the failure mass they
address; the strongest action that is not already in effect and was not tried before with a
bad outcome is proposed. One action per round keeps the guard's verdict attributable; the
exception is a change that traded one group for the other, kept with a counterweight and judged
as one bundle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from evolvemem.contracts.vocab import Decision, FailureClass
from evolvemem.contracts.diagnosis import DiagnosisInput, DiagnosisResult, Proposal, change_key, move_direction
from evolvemem.qtypes import LABEL_ONLY_TYPES as NO_OVERRIDE_TYPES
from evolvemem.space.registry import registry

if TYPE_CHECKING:
    from evolvemem.llm.client import LLMClient

MIN_TYPE_N = 8
TOKEN_STEP = 400  # a token budget that cuts evidence grows by this much
LAG_MARGIN = 0.08
# A tried change whose paired outcome gained one group by at least this much (p below TRADE_P)
# while the other lost is worth keeping with a counterweight for the losing group.
TRADE_GAIN, TRADE_P = 0.005, 0.1


@dataclass
class Action:
    strength: float
    reason: str
    changes: dict
    qtype: str | None = None
    # a bundle (a traded change kept with its counterweight) is one experiment: its moves are not
    # checked one by one against moves that failed alone, only the whole against tried bundles
    bundle: bool = False


def _bump(config: dict, name: str, step: float) -> Any:
    """`name` moved by `step` within its registry range (switched on at its default when off)."""
    return registry()[name].step(config[name], step)


def _num(config: Mapping[str, object], name: str) -> float:
    """A numeric setting of a config's values (0 when it is off or not a number); an int stays an int."""
    value = config.get(name)
    return value if isinstance(value, (int, float)) else 0


def _share(inp: DiagnosisInput, cls: str) -> float:
    """Share of the *failures* in one class (what the rule thresholds read)."""
    total = inp.failures_total()
    return inp.taxonomy.get(cls, 0) / total if total else 0.0


def _mass(inp: DiagnosisInput, cls: str) -> float:
    """Share of *all questions* in one failure class: the most a fix for it could gain."""
    n = sum(inp.taxonomy.values())
    return inp.taxonomy.get(cls, 0) / n if n else 0.0


def _type_actions(qtype: str, f1: float, mean: float, share: float, values: dict) -> list[Action]:
    """Per-type overrides that keep the other types as they are; strength = the F1 gap times
    the type's share of the questions (a small type lagging far can gain little overall)."""
    gap = mean - f1
    strength = gap * share
    reason = f"{qtype} lags the mean F1 by {gap:.2f}"
    menu: dict[str, list[dict[str, Any]]] = {
        "temporal": [
            {"answer_style": "temporal"},
            {"time_decay_half_life_days": 180.0, "recency_weight": 0.2},
            {"context_order": "chronological"},
            {"foresight_top_k": 5},
        ],
        "multi_hop": [
            {"enable_query_decomposition": True},
            {"answer_style": "step_by_step"},
            {"reflection_rounds": 1},
            {"max_context": _bump(values, "max_context", 6)},
            {"cue_graph_top_k": 10},
            {"scene_top_k": 10},
        ],
        "counting": [
            {"answer_style": "step_by_step"},
            {"max_context": _bump(values, "max_context", 6)},
            {"memory_granularity": "episode"},
        ],
        "inference": [
            {"answer_style": "detailed"},
            {"max_context": _bump(values, "max_context", 4)},
            {"memory_granularity": "episode"},
            {"scene_top_k": 10},
        ],
        "knowledge_update": [
            {"recency_weight": 0.3, "time_decay_half_life_days": 90.0},
            {"enable_refresher": True},
            {"judge_retries": 1},
        ],
        "preference": [{"structured_top_k": 10}, {"answer_style": "detailed"}],
        "single_fact": [{"answer_style": "extractive"}, {"keyword_top_k": _bump(values, "keyword_top_k", 5)}],
    }
    return [Action(strength * (1 - 0.05 * i), reason, changes, qtype) for i, changes in enumerate(menu.get(qtype, []))]


VIEW_SIZES = ("semantic_top_k", "keyword_top_k", "structured_top_k")


def _one_more_view(v: dict) -> dict[str, Any]:
    """More candidates for the reader: the dense view when it is off, else a wider keyword view."""
    dense = registry()["semantic_top_k"]
    if v["semantic_top_k"] == dense.off:
        return {"semantic_top_k": dense.default}
    return {"keyword_top_k": _bump(v, "keyword_top_k", 5)}


def _widen_views(v: dict) -> dict[str, Any]:
    """One step more candidates from each view that is on, and a context budget grown towards
    what the views now rank (one budget step at most): extra candidates that the budget cuts
    before the reader sees them change nothing it reads."""
    out = {k: _bump(v, k, 5) for k in ("semantic_top_k", "keyword_top_k") if v[k] != registry()[k].off}
    out = {k: val for k, val in out.items() if val != v[k]}
    if out:
        candidates = sum({**v, **out}[k] or 0 for k in VIEW_SIZES)
        if candidates > v["max_context"]:
            out["max_context"] = min(candidates, _bump(v, "max_context", 4))
    return out


def ranking_actions(v: dict, mass: float, reason: str) -> list[Action]:
    """Moves that change the *order* of what fits a token budget (the budget alone decides how
    much fits, so wider views or a larger item cap change nothing below it): the late-interaction
    view, then weighting it up, the session prior, the neighbour term, the person focus and the
    temporal grounding — each off until a round shows it earns its place. With a cross-encoder
    (a run without one keeps its settings fixed, so the move is skipped), reading the top
    candidates again comes first."""
    known = registry()
    out: list[Action] = []
    if "rerank_top_k" in known and v.get("rerank_top_k") == known["rerank_top_k"].off:
        out.append(
            Action(
                mass * 0.8,
                reason + "; read the best candidates again with the cross-encoder",
                {"rerank_top_k": known["rerank_top_k"].default or known["rerank_top_k"].clamp(30)},
            )
        )
    if "late_top_k" in known and v.get("late_top_k") == known["late_top_k"].off:
        size = max(int(v["semantic_top_k"] or 0), int(v["keyword_top_k"] or 0), int(known["late_top_k"].min or 0))
        out.append(
            Action(
                mass * 0.7,
                reason + "; match each question word to its best token in every memory (late interaction)",
                {"late_top_k": known["late_top_k"].clamp(size)},
            )
        )
    elif "late_weight" in known and float(v.get("late_weight") or 0) < float(known["late_weight"].max or 0):
        out.append(
            Action(
                mass * 0.5,
                reason + "; let the late-interaction view lead the fusion",
                {"late_weight": _bump(v, "late_weight", 1)},
            )
        )
    for name, step, efficacy, why in (
        ("session_prior_weight", 0.3, 0.45, "lift memories of the sessions that hold the best matches"),
        ("neighbour_weight", 0.2, 0.4, "lift the memories next to the best matches"),
        ("person_focus_weight", 0.1, 0.25, "lift the memories of the person the question names"),
        ("temporal_grounding_weight", 0.2, 0.2, "lift the memories dated when the question says"),
    ):
        if name in known and v.get(name) == known[name].mechanism_off:
            out.append(Action(mass * efficacy, f"{reason}; {why}", {name: _bump(v, name, step)}))
    return out


def second_model_action(v: dict, mass: float, reason: str) -> Action | None:
    """The second embedding model's dense view, when the first model's is on and evidence still
    never reaches the candidates: a model that reads the memories differently may find it. A run
    without a second model keeps the view's settings fixed, so the move is skipped."""
    known = registry()
    view = known.get("second_semantic_top_k")
    if view is None or v.get("second_semantic_top_k") != view.off or not _num(v, "semantic_top_k"):
        return None
    size = max(int(_num(v, "semantic_top_k")), int(view.min or 0))
    return Action(
        mass * 0.5,
        reason + "; add the second embedding model's dense view",
        {"second_semantic_top_k": view.clamp(size)},
    )


def _evidence_counterweight(v: dict) -> dict[str, Any]:
    """Everything that gives answerable questions their evidence back, at once: one more view of
    the memories (the dense one when it is off, else a wider keyword view), a context budget that
    holds every candidate the views now return (a budget already full of them would cut the new
    ones), and — when answers are gated (verified, or cautious) — a judge that lets a withdrawn
    answer retry from another source. Each alone moves answerable F1 by less than the loss it
    must cancel; a counterweight is judged as one experiment."""
    known = registry()
    out = _one_more_view(v)
    candidates = sum({**v, **out}[k] or 0 for k in VIEW_SIZES)
    if candidates > v["max_context"]:
        out["max_context"] = known["max_context"].clamp(candidates)
    gated = v["enable_answer_verification"] or v["answer_style"] == "cautious"
    if gated and "judge_retries" in known and v.get("judge_retries") == known["judge_retries"].off:
        out["judge_retries"] = known["judge_retries"].min
    return out


def _counterweights(v: dict, losing: str) -> list[dict[str, Any]]:
    """Changes that protect the group a tried change hurt. Unanswerable questions lose when more
    context makes the reader answer them: check answers against the context, or answer only what it
    supports. Answerable questions lose when the reader abstains or misses: give it more evidence
    (all of it at once first, then the smaller steps)."""
    options: list[dict[str, Any]]
    if losing == "adversarial":
        options = [
            {"enable_answer_verification": True, "verification_style": "strict"},
            {"answer_style": "cautious"},
            {"enable_entity_swap": True},
        ]
    else:
        options = [_evidence_counterweight(v), {"max_context": _bump(v, "max_context", 2)}, _one_more_view(v)]
    return [o for o in options if o and any(v.get(k) != val for k, val in o.items())]


def trade_actions(inp: DiagnosisInput) -> list[Action]:
    """The latest tried change that was rejected because it traded one group for the other, kept
    and paired with a counterweight for the group it hurt (strongest first): a lever that helps
    answerable questions is not lost because it also answers some unanswerable ones."""
    tried = [
        h
        for h in inp.history
        if h.get("decision") in (Decision.APPLIED, Decision.REVERTED)
        and h.get("changes")
        and h.get("outcome_groups")
        and not h.get("outcome_accepted")
    ]
    if not tried:
        return []
    last = tried[-1]
    groups = last["outcome_groups"]
    if any(c.get("scope", "global") != "global" for c in last["changes"]):
        return []
    kept = {c["field"]: c["new"] for c in last["changes"]}
    for gaining, losing in (("main", "adversarial"), ("adversarial", "main")):
        gain, loss = groups.get(gaining), groups.get(losing)
        if not gain or not loss or gain["diff"] < TRADE_GAIN or gain["p_gain"] >= TRADE_P or loss["diff"] >= 0:
            continue
        merged = {**inp.config, **kept}
        reason = (
            f"round {last['round'] + 1}'s change ({', '.join(kept)}) gained {gaining} {gain['diff']:+.3f} "
            f"but lost {losing} {loss['diff']:+.3f}; keep it with a counterweight for {losing}"
        )
        # a counterweight moves settings the kept change left alone: moving its own settings
        # further is walking a lever that already failed to cancel the loss
        fresh = [
            extra
            for extra in _counterweights(merged, losing)
            if not any(k in kept for k, val in extra.items() if merged.get(k) != val)
        ]
        return [Action(1.0 - 0.05 * i, reason, {**kept, **extra}, bundle=True) for i, extra in enumerate(fresh)]
    return []


UNSUPPORTED_LEVER = 0.001  # a lever no firing rule asks for is still tried once, after every rule


def lever_actions(inp: DiagnosisInput, rules: list[Action]) -> list[Action]:
    """Switch on a bundle lever (a `maps_to` dimension, e.g. one that emerged in this run) that is
    off: as strong as the firing rules whose moves it makes (several moves at once is why it was
    proposed); one that no rule asks for comes last."""
    v = inp.config
    actions = []
    for name, dim in registry().items():
        if not dim.maps_to or v.get(name):
            continue
        moves = {(k, move_direction(k, v.get(k), val)) for k, val in dim.maps_to.items() if v.get(k) != val}
        if not moves:
            continue
        support = [
            a
            for a in rules
            if not a.qtype and any((k, move_direction(k, v.get(k), val)) in moves for k, val in a.changes.items())
        ]
        strength = sum(a.strength for a in support) if support else UNSUPPORTED_LEVER
        why = (
            f"it makes the moves of {len(support)} firing rule(s) at once"
            if support
            else "no rule asks for it; not tried yet"
        )
        actions.append(Action(strength, f"switch on the lever {name} ({dim.description}): {why}", {name: True}))
    return actions


def candidate_actions(inp: DiagnosisInput) -> list[Action]:
    """Every rule that fires, strongest first. Strength estimates the share of all questions
    the action could recover (failure mass times a rough efficacy)."""
    v = inp.config
    actions: list[Action] = trade_actions(inp)
    # a token budget cuts the contexts: more candidates or items change nothing below it, their order does
    budgeted = bool(inp.token_budget or v.get("context_token_budget"))
    miss = _share(inp, FailureClass.RETRIEVAL_MISS) + _share(inp, FailureClass.EXTRACTION_GAP) * 0.5
    miss_mass = _mass(inp, FailureClass.RETRIEVAL_MISS) + _mass(inp, FailureClass.EXTRACTION_GAP) * 0.5
    if miss >= 0.2:
        reason = f"{miss:.0%} of failures never reached the candidates (retrieval misses)"
        if v["semantic_top_k"] == 0:
            actions.append(
                Action(
                    miss_mass * 0.6,
                    reason + "; the dense view is off",
                    {"semantic_top_k": registry()["semantic_top_k"].default},
                )
            )
        if v["fusion_mode"] != "rrf" and _num(v, "semantic_top_k") > 0:
            actions.append(
                Action(miss_mass * 0.4, reason + "; rank fusion is robust to view score scales", {"fusion_mode": "rrf"})
            )
        second = second_model_action(v, miss_mass, reason)
        if second is not None:
            actions.append(second)
        widen = {} if budgeted else _widen_views(v)
        if widen:
            actions.append(Action(miss_mass * 0.35, reason + "; widen the views", widen))
        if budgeted:
            actions += ranking_actions(v, miss_mass, reason)
        if v["structured_top_k"] == 0:
            actions.append(Action(miss_mass * 0.3, reason + "; the structured view is off", {"structured_top_k": 5}))
        if not v["enable_entity_swap"]:
            actions.append(
                Action(miss_mass * 0.25, reason + "; search again without person names", {"enable_entity_swap": True})
            )
        if not v.get("scene_top_k"):
            actions.append(
                Action(
                    miss_mass * 0.2,
                    reason + "; search deeper inside the scenes the question matches",
                    {"scene_top_k": 10},
                )
            )
        if not v.get("cue_graph_top_k"):
            actions.append(
                Action(
                    miss_mass * 0.15, reason + "; follow the cues the matching memories share", {"cue_graph_top_k": 10}
                )
            )
    gap = _share(inp, FailureClass.EXTRACTION_GAP)
    if gap >= 0.1:
        reason = f"{gap:.0%} of failures have evidence no memory covers (extraction gaps)"
        if v.get("consolidation_policy") == "eager":
            actions.append(
                Action(
                    _mass(inp, FailureClass.EXTRACTION_GAP) * 0.5,
                    reason + "; keep raw turns retrievable and consolidate only recurring topics",
                    {"consolidation_policy": "recurrence"},
                )
            )
        if v.get("memory_granularity") == "fact":
            actions.append(
                Action(
                    _mass(inp, FailureClass.EXTRACTION_GAP) * 0.4,
                    reason + "; route questions to raw turns or episodes when facts fall short",
                    {"memory_granularity": "routed"},
                )
            )
    cut = _share(inp, FailureClass.BUDGET_CUT)
    if cut >= 0.1:
        reason = f"{cut:.0%} of failures had the evidence ranked but cut by the context budget"
        own = _num(v, "context_token_budget")
        if own and (not inp.token_budget or own < inp.token_budget):  # the config's own budget is what cuts
            tokens = registry()["context_token_budget"]
            actions.append(
                Action(
                    _mass(inp, FailureClass.BUDGET_CUT) * 0.75,
                    reason + "; raise the token budget",
                    {"context_token_budget": tokens.clamp(own + TOKEN_STEP)},
                )
            )
        if budgeted:
            actions += ranking_actions(v, _mass(inp, FailureClass.BUDGET_CUT), reason)
        else:
            actions.append(
                Action(_mass(inp, FailureClass.BUDGET_CUT) * 0.55, reason, {"max_context": _bump(v, "max_context", 4)})
            )
        if v["fusion_mode"] != "rrf":
            actions.append(
                Action(
                    _mass(inp, FailureClass.BUDGET_CUT) * 0.3,
                    reason + "; rank fusion lifts what several views agree on above the cut",
                    {"fusion_mode": "rrf"},
                )
            )
    abstain = _share(inp, FailureClass.WRONG_ABSTENTION)
    if abstain >= 0.1:
        changes = (
            {"answer_style": "concise"}
            if v["answer_style"] == "cautious"
            else {"max_context": _bump(v, "max_context", 2)}
        )
        reason = f"{abstain:.0%} of failures abstained although the evidence was in context"
        actions.append(Action(_mass(inp, FailureClass.WRONG_ABSTENTION) * 0.5, reason, changes))
        if v.get("judge_retries") == 0:
            actions.append(
                Action(
                    _mass(inp, FailureClass.WRONG_ABSTENTION) * 0.3,
                    reason + "; let a judge retry such answers from another granularity",
                    {"judge_retries": 1},
                )
            )
    noise = _share(inp, FailureClass.ANSWER_ERROR)
    if noise >= 0.2:  # the evidence was in context and the reader still answered wrong
        reason = f"{noise:.0%} of failures had all their evidence in context and were answered wrong (reader errors)"
        if v.get("context_layout") == "list":
            actions.append(
                Action(
                    _mass(inp, FailureClass.ANSWER_ERROR) * 0.25,
                    reason + "; show the context by session, under date headers",
                    {"context_layout": "sessions"},
                )
            )
        if v["context_order"] == "score":
            actions.append(
                Action(
                    _mass(inp, FailureClass.ANSWER_ERROR) * 0.2,
                    reason + "; show the context in time order",
                    {"context_order": "chronological"},
                )
            )
    if noise >= 0.3 and inp.mean_context > 14:
        actions.append(
            Action(
                _mass(inp, FailureClass.ANSWER_ERROR) * 0.3,
                f"{noise:.0%} answer errors with {inp.mean_context:.0f} memories in context: too much noise",
                {"max_context": _bump(v, "max_context", -4)},
            )
        )
    fmt = _share(inp, FailureClass.FORMAT_MISMATCH)
    if fmt >= 0.1:
        changes = (
            {"answer_style": "concise"}
            if v["answer_style"] in ("detailed", "extractive")
            else {"enable_answer_verification": True, "verification_style": "multi_candidate"}
        )
        actions.append(
            Action(
                _mass(inp, FailureClass.FORMAT_MISMATCH) * 0.3,
                f"{fmt:.0%} of failures were partly right (format mismatch)",
                changes,
            )
        )
    halluc = _share(inp, FailureClass.HALLUCINATION)
    if halluc >= 0.1:
        reason = f"{halluc:.0%} of failures answered questions the conversation cannot answer"
        mass = _mass(inp, FailureClass.HALLUCINATION)
        if not v["enable_answer_verification"]:
            actions.append(
                Action(
                    mass * 0.5,
                    reason + "; verify answers against the context",
                    {"enable_answer_verification": True, "verification_style": "strict"},
                )
            )
        if v["answer_style"] != "cautious":
            actions.append(
                Action(
                    mass * 0.45,
                    reason + "; answer only when the context clearly supports it",
                    {"answer_style": "cautious"},
                )
            )
        if not v["enable_entity_swap"]:
            actions.append(
                Action(
                    mass * 0.3, reason + "; entity swap exposes the wrong-person premise", {"enable_entity_swap": True}
                )
            )
    typed = [
        r
        for r in inp.by_type
        if r["n"] >= MIN_TYPE_N and r["f1"] is not None and r["question_type"] not in NO_OVERRIDE_TYPES
    ]
    if typed:
        total_n = sum(r["n"] for r in inp.by_type) or 1
        mean = sum(r["f1"] * r["n"] for r in typed) / sum(r["n"] for r in typed)
        for row in sorted(typed, key=lambda r: r["f1"]):
            if row["f1"] < mean - LAG_MARGIN:
                merged = {**v, **inp.overrides.get(row["question_type"], {})}
                actions.extend(_type_actions(row["question_type"], row["f1"], mean, row["n"] / total_n, merged))
    actions += lever_actions(inp, actions)
    known = registry()
    # mechanism actions name dimensions that an action space without that mechanism lacks
    return sorted((a for a in actions if all(k in known for k in a.changes)), key=lambda a: -a.strength)


def viable_actions(inp: DiagnosisInput) -> list[tuple[Action, dict[str, Any]]]:
    """Every rule that fires, strongest first, with the changes it would still make (settings
    already in effect left out), skipping moves already tried without a gain (for a bundle: the
    same bundle already tried)."""
    bad = inp.failed_moves()
    tried = inp.tried_change_sets()
    fixed = set(inp.fixed)
    out = []
    for action in candidate_actions(inp):
        if fixed & set(action.changes):  # the run would drop the change: a wasted round
            continue
        scope = action.qtype or "global"
        # what each field holds now at this scope (None: an override would add it)
        before = inp.overrides.get(action.qtype, {}) if action.qtype else inp.config
        current = {**inp.config, **before}
        effective = {k: val for k, val in action.changes.items() if current.get(k) != val}
        if not effective:
            continue
        if action.bundle:
            if frozenset(change_key(scope, k, val) for k, val in effective.items()) in tried:
                continue
        elif any((scope, k, move_direction(k, before.get(k), val)) in bad for k, val in effective.items()):
            continue
        out.append((action, effective))
    return out


def action_proposal(action: Action, changes: dict[str, Any], rationale: str | None = None) -> Proposal:
    proposal = Proposal(rationale=action.reason if rationale is None else rationale)
    if action.qtype:
        proposal.overrides[action.qtype] = dict(changes)
    else:
        proposal.changes = dict(changes)
    return proposal


class RubricDiagnoser:
    name = "rubric"

    def diagnose(self, inp: DiagnosisInput, config: Any) -> DiagnosisResult:
        for action, effective in viable_actions(inp):
            return DiagnosisResult(action_proposal(action, effective))
        return DiagnosisResult(Proposal(rationale="no rubric rule fires that was not already tried"))

    def alternatives(self, inp: DiagnosisInput, config: Any, k: int) -> list[Proposal]:
        """The next `k` ranked actions after the strongest one."""
        return [action_proposal(action, effective) for action, effective in viable_actions(inp)[1 : k + 1]]

    def observe(self, config: Any, score: float) -> None:
        return None


def create(seed: int, client: LLMClient | None) -> RubricDiagnoser:
    return RubricDiagnoser()
