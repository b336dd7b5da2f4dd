"""No proposal spends a round on nothing: every change a diagnoser or an exploration proposes alters
what some question's answer path retrieves.

Over configs a dev-file run visits (the presets, one under a token budget, perturbations of them),
the rubric's every ranked action (the LLM diagnoser's menu is its first MENU_SIZE) under failure
profiles that make every rule and every lagging type's menu fire (as far as the config's real
contexts allow: a budget cut only where candidates were cut, their real mean size), the random
diagnoser's draws and TPE's trials are applied one by one, and the real retriever (the answer
path's contexts: the routed store, the refresher, the judge's retries) runs on two LoCoMo
conversations with offline roles: at least one question's contexts must differ.

Two idle kinds are tolerated, and counted: a context size above every candidate the views returned,
before and after the change (how many they return depends on the conversation, which no setting
declares), and a fusion mode changed where a single view feeds the fusion (without a prior or a
second view, fusing one view's scores only rescales them; the space's `acts_when` does not spell
out every term that can join the fusion). Left out, with their reason: proposals that change a setting acting on a built context
(`stage = "answer"`: they act on the answer, not the retrieval) and per-type moves for a question
type these conversations do not have."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest

from evolvemem.contracts.diagnosis import (
    DiagnosisInput,
    GroupOutcome,
    HistoryEntry,
    Proposal,
    ScoreSummary,
    TypeRow,
)
from evolvemem.contracts.vocab import Decision, FailureClass
from evolvemem.diagnosers.llm import MENU_SIZE
from evolvemem.diagnosers.random_search import RandomDiagnoser
from evolvemem.diagnosers.rubric import TYPE_MENUS, action_proposal, viable_actions
from evolvemem.diagnosers.tpe import TPEDiagnoser
from evolvemem.space.changes import Change
from evolvemem.space.config import RetrievalConfig, load_config
from evolvemem.space.ops import perturb
from tests.conftest import require_dev_data

CONVERSATIONS = {"conv-26", "conv-30"}
CONTEXT_SIZE = "max_context"  # the two smallest of the development file
VIEWS = ("semantic_top_k", "keyword_top_k", "structured_top_k", "late_top_k", "second_semantic_top_k")
# every failure signal of the rubric at its threshold (shares of 100 failures), and the reader's
# errors in a crowded context: every rule can fire
PROFILE = {
    FailureClass.RETRIEVAL_MISS: 20,
    FailureClass.EXTRACTION_GAP: 10,
    FailureClass.BUDGET_CUT: 10,
    FailureClass.WRONG_ABSTENTION: 10,
    FailureClass.ANSWER_ERROR: 30,
    FailureClass.FORMAT_MISMATCH: 10,
    FailureClass.HALLUCINATION: 10,
    FailureClass.CORRECT: 100,
}


@dataclass(frozen=True)
class Case:
    """One proposal made for one config: where it came from, the config and the proposal."""

    source: str
    config_name: str
    config: RetrievalConfig
    proposal: Proposal


def fixed_settings(config: RetrievalConfig) -> tuple[str, ...]:
    """What an offline run without a cross-encoder or a second embedding model keeps fixed
    (loop/runner.py: settings that act only through a model the run lacks)."""
    return tuple(
        name for name, dim in config.space.items() if dim.needs_model or dim.needs_reranker or dim.needs_second_embedder
    )


def diagnosis_inputs(config: RetrievalConfig, mean_context: float = 20.0, cut: bool = True) -> list[DiagnosisInput]:
    """Failure profiles under which every rule fires: every type's menu lagging but one, then
    single facts lagging alone, then a change that traded one group for the other (a bundle).
    `mean_context` and `cut` (whether any ranked candidate was cut) are the config's own: no
    evidence is cut by a budget where nothing is."""
    taxonomy = {str(k): v for k, v in PROFILE.items() if cut or k != FailureClass.BUDGET_CUT}
    lagging_all = [TypeRow("single_fact", 100, 0.8)] + [TypeRow(t, 20, 0.2) for t in TYPE_MENUS if t != "single_fact"]
    lagging_one = [TypeRow("single_fact", 20, 0.1)] + [TypeRow(t, 20, 0.6) for t in TYPE_MENUS if t != "single_fact"]
    traded = HistoryEntry(
        1,
        Decision.REVERTED,
        changes=(Change("enable_entity_swap", False, True),),
        outcome_delta=-0.001,
        outcome_accepted=False,
        outcome_groups={"main": GroupOutcome(0.02, 0.01, 0.9), "adversarial": GroupOutcome(-0.03, 0.9, 0.01)},
    )
    return [
        DiagnosisInput(
            round=2,
            objective="balanced",
            score=0.4,
            overall=ScoreSummary(n=200, f1=0.4),
            by_type=rows,
            by_category=[],
            taxonomy=taxonomy,
            taxonomy_by_type={},
            worst_cases=[],
            config=config.values(),
            overrides=config.overrides(),
            history=history,
            mean_context=mean_context,
            fixed=fixed_settings(config),
        )
        for rows, history in ((lagging_all, []), (lagging_one, []), (lagging_all, [traded]))
    ]


def visited_configs() -> dict[str, RetrievalConfig]:
    """The presets, the default under a token budget (the ranking rules fire only there), and
    random perturbations of the presets as the guard's explorations make them."""
    configs = {name: load_config(name)[0] for name in ("weak", "default", "hybrid")}
    configs["default+budget"] = configs["default"].with_changes({"context_token_budget": 1500})[0]
    free = [n for n in configs["default"].space if n not in fixed_settings(configs["default"])]
    for name in ("weak", "default", "hybrid"):
        for seed in (1, 2):
            configs[f"{name}~{seed}"] = perturb(configs[name], random.Random(seed), 3, names=free)[0]
    return configs


def proposals(configs: dict[str, RetrievalConfig], contexts: Contexts) -> list[Case]:
    """Every rubric action (the menu included), random draws and TPE trials for every config, with
    the settings the run keeps fixed dropped as the runner drops them."""
    cases = []
    for name, config in configs.items():
        seen: set[str] = set()
        for inp in diagnosis_inputs(config, *contexts.shape(config)):
            for rank, (action, changes) in enumerate(viable_actions(inp, config.space)):
                proposal = action_proposal(action, changes)
                key = repr((proposal.changes, proposal.overrides))
                if key not in seen:
                    seen.add(key)
                    where = "menu" if rank < MENU_SIZE else "rubric"
                    cases.append(Case(f"{where}:{action.rule or action.reason[:40]}", name, config, proposal))
        inp = diagnosis_inputs(config)[0]
        drawn = [RandomDiagnoser(seed).diagnose(inp, config).proposal for seed in (1, 2)]
        drawn += RandomDiagnoser(3).alternatives(inp, config, 2)
        tpe = TPEDiagnoser(seed=0)
        drawn += [tpe.diagnose(inp, config).proposal for _ in range(2)]
        for proposal in drawn:
            proposal.drop_fields(set(fixed_settings(config)), "fixed for an offline run")
            if not proposal.is_empty:
                cases.append(Case(f"random/tpe:{proposal.rationale}", name, config, proposal))
    return cases


def views_on(config: RetrievalConfig, question_type: str | None) -> int:
    """How many retrieval views feed the fusion for `question_type` (all types: None)."""
    effective = config.for_type(question_type) if question_type else config
    return sum(1 for name in VIEWS if effective.value(name))


def acts_on_answers(case: Case) -> bool:
    """The proposal changes a setting that acts on a built context (its answer, not its retrieval)."""
    space = case.config.space
    names = [*case.proposal.changes, *(n for s in case.proposal.overrides.values() for n in s)]
    return any(space[n].stage == "answer" for n in names)


class Contexts:
    """What each question's answer path retrieves under a config (memoised by config and question)."""

    def __init__(self, ws: Any, questions: list[Any]):
        self.ws, self.questions = ws, questions
        self.known: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.sizes: dict[tuple[str, str], tuple[int, int]] = {}  # the first context's size and its cut
        self.ready: set[str] = set()

    def shape(self, config: RetrievalConfig) -> tuple[float, bool]:
        """The mean size of the first contexts under `config`, and whether any ranked candidate was cut."""
        for question in self.questions:
            self.of(config, question)
        sizes = [self.sizes[(config.fingerprint(), q.question_id)] for q in self.questions]
        return sum(n for n, _ in sizes) / len(sizes), any(cut for _, cut in sizes)

    def of(self, config: RetrievalConfig, question: Any) -> tuple[Any, ...]:
        from evolvemem.answering.path import answer_path
        from evolvemem.answering.stores import stores_needed

        key = (config.fingerprint(), question.question_id)
        if key not in self.known:
            if key[0] not in self.ready:
                self.ws.ensure_stores(stores_needed(config))
                self.ws.prepare(self.questions, config)
                self.ready.add(key[0])
            trace = answer_path(self.ws, question, config.for_type(question.question_type))
            self.sizes[key] = (len(trace.attempts[0].context), len(trace.attempts[0].cut))
            self.known[key] = tuple(
                (a.source, tuple(m.memory_id for m in a.context), a.refreshed) for a in trace.attempts
            )
        return self.known[key]

    def nothing_cut(self, config: RetrievalConfig, question_type: str | None) -> bool:
        """Every ranked candidate reached the first context of every question (of `question_type`)."""
        fingerprint = config.fingerprint()
        return all(
            self.sizes[(fingerprint, q.question_id)][1] == 0
            for q in self.questions
            if question_type is None or q.question_type == question_type
        )

    def any_differs(self, before: RetrievalConfig, after: RetrievalConfig, question_type: str | None) -> bool:
        return any(
            self.of(before, q) != self.of(after, q)
            for q in self.questions
            if question_type is None or q.question_type == question_type
        )


@pytest.fixture(scope="module")
def contexts() -> Contexts:
    from evolvemem.benchmarks import load_benchmark
    from evolvemem.roles.factory import ModelSettings, build_roles
    from evolvemem.workspace import Workspace

    dataset = load_benchmark("locomo", str(require_dev_data())).subset(CONVERSATIONS)
    ws = Workspace(dataset, build_roles(ModelSettings()))
    ws.build()
    return Contexts(ws, list(dataset.questions)[::2])  # every other question: a quick test that sees every type


def test_every_proposal_changes_some_questions_retrieval(contexts: Contexts) -> None:
    present = {q.question_type for q in contexts.questions}
    cases = proposals(visited_configs(), contexts)
    checked, idle, unforeseeable = [], [], []
    for case in cases:
        scopes = [None] if case.proposal.changes else []
        scopes += [t for t in case.proposal.overrides if t in present]
        if acts_on_answers(case) or not scopes:
            continue
        after = case.proposal.apply_to(case.config)[0]
        checked.append(case)
        # a global change is seen by every question; an override only by its type's questions
        scope = None if case.proposal.changes else scopes[0]
        if contexts.any_differs(case.config, after, scope):
            continue
        # how many candidates the views return is the conversation's, not the config's: a context
        # size above all of them, before and after, is the one idle move the space cannot foresee
        names = {*case.proposal.changes, *(n for o in case.proposal.overrides.values() for n in o)}
        if names == {CONTEXT_SIZE} and contexts.nothing_cut(case.config, scope) and contexts.nothing_cut(after, scope):
            unforeseeable.append(case)
        elif names == {"fusion_mode"} and views_on(after, scope) <= 1:
            unforeseeable.append(case)  # one view's scores fused alone: a monotone rescaling
        else:
            idle.append(f"{case.config_name} {case.source}: {case.proposal.changes or case.proposal.overrides}")
    assert not idle, f"{len(idle)} of {len(checked)} proposals change no question's retrieval:\n" + "\n".join(idle)
    sources = {c.source.split(":")[0] for c in checked}
    assert {"menu", "rubric", "random/tpe"} <= sources and len(checked) >= 80, (sources, len(checked))
    assert len(unforeseeable) < len(checked) / 10, [f"{c.config_name} {c.source}" for c in unforeseeable]


def test_a_rubric_move_the_fusion_ignores_is_not_proposed() -> None:
    """The issue's case: under sum fusion a view's weight is ignored, so `late_weight` is never
    raised there; under rank fusion, with the late view on, it is (same failures, same budget)."""
    ranked = load_config("default")[0].with_changes({"context_token_budget": 1500, "late_top_k": 10})[0]
    summed = ranked.with_changes({"fusion_mode": "sum"})[0]

    def rules(config: RetrievalConfig) -> set[str]:
        return {a.rule for inp in diagnosis_inputs(config) for a, _ in viable_actions(inp, config.space)}

    assert "late_weight" in rules(ranked) and "late_weight" not in rules(summed)
