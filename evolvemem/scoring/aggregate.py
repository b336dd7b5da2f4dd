"""Summaries of per-question scores: per category, per question type, and three headline groups.

Definitions (the run store's SQL summaries must match these):

- A row is one question: `category`, `question_type` (optional), `failed` (optional, default
  False) and metric values `f1`, `bleu1`, `exact_match`, `mc_accuracy`, `evidence_recall`,
  `context_tokens` (each optional; None when not measured).
- A **failed** question (no answer could be produced, e.g. every LLM call failed) is left out of
  every mean and counted in `n_failed`, so an outage is not mistaken for a worse config.
  `n` counts the scored (non-failed) questions; a group holds `n + n_failed` questions.
- A metric's mean is over the group's scored questions that have a value for it; a metric no
  such question has is None. `evidence_recall` is None for questions without gold evidence, so
  its mean covers `n_evidence` questions.
- Headline groups are micro averages (every question weighs the same):
  `main` = every category not in `adversarial_categories` (for LoCoMo the 1–4 average most
  papers quote), `adversarial` = those categories, `all` = everything.
  `main_macro_f1` is the unweighted mean of the main categories' F1 means, reported separately.

The result is a plain JSON-ready dict (the run store and the CLI read it as such):

    {"main": F1, "adversarial": F1, "all": F1,            # the three headline F1 averages
     "n": scored questions, "n_failed": ..., "n_main": ..., "n_adversarial": ...,
     "bleu1": ..., "exact_match": ..., "mc_accuracy": ..., "evidence_recall": ..., "context_tokens": ...,
     "n_evidence": ..., "main_evidence_recall": ...,
     "main_macro_f1": ...,                                  # all-question means above
     "groups": {"main" | "adversarial" | "all": group},     # every metric of each headline group
     "by_category": {id: group + {"name"}}, "by_question_type": {type: group},
     "adversarial_categories": [...]}

where a group is {"n", "n_failed", "f1", "bleu1", "exact_match", "mc_accuracy",
"evidence_recall", "n_evidence"}.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

METRICS: tuple[str, ...] = ("f1", "bleu1", "exact_match", "mc_accuracy", "evidence_recall", "context_tokens")

Row = Mapping[str, Any]


def group_scores(rows: list[Row]) -> dict[str, Any]:
    """Counts and metric means of one group of rows (definitions in the module docstring)."""
    scored = [row for row in rows if not row.get("failed")]
    group: dict[str, Any] = {"n": len(scored), "n_failed": len(rows) - len(scored)}
    for metric in METRICS:
        values = [float(row[metric]) for row in scored if row.get(metric) is not None]
        group[metric] = sum(values) / len(values) if values else None
        if metric == "evidence_recall":
            group["n_evidence"] = len(values)
    return group


def _natural_key(label: str) -> tuple[int, int | str]:
    """Numeric ids in number order ("2" before "10"), then names alphabetically."""
    return (0, int(label)) if label.isdigit() else (1, label)


def _grouped_by(rows: list[Row], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Row]] = {}
    for row in rows:
        label = row.get(key)
        groups.setdefault("unknown" if label is None or label == "" else str(label), []).append(row)
    return {label: group_scores(groups[label]) for label in sorted(groups, key=_natural_key)}


def summarise(
    rows: Iterable[Row],
    adversarial_categories: Iterable[str] = ("5",),
    category_names: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Summarise per-question score rows into the dict described in the module docstring."""
    rows = list(rows)
    for position, row in enumerate(rows):
        if row.get("category") is None:
            raise ValueError(f"score row {position} has no 'category'")
    adversarial = tuple(str(c) for c in adversarial_categories)
    names = dict(category_names or {})

    by_category = _grouped_by(rows, "category")
    for label, group in by_category.items():
        group["name"] = names.get(label, "")
    main_f1s = [g["f1"] for label, g in by_category.items() if label not in adversarial and g["f1"] is not None]

    groups = {
        "main": group_scores([row for row in rows if str(row["category"]) not in adversarial]),
        "adversarial": group_scores([row for row in rows if str(row["category"]) in adversarial]),
        "all": group_scores(rows),
    }
    overall = groups["all"]
    return {
        "main": groups["main"]["f1"],
        "adversarial": groups["adversarial"]["f1"],
        "all": overall["f1"],
        "n": overall["n"],
        "n_failed": overall["n_failed"],
        "n_main": groups["main"]["n"],
        "n_adversarial": groups["adversarial"]["n"],
        **{metric: overall[metric] for metric in METRICS if metric != "f1"},
        "n_evidence": overall["n_evidence"],
        # the `evidence` objective: recall of the answer context over the answerable questions
        "main_evidence_recall": groups["main"]["evidence_recall"],
        "main_macro_f1": sum(main_f1s) / len(main_f1s) if main_f1s else None,
        "groups": groups,
        "by_category": by_category,
        "by_question_type": _grouped_by(rows, "question_type"),
        "adversarial_categories": list(adversarial),
    }
