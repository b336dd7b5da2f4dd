"""Ablation: re-score a config with each enabled mechanism switched off in turn.

A mechanism is a dimension whose definition says which value switches it off
(`mechanism = { off = ... }` in action_space/). Switching it off applies globally and inside
every per-type override; each per-type override is also dropped as a whole, in turn. With a
`measure` (loop/retrieval_cost.py) each variant's retrieval is timed beside BM25 alone too, and a
row says how many ms a question its mechanism costs: the full config's ms minus the variant's, both
read at the two timings' shared BM25 scale."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from evolvemem.data.models import Question
from evolvemem.loop.parsimony import settings_on
from evolvemem.loop.pruning import without_lever
from evolvemem.loop.scorer import RoundJob, RoundScorer
from evolvemem.retrieval.latency import RetrievalCost
from evolvemem.space.config import OVERRIDES, RetrievalConfig, parse_config


@dataclass(frozen=True)
class Variant:
    label: str
    config: RetrievalConfig
    what: str


def ablation_variants(config: RetrievalConfig) -> list[Variant]:
    """One variant per enabled mechanism and per per-type override."""
    variants = []
    data = {**config.values(), OVERRIDES: config.overrides()}  # values(): levers added at run time too
    space = config.space
    mechanisms_on = settings_on(config, lambda dim: dim.mechanism_off is not None)  # globally or in an override
    for name, dim in space.items():
        if name in mechanisms_on:
            variants.append(Variant(name, without_lever(config, name), f"{name} = {dim.mechanism_off!r} everywhere"))
    for qtype in data[OVERRIDES]:
        changed = {**data, OVERRIDES: {t: o for t, o in data[OVERRIDES].items() if t != qtype}}
        variants.append(
            Variant(
                f"overrides[{qtype}]",
                parse_config(changed, source="ablation", space=space)[0].with_budget(config.budget),
                f"drop the per-type override for {qtype}",
            )
        )
    return variants


def run_ablation(
    scorer: RoundScorer,
    config: RetrievalConfig,
    questions: list[Question],
    round_no: int,
    on_variant: Callable[[dict[str, Any]], None] | None = None,
    *,
    contexts_only: bool = False,
    measure: Callable[[RetrievalConfig], RetrievalCost | None] | None = None,
) -> list[dict[str, Any]]:
    """Score `config` and every variant on `questions` the way the run measured its rounds (for an
    `evidence` run: the answer contexts alone), every context cut at the token budget `config`
    carries (the variants keep it); rows carry the deltas against the full config."""
    rows = []
    base = None
    full_cost: RetrievalCost | None = None
    for variant in [Variant("full config", config, "the config as evolved"), *ablation_variants(config)]:
        phase = "ablate" if base is None else f"ablate:{variant.label}"
        s = scorer.score_round(RoundJob(variant.config, questions, round_no, phase, contexts_only=contexts_only))
        row: dict[str, Any] = {
            "mechanism": variant.label,
            "what": variant.what,
            "all_f1": s.all_f1,
            "main_f1": s.main_f1,
            "adversarial_f1": s.adversarial_f1,
            "evidence_recall": s.evidence_recall,
            "main_evidence_recall": s.main_evidence_recall,
            "by_category": {k: v["f1"] for k, v in (s.by_category or {}).items()},
            "seconds": s.wall_seconds,
        }
        cost = measure(variant.config) if measure else None
        row["retrieval_ms"] = cost.ms if cost else None
        row["bm25_ms"] = cost.bm25_ms if cost else None
        if base is None:
            base, full_cost = row, cost
        row["lever_ms"] = full_cost.extra_ms(cost) if cost and full_cost and row is not base else None
        for key in ("all_f1", "main_f1", "adversarial_f1", "evidence_recall", "main_evidence_recall"):
            row[f"delta_{key}"] = None if row[key] is None or base[key] is None else row[key] - base[key]
        rows.append(row)
        if on_variant:
            on_variant(row)
    return rows
