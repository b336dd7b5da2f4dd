"""`rubric`: a deterministic diagnoser, no model — the EvolveMem paper's decision rubric driven
by the failure taxonomy.

The rules are a table (`RULES`): each a name, the failure signal it reads (a `Signal`: a share of
the failures, with the threshold at which its rules fire), the change it proposes (values read
from the config's action space, never its ranges), and its weight — the share of the signal's
failure mass the change could recover. The table is the one place their order and weights live.
Around it: a change that traded one group for the other is kept with a counterweight first (judged
as one bundle), lagging question types get per-type menus (`TYPE_MENUS`), and a run's lever is
switched on when it makes several firing moves at once. The strongest action that is not already
in effect and was not tried before with a bad outcome is proposed: one action per round keeps the
guard's verdict attributable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

from evolvemem.contracts.vocab import Decision, FailureClass
from evolvemem.contracts.diagnosis import (
    DiagnosisInput,
    DiagnosisResult,
    Proposal,
    TypeRow,
    change_key,
    move_direction,
)
from evolvemem.qtypes import LABEL_ONLY_TYPES as NO_OVERRIDE_TYPES
from evolvemem.space.acting import idle_changes
from evolvemem.space.budget import TokenBudget
from evolvemem.space.action_space import ActionSpace

if TYPE_CHECKING:
    from evolvemem.llm.client import LLMClient
    from evolvemem.space.config import RetrievalConfig

Changes = dict[str, Any]

MIN_TYPE_N = 8  # a question type with fewer answered questions is too noisy to call lagging
TOKEN_STEP = 400  # a token budget that cuts evidence grows by this much
LAG_MARGIN = 0.08  # a type lags when its F1 is this far below the mean of the types
CROWDED_CONTEXT = 14  # mean memories in context above which answer errors read as noise
MENU_DECAY = 0.05  # each further move of a lagging type's menu (or of a counterweight list) is this much weaker
# A tried change whose paired outcome gained one group by at least this much (p below TRADE_P)
# while the other lost is worth keeping with a counterweight for the losing group.
TRADE_GAIN, TRADE_P = 0.005, 0.1
TRADE_STRENGTH = 1.0  # a kept trade outranks every failure rule (their strengths are shares of the questions)
UNSUPPORTED_LEVER = 0.001  # a lever no firing rule asks for is still tried once, after every rule


@dataclass
class Action:
    strength: float
    reason: str
    changes: dict[str, Any]
    qtype: str | None = None
    # a bundle (a traded change kept with its counterweight) is one experiment: its moves are not
    # checked one by one against moves that failed alone, only the whole against tried bundles
    bundle: bool = False
    rule: str = ""  # the row of RULES that proposed it ("" for a trade, a type's menu or a lever)


def _bump(space: ActionSpace, config: dict[str, Any], name: str, step: float) -> Any:
    """`name` moved by `step` within its range (switched on at its default when off)."""
    return space[name].step(config[name], step)


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


@dataclass(frozen=True)
class RuleContext:
    """What a rule reads of the round: its diagnosis input and the config's space and values."""

    inp: DiagnosisInput
    space: ActionSpace

    @property
    def v(self) -> dict[str, Any]:
        return self.inp.config

    @property
    def budgeted(self) -> bool:
        """A token budget cuts the contexts: more candidates or items change nothing below it, their order does."""
        return bool(self.inp.token_budget or self.v.get("context_token_budget"))

    def bump(self, name: str, step: float) -> Any:
        return _bump(self.space, self.v, name, step)


@dataclass(frozen=True)
class Signal:
    """A failure signal: a weighted sum of failure classes, the share of the failures at which its
    rules fire, and how a reason states it (`{share}`, `{mean_context}`)."""

    name: str
    parts: tuple[tuple[FailureClass, float], ...]
    threshold: float
    says: str

    def share(self, inp: DiagnosisInput) -> float:
        return sum(_share(inp, cls) * part for cls, part in self.parts)

    def mass(self, inp: DiagnosisInput) -> float:
        return sum(_mass(inp, cls) * part for cls, part in self.parts)


MISSES = Signal(
    "retrieval misses",
    ((FailureClass.RETRIEVAL_MISS, 1.0), (FailureClass.EXTRACTION_GAP, 0.5)),
    0.2,
    "{share:.0%} of failures never reached the candidates (retrieval misses)",
)
GAPS = Signal(
    "extraction gaps",
    ((FailureClass.EXTRACTION_GAP, 1.0),),
    0.1,
    "{share:.0%} of failures have evidence no memory covers (extraction gaps)",
)
CUTS = Signal(
    "budget cuts",
    ((FailureClass.BUDGET_CUT, 1.0),),
    0.1,
    "{share:.0%} of failures had the evidence ranked but cut by the context budget",
)
ABSTENTIONS = Signal(
    "wrong abstentions",
    ((FailureClass.WRONG_ABSTENTION, 1.0),),
    0.1,
    "{share:.0%} of failures abstained although the evidence was in context",
)
READER_ERRORS = Signal(  # the evidence was in context and the reader still answered wrong
    "reader errors",
    ((FailureClass.ANSWER_ERROR, 1.0),),
    0.2,
    "{share:.0%} of failures had all their evidence in context and were answered wrong (reader errors)",
)
NOISE = Signal(
    "reader errors in a crowded context",
    ((FailureClass.ANSWER_ERROR, 1.0),),
    0.3,
    "{share:.0%} answer errors with {mean_context:.0f} memories in context: too much noise",
)
FORMAT_MISMATCHES = Signal(
    "format mismatches",
    ((FailureClass.FORMAT_MISMATCH, 1.0),),
    0.1,
    "{share:.0%} of failures were partly right (format mismatch)",
)
HALLUCINATIONS = Signal(
    "hallucinations",
    ((FailureClass.HALLUCINATION, 1.0),),
    0.1,
    "{share:.0%} of failures answered questions the conversation cannot answer",
)


@dataclass(frozen=True)
class Rule:
    """One candidate rule: when its signal reaches its threshold and `propose` returns changes, an
    action as strong as the signal's failure mass times `weight` (the share of it the change could
    recover), its reason the signal's statement and `why`."""

    name: str
    signal: Signal
    weight: float
    propose: Callable[[RuleContext], Changes | None]
    why: str = ""

    def fire(self, c: RuleContext) -> Action | None:
        share = self.signal.share(c.inp)
        if share < self.signal.threshold:
            return None
        changes = self.propose(c)
        if not changes:
            return None
        reason = self.signal.says.format(share=share, mean_context=c.inp.mean_context)
        why = f"{reason}; {self.why}" if self.why else reason
        return Action(self.signal.mass(c.inp) * self.weight, why, changes, rule=self.name)


VIEW_SIZES = ("semantic_top_k", "keyword_top_k", "structured_top_k")


def _one_more_view(space: ActionSpace, v: dict[str, Any]) -> dict[str, Any]:
    """More candidates for the reader: the dense view when it is off, else a wider keyword view."""
    dense = space["semantic_top_k"]
    if v["semantic_top_k"] == dense.off:
        return {"semantic_top_k": dense.default}
    return {"keyword_top_k": _bump(space, v, "keyword_top_k", 5)}


def _widen_views(space: ActionSpace, v: dict[str, Any]) -> dict[str, Any]:
    """One step more candidates from each view that is on, and a context budget grown towards
    what the views now rank (one budget step at most): extra candidates that the budget cuts
    before the reader sees them change nothing it reads."""
    out = {k: _bump(space, v, k, 5) for k in ("semantic_top_k", "keyword_top_k") if v[k] != space[k].off}
    out = {k: val for k, val in out.items() if val != v[k]}
    if out:
        candidates = sum({**v, **out}[k] or 0 for k in VIEW_SIZES)
        if candidates > v["max_context"]:
            out["max_context"] = min(candidates, _bump(space, v, "max_context", 4))
    return out


def _cross_encoder(c: RuleContext) -> Changes | None:
    """Read the top candidates again (a run without a cross-encoder keeps its settings fixed, so
    the move is skipped)."""
    known = c.space
    if c.budgeted and "rerank_top_k" in known and c.v.get("rerank_top_k") == known["rerank_top_k"].off:
        return {"rerank_top_k": known["rerank_top_k"].default or known["rerank_top_k"].clamp(30)}
    return None


def _second_dense_view(c: RuleContext) -> Changes | None:
    """The second embedding model's dense view, when the first model's is on and evidence still
    never reaches the candidates: a model that reads the memories differently may find it. A run
    without a second model keeps the view's settings fixed, so the move is skipped."""
    view = c.space.get("second_semantic_top_k")
    if view is None or c.v.get("second_semantic_top_k") != view.off or not _num(c.v, "semantic_top_k"):
        return None
    size = max(int(_num(c.v, "semantic_top_k")), int(c.space.numeric("second_semantic_top_k").min))
    return {"second_semantic_top_k": view.clamp(size)}


def _late_view_off(c: RuleContext) -> bool:
    return "late_top_k" in c.space and c.v.get("late_top_k") == c.space["late_top_k"].off


def _late_view(c: RuleContext) -> Changes | None:
    """The late-interaction view on, as wide as the widest view that is on."""
    known, v = c.space, c.v
    if not (c.budgeted and _late_view_off(c)):
        return None
    size = max(int(v["semantic_top_k"] or 0), int(v["keyword_top_k"] or 0), int(known.numeric("late_top_k").min))
    return {"late_top_k": known["late_top_k"].clamp(size)}


def _late_weight(c: RuleContext) -> Changes | None:
    """Weight the late-interaction view up, once it is on."""
    known = c.space
    if not c.budgeted or _late_view_off(c) or "late_weight" not in known:
        return None
    if float(c.v.get("late_weight") or 0) < float(known.numeric("late_weight").max):
        return {"late_weight": c.bump("late_weight", 1)}
    return None


def _ranking_term(name: str, step: float) -> Callable[[RuleContext], Changes | None]:
    """A ranking term switched on (it is off until a round shows it earns its place)."""

    def propose(c: RuleContext) -> Changes | None:
        if c.budgeted and name in c.space and c.v.get(name) == c.space[name].mechanism_off:
            return {name: c.bump(name, step)}
        return None

    return propose


def ranking_rules(signal: Signal) -> tuple[Rule, ...]:
    """Moves that change the *order* of what fits a token budget (they fire only under one: the
    budget alone decides how much fits, so wider views or a larger item cap change nothing below
    it): the cross-encoder, the late-interaction view, then weighting it up, the session prior, the
    neighbour term, the person focus and the temporal grounding."""
    return (
        Rule("cross_encoder", signal, 0.8, _cross_encoder, "read the best candidates again with the cross-encoder"),
        Rule(
            "late_view",
            signal,
            0.7,
            _late_view,
            "match each question word to its best token in every memory (late interaction)",
        ),
        Rule("late_weight", signal, 0.5, _late_weight, "let the late-interaction view lead the fusion"),
        Rule(
            "session_prior",
            signal,
            0.45,
            _ranking_term("session_prior_weight", 0.3),
            "lift memories of the sessions that hold the best matches",
        ),
        Rule(
            "neighbours",
            signal,
            0.4,
            _ranking_term("neighbour_weight", 0.2),
            "lift the memories next to the best matches",
        ),
        Rule(
            "person_focus",
            signal,
            0.25,
            _ranking_term("person_focus_weight", 0.1),
            "lift the memories of the person the question names",
        ),
        Rule(
            "temporal_grounding",
            signal,
            0.2,
            _ranking_term("temporal_grounding_weight", 0.2),
            "lift the memories dated when the question says",
        ),
    )


def _raise_token_budget(c: RuleContext) -> Changes | None:
    own = _num(c.v, "context_token_budget")
    if own and (not c.inp.token_budget or own < c.inp.token_budget):  # the config's own budget is what cuts
        return {"context_token_budget": c.space["context_token_budget"].clamp(own + TOKEN_STEP)}
    return None


def _answer_fewer_abstentions(c: RuleContext) -> Changes:
    if c.v["answer_style"] == "cautious":
        return {"answer_style": "concise"}
    return {"max_context": c.bump("max_context", 2)}


def _match_the_gold_form(c: RuleContext) -> Changes:
    if c.v["answer_style"] in ("detailed", "extractive"):
        return {"answer_style": "concise"}
    return {"enable_answer_verification": True, "verification_style": "multi_candidate"}


# The candidate rules in the order they are listed (ties in strength keep it), each with its
# weight: the one place both live. A rule's changes name values, never ranges (those are the
# config's space's).
RULES: tuple[Rule, ...] = (
    Rule(
        "dense_view_on",
        MISSES,
        0.6,
        lambda c: {"semantic_top_k": c.space["semantic_top_k"].default} if c.v["semantic_top_k"] == 0 else None,
        "the dense view is off",
    ),
    Rule(
        "rank_fusion_for_misses",
        MISSES,
        0.4,
        lambda c: {"fusion_mode": "rrf"} if c.v["fusion_mode"] != "rrf" and _num(c.v, "semantic_top_k") > 0 else None,
        "rank fusion is robust to view score scales",
    ),
    Rule("second_dense_view", MISSES, 0.5, _second_dense_view, "add the second embedding model's dense view"),
    Rule(
        "widen_views",
        MISSES,
        0.35,
        lambda c: None if c.budgeted else _widen_views(c.space, c.v),
        "widen the views",
    ),
    *ranking_rules(MISSES),
    Rule(
        "structured_view_on",
        MISSES,
        0.3,
        lambda c: {"structured_top_k": 5} if c.v["structured_top_k"] == 0 else None,
        "the structured view is off",
    ),
    Rule(
        "entity_swap_for_misses",
        MISSES,
        0.25,
        lambda c: None if c.v["enable_entity_swap"] else {"enable_entity_swap": True},
        "search again without person names",
    ),
    Rule(
        "scenes",
        MISSES,
        0.2,
        lambda c: None if c.v.get("scene_top_k") else {"scene_top_k": 10},
        "search deeper inside the scenes the question matches",
    ),
    Rule(
        "cue_graph",
        MISSES,
        0.15,
        lambda c: None if c.v.get("cue_graph_top_k") else {"cue_graph_top_k": 10},
        "follow the cues the matching memories share",
    ),
    Rule(
        "consolidate_recurring",
        GAPS,
        0.5,
        lambda c: {"consolidation_policy": "recurrence"} if c.v.get("consolidation_policy") == "eager" else None,
        "keep raw turns retrievable and consolidate only recurring topics",
    ),
    Rule(
        "routed_granularity",
        GAPS,
        0.4,
        lambda c: {"memory_granularity": "routed"} if c.v.get("memory_granularity") == "fact" else None,
        "route questions to raw turns or episodes when facts fall short",
    ),
    Rule("raise_token_budget", CUTS, 0.75, _raise_token_budget, "raise the token budget"),
    *ranking_rules(CUTS),
    Rule("more_items", CUTS, 0.55, lambda c: None if c.budgeted else {"max_context": c.bump("max_context", 4)}),
    Rule(
        "rank_fusion_above_the_cut",
        CUTS,
        0.3,
        lambda c: {"fusion_mode": "rrf"} if c.v["fusion_mode"] != "rrf" else None,
        "rank fusion lifts what several views agree on above the cut",
    ),
    Rule("fewer_abstentions", ABSTENTIONS, 0.5, _answer_fewer_abstentions),
    Rule(
        "answer_anyway",
        ABSTENTIONS,
        0.2,
        lambda c: {"abstain_when": "never"} if c.v.get("abstain_when") == "reader" else None,
        "ask the reader for its best answer instead of an abstention",
    ),
    Rule(
        "judge_retry",
        ABSTENTIONS,
        0.3,
        lambda c: {"judge_retries": 1} if c.v.get("judge_retries") == 0 else None,
        "let a judge retry such answers from another granularity",
    ),
    Rule(
        "sessions_layout",
        READER_ERRORS,
        0.25,
        lambda c: {"context_layout": "sessions"} if c.v.get("context_layout") == "list" else None,
        "show the context by session, under date headers",
    ),
    Rule(
        "time_order",
        READER_ERRORS,
        0.2,
        lambda c: {"context_order": "chronological"} if c.v["context_order"] == "score" else None,
        "show the context in time order",
    ),
    Rule(
        "quote_first",
        READER_ERRORS,
        0.15,
        lambda c: None if c.v.get("quote_then_answer", True) else {"quote_then_answer": True},
        "have the reader quote its supporting line before it answers",
    ),
    Rule(
        "fewer_items",
        NOISE,
        0.3,
        lambda c: {"max_context": c.bump("max_context", -4)} if c.inp.mean_context > CROWDED_CONTEXT else None,
    ),
    Rule("match_the_gold_form", FORMAT_MISMATCHES, 0.3, _match_the_gold_form),
    Rule(
        "cap_answer_length",
        FORMAT_MISMATCHES,
        0.25,
        lambda c: None if c.v.get("answer_max_words", 1) else {"answer_max_words": 6},
        "cut long answers to their head",
    ),
    Rule(
        "resolve_answer_dates",
        FORMAT_MISMATCHES,
        0.2,
        lambda c: None if c.v.get("resolve_relative_dates", True) else {"resolve_relative_dates": True},
        "write a relative time in the answer as the date it means",
    ),
    Rule(
        "verify_answers",
        HALLUCINATIONS,
        0.5,
        lambda c: (
            None
            if c.v["enable_answer_verification"]
            else {"enable_answer_verification": True, "verification_style": "strict"}
        ),
        "verify answers against the context",
    ),
    Rule(
        "cautious_answers",
        HALLUCINATIONS,
        0.45,
        lambda c: {"answer_style": "cautious"} if c.v["answer_style"] != "cautious" else None,
        "answer only when the context clearly supports it",
    ),
    Rule(
        "abstain_unsupported",
        HALLUCINATIONS,
        0.35,
        lambda c: {"abstain_when": "unsupported"} if c.v.get("abstain_when") == "reader" else None,
        "abstain when no word of the answer is in the context",
    ),
    Rule(
        "entity_swap_for_hallucinations",
        HALLUCINATIONS,
        0.3,
        lambda c: None if c.v["enable_entity_swap"] else {"enable_entity_swap": True},
        "entity swap exposes the wrong-person premise",
    ),
)


@dataclass(frozen=True)
class Step:
    """A menu value: the setting moved by `by` within its range (from the type's current value)."""

    by: float


# A lagging question type's per-type overrides, most promising first (each a little weaker, MENU_DECAY).
TYPE_MENUS: dict[str, tuple[dict[str, Any], ...]] = {
    "temporal": (
        {"answer_style": "temporal"},
        {"time_decay_half_life_days": 180.0, "recency_weight": 0.2},
        {"context_order": "chronological"},
        {"foresight_top_k": 5},
        {"resolve_relative_dates": True},
    ),
    "multi_hop": (
        {"enable_query_decomposition": True},
        {"answer_style": "step_by_step"},
        {"reflection_rounds": 1},
        {"max_context": Step(6)},
        {"cue_graph_top_k": 10},
        {"scene_top_k": 10},
    ),
    "counting": ({"answer_style": "step_by_step"}, {"max_context": Step(6)}, {"memory_granularity": "episode"}),
    "inference": (
        {"answer_style": "detailed"},
        {"max_context": Step(4)},
        {"memory_granularity": "episode"},
        {"scene_top_k": 10},
    ),
    "knowledge_update": (
        {"recency_weight": 0.3, "time_decay_half_life_days": 90.0},
        {"enable_refresher": True},
        {"judge_retries": 1},
    ),
    "preference": ({"structured_top_k": 10}, {"answer_style": "detailed"}),
    "single_fact": ({"answer_style": "extractive"}, {"keyword_top_k": Step(5)}),
}


def _type_actions(
    space: ActionSpace, qtype: str, f1: float, mean: float, share: float, values: dict[str, Any], budgeted: bool = False
) -> list[Action]:
    """Per-type overrides that keep the other types as they are; strength = the F1 gap times
    the type's share of the questions (a small type lagging far can gain little overall). Under a
    token budget a `Step` (more items, a wider view) changes nothing the budget lets through, so
    those moves are left out (the others keep their strength)."""
    gap = mean - f1
    strength = gap * share
    reason = f"{qtype} lags the mean F1 by {gap:.2f}"
    menu = [
        (i, {k: _bump(space, values, k, val.by) if isinstance(val, Step) else val for k, val in changes.items()})
        for i, changes in enumerate(TYPE_MENUS.get(qtype, ()))
        if not (budgeted and any(isinstance(val, Step) for val in changes.values()))
    ]
    return [Action(strength * (1 - MENU_DECAY * i), reason, changes, qtype) for i, changes in menu]


def _f1(row: TypeRow) -> float:
    return row.f1 or 0.0  # (only rows with an F1 are judged)


def lagging_type_actions(c: RuleContext) -> list[Action]:
    """The menus of the question types whose F1 lags the mean (weakest type first); types too small
    to judge, or whose label tells the answer, are left out."""
    inp = c.inp
    typed = [
        r for r in inp.by_type if r.n >= MIN_TYPE_N and r.f1 is not None and r.question_type not in NO_OVERRIDE_TYPES
    ]
    if not typed:
        return []
    total_n = sum(r.n for r in inp.by_type) or 1
    mean = sum(_f1(r) * r.n for r in typed) / sum(r.n for r in typed)
    actions: list[Action] = []
    for row in sorted(typed, key=_f1):
        if _f1(row) < mean - LAG_MARGIN:
            merged = {**c.v, **inp.overrides.get(row.question_type, {})}
            actions.extend(
                _type_actions(c.space, row.question_type, _f1(row), mean, row.n / total_n, merged, c.budgeted)
            )
    return actions


def _evidence_counterweight(space: ActionSpace, v: dict[str, Any]) -> dict[str, Any]:
    """Everything that gives answerable questions their evidence back, at once: one more view of
    the memories (the dense one when it is off, else a wider keyword view), a context budget that
    holds every candidate the views now return (a budget already full of them would cut the new
    ones), and — when answers are gated (verified, or cautious) — a judge that lets a withdrawn
    answer retry from another source. Each alone moves answerable F1 by less than the loss it
    must cancel; a counterweight is judged as one experiment."""
    known = space
    out = _one_more_view(space, v)
    candidates = sum({**v, **out}[k] or 0 for k in VIEW_SIZES)
    if candidates > v["max_context"]:
        out["max_context"] = known["max_context"].clamp(candidates)
    gated = v["enable_answer_verification"] or v["answer_style"] == "cautious"
    if gated and "judge_retries" in known and v.get("judge_retries") == known["judge_retries"].off:
        out["judge_retries"] = known.numeric("judge_retries").min
    return out


def _counterweights(space: ActionSpace, v: dict[str, Any], losing: str) -> list[dict[str, Any]]:
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
        options = [
            _evidence_counterweight(space, v),
            {"max_context": _bump(space, v, "max_context", 2)},
            _one_more_view(space, v),
        ]
    return [o for o in options if o and any(v.get(k) != val for k, val in o.items())]


def trade_actions(inp: DiagnosisInput, space: ActionSpace) -> list[Action]:
    """The latest tried change that was rejected because it traded one group for the other, kept
    and paired with a counterweight for the group it hurt (strongest first): a lever that helps
    answerable questions is not lost because it also answers some unanswerable ones."""
    tried = [
        h
        for h in inp.history
        if h.decision in (Decision.APPLIED, Decision.REVERTED)
        and h.changes
        and h.outcome_groups
        and not h.outcome_accepted
    ]
    if not tried:
        return []
    last = tried[-1]
    groups = last.outcome_groups or {}
    if any(c.scope != "global" for c in last.changes):
        return []
    kept = {c.field: c.new for c in last.changes}
    for gaining, losing in (("main", "adversarial"), ("adversarial", "main")):
        gain, loss = groups.get(gaining), groups.get(losing)
        if not gain or not loss or gain.diff < TRADE_GAIN or gain.p_gain >= TRADE_P or loss.diff >= 0:
            continue
        merged = {**inp.config, **kept}
        reason = (
            f"round {last.round + 1}'s change ({', '.join(kept)}) gained {gaining} {gain.diff:+.3f} "
            f"but lost {losing} {loss.diff:+.3f}; keep it with a counterweight for {losing}"
        )
        # a counterweight moves settings the kept change left alone: moving its own settings
        # further is walking a lever that already failed to cancel the loss
        fresh = [
            extra
            for extra in _counterweights(space, merged, losing)
            if not any(k in kept for k, val in extra.items() if merged.get(k) != val)
        ]
        return [
            Action(TRADE_STRENGTH - MENU_DECAY * i, reason, {**kept, **extra}, bundle=True)
            for i, extra in enumerate(fresh)
        ]
    return []


def lever_actions(inp: DiagnosisInput, rules: list[Action], space: ActionSpace) -> list[Action]:
    """Switch on a bundle lever (a `maps_to` dimension, e.g. one that emerged in this run) that is
    off: as strong as the firing rules whose moves it makes (several moves at once is why it was
    proposed); one that no rule asks for comes last."""
    v = inp.config
    actions = []
    for name, dim in space.items():
        if not dim.maps_to or v.get(name):
            continue
        moves = {(k, move_direction(k, v.get(k), val, space)) for k, val in dim.maps_to.items() if v.get(k) != val}
        if not moves:
            continue
        support = [
            a
            for a in rules
            if not a.qtype
            and any((k, move_direction(k, v.get(k), val, space)) in moves for k, val in a.changes.items())
        ]
        strength = sum(a.strength for a in support) if support else UNSUPPORTED_LEVER
        why = (
            f"it makes the moves of {len(support)} firing rule(s) at once"
            if support
            else "no rule asks for it; not tried yet"
        )
        actions.append(Action(strength, f"switch on the lever {name} ({dim.description}): {why}", {name: True}))
    return actions


def candidate_actions(inp: DiagnosisInput, space: ActionSpace) -> list[Action]:
    """Every rule of `space`'s settings that fires, strongest first. Strength estimates the share
    of all questions the action could recover (failure mass times a rough efficacy): a traded
    change kept with a counterweight, the failure rules of `RULES`, the lagging types' menus, then
    the run's levers that make several of those moves at once."""
    c = RuleContext(inp, space)
    actions: list[Action] = trade_actions(inp, space)
    actions += [a for a in (rule.fire(c) for rule in RULES) if a is not None]
    actions += lagging_type_actions(c)
    actions += lever_actions(inp, actions, space)
    # mechanism actions name dimensions that an action space without that mechanism lacks
    return sorted((a for a in actions if all(k in space for k in a.changes)), key=lambda a: -a.strength)


def viable_actions(inp: DiagnosisInput, space: ActionSpace) -> list[tuple[Action, dict[str, Any]]]:
    """Every rule that fires, strongest first, with the changes it would still make (settings
    already in effect left out, and settings that would act on nothing under the config the
    action makes), skipping moves already tried without a gain (for a bundle: the same bundle
    already tried)."""
    bad = inp.failed_moves(space)
    tried = inp.tried_change_sets()
    fixed = set(inp.fixed)
    out = []
    for action in candidate_actions(inp, space):
        if fixed & set(action.changes):  # the run would drop the change: a wasted round
            continue
        scope = action.qtype or "global"
        # what each field holds now at this scope (None: an override would add it)
        before = inp.overrides.get(action.qtype, {}) if action.qtype else inp.config
        current = {**inp.config, **before}
        effective = {k: val for k, val in action.changes.items() if current.get(k) != val}
        # a move the code ignores under the config it makes (space/acting.py) would spend a round on nothing
        idle = idle_changes(
            space, inp.config, inp.overrides, effective, action.qtype, TokenBudget(inp.token_budget or None)
        )
        effective = {k: val for k, val in effective.items() if k not in idle}
        if not effective:
            continue
        if action.bundle:
            if frozenset(change_key(scope, k, val) for k, val in effective.items()) in tried:
                continue
        elif any((scope, k, move_direction(k, before.get(k), val, space)) in bad for k, val in effective.items()):
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

    def diagnose(self, inp: DiagnosisInput, config: RetrievalConfig) -> DiagnosisResult:
        for action, effective in viable_actions(inp, config.space):
            return DiagnosisResult(action_proposal(action, effective))
        return DiagnosisResult(Proposal(rationale="no rubric rule fires that was not already tried"))

    def alternatives(self, inp: DiagnosisInput, config: RetrievalConfig, k: int) -> list[Proposal]:
        """The next `k` ranked actions after the strongest one."""
        ranked = viable_actions(inp, config.space)
        return [action_proposal(action, effective) for action, effective in ranked[1 : k + 1]]

    def observe(self, config: RetrievalConfig, score: float) -> None:
        return None


def create(seed: int, client: LLMClient | None) -> RubricDiagnoser:
    return RubricDiagnoser()
