"""What each round's evaluations cost, against what a full evaluation would have cost.

Everything is counted from the run store's own rows — question records (with where a reused
answer came from) and the usage ledger — never from counters kept in memory, so an interrupted
and resumed run reports what it paid for, once. A round's evaluations are its dev evaluation and
its minibatch screenings. "Full evaluation" is what the loop did before screening and context
reuse: every dev question answered once per round, priced at the round's own configs — calls a
freshly answered question took, counting those the LLM cache answered (a verifying or decomposing
config costs several a question, a plain one one; a run-wide average would misprice both) — and their
tokens at the round's tokens per call. A round that answered nothing takes the run's rate."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from evolvemem.contracts.vocab import SCREEN_PREFIX, Phase
from evolvemem.store.run_store import RunStore

EVAL_PHASES = f"(phase = '{Phase.DEV}' OR phase LIKE '{SCREEN_PREFIX}%')"
FRESH = "reused IS NULL AND NOT failed"  # answered by this evaluation, not copied from another


@dataclass(frozen=True)
class EvaluationCost:
    """What evaluations cost (a round's, or the run's summed: `total_cost`) against full evaluation."""

    questions: int  # records of the round's evaluations (dev and screenings)
    scored: int  # answered here (not reused, not failed)
    reused_context: int  # answers reused because the question's context was answered before
    reused_config: int  # records copied from an identical effective config
    screened: int  # minibatch questions of the round's screenings
    screenings: int
    screened_out: int
    calls: int  # LLM calls of the round's evaluations (cache hits are not calls)
    cache_hits: int  # calls answered from the LLM cache
    tokens: int
    full_questions: int  # dev questions a full evaluation answers
    full_calls: float  # its calls at the run's calls per answered question
    full_tokens: float

    @property
    def question_ratio(self) -> float | None:
        return self.scored / self.full_questions if self.full_questions else None

    @property
    def call_ratio(self) -> float | None:
        return self.calls / self.full_calls if self.full_calls else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "question_ratio": self.question_ratio, "call_ratio": self.call_ratio}


@dataclass(frozen=True)
class RoundCost(EvaluationCost):
    round: int


def vs_full_text(cost: EvaluationCost | None) -> str:
    """ "0.31× (250/800 q, 3 reused by context)": calls against a full evaluation's when the run
    makes calls, answered questions otherwise."""
    if cost is None:
        return "-"
    ratio = cost.call_ratio if cost.call_ratio is not None else cost.question_ratio
    if ratio is None:
        return "-"
    text = f"{ratio:.2f}× ({cost.scored}/{cost.full_questions} q"
    if cost.reused_context:
        text += f", {cost.reused_context} context-reused"
    if cost.screened_out:
        text += f", {cost.screened_out} screened out"
    return text + ")"


def round_costs(store: RunStore) -> list[RoundCost]:
    """One `RoundCost` per round that evaluated something, in round order."""
    records = {
        r["round"]: r
        for r in store.query(f"""
        SELECT round, count(*) AS questions,
               count(*) FILTER (WHERE {FRESH}) AS scored,
               count(*) FILTER (WHERE reused = 'context') AS reused_context,
               count(*) FILTER (WHERE reused = 'config') AS reused_config,
               count(*) FILTER (WHERE phase LIKE 'screen%') AS screened,
               coalesce(sum(coalesce(calls, 0) + coalesce(cache_hits, 0)) FILTER (WHERE {FRESH}), 0) AS priced_calls,
               coalesce(sum(calls) FILTER (WHERE {FRESH}), 0) AS fresh_calls,
               coalesce(sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)) FILTER (WHERE {FRESH}), 0)
                   AS fresh_tokens
        FROM question_records WHERE {EVAL_PHASES} GROUP BY round""")
    }
    usage = {
        r["round"]: r
        for r in store.query(f"""
        SELECT round, coalesce(sum(calls), 0) AS calls, coalesce(sum(cache_hits), 0) AS cache_hits,
               coalesce(sum(prompt_tokens), 0) + coalesce(sum(completion_tokens), 0) AS tokens
        FROM usage WHERE {EVAL_PHASES} GROUP BY round""")
    }
    screens = {
        r["round"]: r
        for r in store.query("""
        SELECT round, count(*) AS screenings, count(*) FILTER (WHERE outcome = 'screened_out') AS screened_out
        FROM screenings GROUP BY round""")
    }
    n_dev = int(
        store.query("SELECT count(DISTINCT question_id) AS n FROM question_records WHERE phase = ?", [Phase.DEV])[0][
            "n"
        ]
        or 0
    )
    run_rate = _price([*records.values()])
    out = []
    for round_no in sorted(records):
        r, u, s = records[round_no], usage.get(round_no, {}), screens.get(round_no, {})
        calls_per_question, tokens_per_call = _price([r]) if r["scored"] else run_rate
        tokens_per_call = tokens_per_call or run_rate[1]  # every call came from the cache: the run's tokens
        out.append(
            RoundCost(
                round=round_no,
                questions=int(r["questions"]),
                scored=int(r["scored"]),
                reused_context=int(r["reused_context"]),
                reused_config=int(r["reused_config"]),
                screened=int(r["screened"]),
                screenings=int(s.get("screenings") or 0),
                screened_out=int(s.get("screened_out") or 0),
                calls=int(u.get("calls") or 0),
                cache_hits=int(u.get("cache_hits") or 0),
                tokens=int(u.get("tokens") or 0),
                full_questions=n_dev,
                full_calls=n_dev * calls_per_question,
                full_tokens=n_dev * calls_per_question * tokens_per_call,
            )
        )
    return out


def _price(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """Calls a freshly answered question takes (cache hits included: the call a full evaluation
    without the cache would make) and tokens per call actually made, over `rows`' sums."""
    answered = sum(int(r["scored"]) for r in rows)
    priced = sum(int(r["priced_calls"]) for r in rows)
    calls = sum(int(r["fresh_calls"]) for r in rows)
    tokens = sum(int(r["fresh_tokens"]) for r in rows)
    return (priced / answered if answered else 0.0), (tokens / calls if calls else 0.0)


def total_cost(costs: list[RoundCost]) -> EvaluationCost:
    """The run's rounds summed, with the same ratios."""
    return EvaluationCost(**{f.name: sum(getattr(c, f.name) for c in costs) for f in fields(EvaluationCost)})
