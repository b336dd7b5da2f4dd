"""`llm`: a model reads the SQL summaries and proposes a change (prompts/diagnose.md), or picks one
of the rubric's ranked candidates (`menu` mode, prompts/diagnose_menu.md).

The prompt is sized to the model's window (least useful parts dropped first, noted in the
record); the reply is parsed as JSON with repair, every value validated against the config's space,
and anything copied from the prompt's example dropped. A garbled reply yields an empty proposal
and a logged reason, never a crash (the loop then falls back to the rubric)."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Callable, Iterator

from evolvemem.contracts.diagnosis import (
    DiagnosisInput,
    DiagnosisResult,
    HistoryEntry,
    Proposal,
    WorstCase,
    proposal_from_raw,
)
from evolvemem.contracts.usage import Usage
from evolvemem.diagnosers.rubric import Action, action_proposal, viable_actions
from evolvemem.errors import EvolveMemError
from evolvemem.llm.budget import FittedPrompt, ask_fitted, fit_prompt
from evolvemem.llm.client import LLMCallFailed, LLMClient, LLMJSONError, LLMReply
from evolvemem.llm.echo import EchoDetector
from evolvemem.prompts import load_prompt
from evolvemem.qtypes import LABEL_ONLY_TYPES as NO_OVERRIDE_TYPES
from evolvemem.qtypes import QUESTION_TYPES
from evolvemem.space.acting import idle_changes
from evolvemem.space.action_space import ActionSpace
from evolvemem.space.config import RetrievalConfig
from evolvemem.space.ops import action_space_text


MAX_REPLY_TOKENS = 1200
MIN_REPLY_TOKENS = 400  # a JSON proposal still fits; below this the reply would be cut off
MENU_REPLY_TOKENS = 200
MENU_SIZE = 6
MODES = ("free", "menu")
EXAMPLE_MARKER = "Example of the form"


def _compact(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _worst_text(cases: list[WorstCase]) -> str:
    return (
        "\n".join(
            f"- [{c.question_type}] Q: {c.question} | gold: {c.gold} | predicted: {c.prediction} "
            f"| f1 {c.f1} | {c.failure} | context: {', '.join(c.context_views or [])}"
            for c in cases
        )
        or "(none)"
    )


def _paired_note(accepted: bool | None) -> str:
    return "" if accepted is None else " (a paired gain)" if accepted else " (no paired gain)"


def _history_text(history: list[HistoryEntry]) -> str:
    return (
        "\n".join(
            f"- round {h.round}: {h.decision} ({h.reason}); score {h.score}; changes "
            f"{_compact(h.changes_as_stored())}; next round moved the score by {h.outcome_delta}"
            f"{_paired_note(h.outcome_accepted)}"
            for h in history
        )
        or "(first round)"
    )


def _one_per_type(cases: list[WorstCase]) -> list[WorstCase]:
    first: dict[str, WorstCase] = {}
    for case in cases:
        first.setdefault(case.question_type, case)
    return list(first.values())


def diagnosis_variants(inp: DiagnosisInput, space: ActionSpace) -> Iterator[tuple[str, str]]:
    """The free-form prompt, then ever shorter versions with what each leaves out (llm/budget.py):
    older history, extra worst cases, the settings' descriptions, then all history and cases."""
    steps = [
        ("", inp.history, inp.worst_cases, False),
        ("history before the last 3 rounds", inp.history[-3:], inp.worst_cases, False),
        ("worst cases beyond one per question type", inp.history[-3:], _one_per_type(inp.worst_cases), False),
        ("the settings' descriptions", inp.history[-3:], _one_per_type(inp.worst_cases), True),
        ("all history and worst cases", [], [], True),
    ]
    for note, history, worst, brief in steps:
        yield (
            note,
            load_prompt("diagnose").render(
                action_space=action_space_text(space, brief=brief),
                question_types=", ".join(QUESTION_TYPES),
                round=inp.round,
                config=_compact(inp.config),
                overrides=_compact(inp.overrides),
                objective=inp.objective,
                score=f"{inp.score:.4f}",
                overall=_compact(inp.overall.as_dict()),
                by_type="\n".join(_compact(r.as_dict()) for r in inp.by_type),
                taxonomy=_compact(inp.taxonomy),
                dominant=inp.dominant_failure() or "none",
                taxonomy_by_type=_compact(inp.taxonomy_by_type),
                reader_split=_compact(inp.reader_evidence) if inp.reader_evidence else "none (no answer model)",
                reader_failures=_compact(inp.reader_failures) if inp.reader_evidence else "none",
                worst_cases=_worst_text(worst),
                history=_history_text(history),
            ),
        )


def _names(name: str, text: str) -> bool:
    """`text` names `name` as a whole identifier (not inside a longer one)."""
    return bool(name) and re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text) is not None


def drop_echoes(proposal: Proposal, prompt: str) -> None:
    """Remove what the model copied from the prompt's example (analysis, missing topics), listed
    in `rejected`; a copied new dimension is kept as refused, so the run records the refusal."""
    if EXAMPLE_MARKER not in prompt:
        return
    rest, example = prompt.split(EXAMPLE_MARKER, 1)
    echo = EchoDetector(example, rest)
    if proposal.rationale and echo.copied(proposal.rationale):
        proposal.rejected.append(f"analysis copied from the prompt's example: {proposal.rationale[:120]!r}")
        proposal.rationale = ""
    kept = [t for t in proposal.missing_topics if not echo.copied(t)]
    proposal.rejected += [
        f"missing topic copied from the prompt's example: {t!r}" for t in proposal.missing_topics if t not in kept
    ]
    proposal.missing_topics = kept
    for dim in proposal.new_dimensions:
        # the example's lever is named in the example only: reusing its name is copying it
        named = _names(dim.name, example) and not _names(dim.name, rest)
        if not dim.refused and (named or echo.copied(f"{dim.name} {dim.description} {dim.rationale}")):
            dim.refused = "copied from the prompt's example"
            proposal.rejected.append(f"new dimension copied from the prompt's example: {dim.name!r}")


IDLE = "acts on nothing under the config the proposal makes (its acts_when does not hold)"


def drop_idle(proposal: Proposal, config: RetrievalConfig) -> None:
    """Remove the changes the code would ignore under the config the proposal makes
    (space/acting.py), each listed in `rejected`: a round spent on one changes nothing."""
    made = proposal.apply_to(config)[0]
    values, overrides = made.values(), made.overrides()
    for qtype, settings in [(None, proposal.changes), *proposal.overrides.items()]:
        for name in idle_changes(made.space, values, overrides, settings, qtype, made.budget):
            del settings[name]
            proposal.rejected.append(f"{name} ({qtype or 'global'}): {IDLE}")
    proposal.overrides = {q: s for q, s in proposal.overrides.items() if s}


def menu_text(actions: list[tuple[Action, dict[str, Any]]]) -> str:
    return "\n".join(
        f"{i}. {'[' + a.qtype + ' questions only] ' if a.qtype else ''}{_compact(changes)} — {a.reason}"
        for i, (a, changes) in enumerate(actions, 1)
    )


def menu_choice(parsed: Any, size: int) -> tuple[int | None, str]:
    """The candidate number (1-based) a menu reply chose, or None and why it chose none."""
    if not isinstance(parsed, dict):
        return None, "the reply is not a JSON object"
    try:
        choice = int(str(parsed.get("choice")))
    except ValueError:
        return None, f"choice {parsed.get('choice')!r} is not a candidate number"
    if not 1 <= choice <= size:
        return None, f"choice {choice} is not one of the {size} candidates"
    return choice, ""


def proposal_from_menu(parsed: Any, actions: list[tuple[Action, dict[str, Any]]], space: ActionSpace) -> Proposal:
    """The chosen candidate with the model's adjustments (only to its own settings, validated)."""
    choice, why = menu_choice(parsed, len(actions))
    if choice is None:
        return Proposal(rejected=[why])
    action, changes = actions[choice - 1]
    raw_adjust = parsed.get("adjust")
    adjust: dict[str, Any] = raw_adjust if isinstance(raw_adjust, dict) else {}
    rejected = [f"adjust {k}: not a setting of candidate {choice}" for k in adjust if k not in changes]
    wanted = {k: v for k, v in adjust.items() if k in changes}
    checked = proposal_from_raw(
        {"changes": wanted} if not action.qtype else {"overrides": {action.qtype: wanted}}, space
    )
    clean = checked.changes if not action.qtype else checked.overrides.get(action.qtype, {})
    why = str(parsed.get("why") or "")[:500]
    proposal = action_proposal(
        action, {**changes, **clean}, f"menu choice {choice}: {action.reason}" + (f" — {why}" if why else "")
    )
    proposal.rejected = rejected + checked.rejected
    return proposal


class LLMDiagnoser:
    """A model diagnoses the round: free-form (it writes the changes) or from the rubric's menu
    (it picks one ranked candidate and may adjust its values: a short prompt and a small reply
    that small models manage). Every prompt is sized to the model's window."""

    name = "llm"

    def __init__(self, client: LLMClient, mode: str = "free"):
        if mode not in MODES:
            raise EvolveMemError(f"--diagnosis-mode must be {' or '.join(MODES)}, not {mode!r}")
        self.client = client
        self.mode = mode
        self._menu_left: list[tuple[Action, dict[str, Any]]] | None = None  # the menu after this round's pick

    def diagnose(self, inp: DiagnosisInput, config: RetrievalConfig) -> DiagnosisResult:
        self._menu_left = None
        space = config.space
        if self.mode == "menu":
            return self._from_menu(inp, viable_actions(inp, space)[:MENU_SIZE], config)
        fitted, parsed, reply, error, cost = self._ask(
            lambda: fit_prompt(self.client, diagnosis_variants(inp, space), MAX_REPLY_TOKENS, MIN_REPLY_TOKENS)
        )
        prompt, trimmed = (fitted.text, list(fitted.trimmed)) if fitted else ("", [])
        if reply is None:
            return DiagnosisResult(Proposal(), prompt, "", error, cost, trimmed)
        proposal = proposal_from_raw(parsed, space) if not error else Proposal()
        for qtype in NO_OVERRIDE_TYPES:
            if proposal.overrides.pop(qtype, None) is not None:
                proposal.rejected.append(f"overrides for {qtype} are not allowed (they would use the label)")
        drop_echoes(proposal, prompt)
        error = error or "; ".join(proposal.rejected)
        return DiagnosisResult(proposal, prompt, reply.text, error, cost, trimmed)

    def alternatives(self, inp: DiagnosisInput, config: RetrievalConfig, k: int) -> list[Proposal]:
        """`k` further picks from the rubric's menu, one short call each, every candidate already
        picked this round taken out of the menu first."""
        if self._menu_left is None:
            self._menu_left = viable_actions(inp, config.space)[:MENU_SIZE]
        picked = []
        for _ in range(k):
            result = self._from_menu(inp, self._menu_left, config)
            if result.proposal.is_empty:
                break
            picked.append(result.proposal)
        return picked

    def _from_menu(
        self, inp: DiagnosisInput, actions: list[tuple[Action, dict[str, Any]]], config: RetrievalConfig
    ) -> DiagnosisResult:
        if not actions:
            return DiagnosisResult(Proposal(rationale="no candidate change is left to choose from"))
        prompt = load_prompt("diagnose_menu").render(
            round=inp.round,
            objective=inp.objective,
            score=f"{inp.score:.4f}",
            taxonomy=_compact(inp.taxonomy),
            menu=menu_text(actions),
        )
        _, parsed, reply, error, cost = self._ask(lambda: fit_prompt(self.client, [("", prompt)], MENU_REPLY_TOKENS))
        if reply is None:
            return DiagnosisResult(Proposal(), prompt, "", error, cost)
        proposal = proposal_from_menu(parsed, actions, config.space) if not error else Proposal()
        drop_idle(proposal, config)  # an adjustment may switch off what a candidate's other move needs
        choice, _ = menu_choice(parsed, len(actions)) if not error else (None, "")
        self._menu_left = [entry for i, entry in enumerate(actions, 1) if i != choice]
        return DiagnosisResult(proposal, prompt, reply.text, error or "; ".join(proposal.rejected), cost)

    def _ask(self, fit: Callable[[], FittedPrompt]) -> tuple[FittedPrompt | None, Any, LLMReply | None, str, Usage]:
        """(the prompt last fitted, parsed reply, the reply, why it failed, what it cost): sized to
        the window and, after a rejection that named it, re-sized and sent once more
        (llm/budget.py); a failed call has no reply; a garbled one keeps its text and cost."""
        fitted: list[FittedPrompt] = []

        def remembered() -> FittedPrompt:
            fitted.append(fit())
            return fitted[-1]

        try:
            last, parsed, reply = ask_fitted(self.client, remembered, role="diagnose", json_reply=True)
        except LLMJSONError as exc:
            billed = dataclasses.replace(exc.reply, text=exc.raw_text or "")
            return fitted[-1], None, billed, f"unparseable reply: {str(exc)[:200]}", billed.as_cost()
        except LLMCallFailed as exc:
            return (fitted[-1] if fitted else None), None, None, f"diagnosis call failed: {str(exc)[:300]}", exc.cost
        return last, parsed, reply, "", reply.as_cost()

    def observe(self, config: RetrievalConfig, score: float) -> None:
        return None


def create(seed: int, client: LLMClient | None, mode: str = "free") -> LLMDiagnoser:
    if client is None:
        raise EvolveMemError("--diagnoser llm needs a model: pass --model or --diagnosis-model")
    return LLMDiagnoser(client, mode)
