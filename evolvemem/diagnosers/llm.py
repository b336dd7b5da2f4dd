"""`llm`: a model reads the SQL summaries and proposes a change (prompt: prompts/diagnose.md).

The reply is parsed as JSON with repair, and every value is validated against the registry; a
garbled reply yields an empty proposal and a logged reason, never a crash."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from evolvemem.contracts.diagnosis import (
    DiagnosisInput,
    DiagnosisResult,
    Proposal,
    proposal_from_raw,
)
from evolvemem.errors import EvolveMemError
from evolvemem.llm.client import LLMCallFailed, LLMJSONError
from evolvemem.prompts import load_prompt
from evolvemem.qtypes import LABEL_ONLY_TYPES as NO_OVERRIDE_TYPES
from evolvemem.qtypes import QUESTION_TYPES
from evolvemem.space.ops import action_space_text

if TYPE_CHECKING:
    from evolvemem.llm.client import LLMClient


def _compact(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def render_diagnosis_prompt(inp: DiagnosisInput) -> str:
    worst = "\n".join(
        f"- [{c['question_type']}] Q: {c['question']} | gold: {c['gold']} | predicted: {c['prediction']} "
        f"| f1 {c['f1']} | {c['failure']} | context: {', '.join(c['context_views'] or [])}"
        for c in inp.worst_cases) or "(none)"
    history = "\n".join(
        f"- round {h['round']}: {h['decision']} ({h['reason']}); score {h['score']}; changes "
        f"{_compact(h['changes'])}; next round moved the score by {h['outcome_delta']}"
        for h in inp.history) or "(first round)"
    return load_prompt("diagnose").render(
        action_space=action_space_text(), question_types=", ".join(QUESTION_TYPES), round=inp.round,
        config=_compact(inp.config), overrides=_compact(inp.overrides), objective=inp.objective,
        score=f"{inp.score:.4f}", overall=_compact(inp.overall),
        by_type="\n".join(_compact(r) for r in inp.by_type), taxonomy=_compact(inp.taxonomy),
        taxonomy_by_type=_compact(inp.taxonomy_by_type), worst_cases=worst, history=history,
    )


class LLMDiagnoser:
    name = "llm"

    def __init__(self, client: Any):
        self.client = client

    def diagnose(self, inp: DiagnosisInput, config: Any) -> DiagnosisResult:
        prompt = render_diagnosis_prompt(inp)
        messages = [{"role": "user", "content": prompt}]
        try:
            parsed, reply = self.client.complete_json(messages, role="diagnose", max_tokens=1200)
        except LLMJSONError as exc:
            return DiagnosisResult(Proposal(), prompt, exc.raw_text or "", f"unparseable reply: {str(exc)[:200]}",
                                   exc.reply.as_cost())
        except LLMCallFailed as exc:
            return DiagnosisResult(Proposal(), prompt, "", f"diagnosis call failed: {str(exc)[:200]}")
        proposal = proposal_from_raw(parsed)
        for qtype in NO_OVERRIDE_TYPES:
            if proposal.overrides.pop(qtype, None) is not None:
                proposal.rejected.append(f"overrides for {qtype} are not allowed (they would use the label)")
        error = "; ".join(proposal.rejected)
        return DiagnosisResult(proposal, prompt, reply.text, error, reply.as_cost())

    def observe(self, config: Any, score: float) -> None:
        return None


def create(seed: int, client: LLMClient | None) -> LLMDiagnoser:
    if client is None:
        raise EvolveMemError("--diagnoser llm needs a model: pass --model or --diagnosis-model")
    return LLMDiagnoser(client)
