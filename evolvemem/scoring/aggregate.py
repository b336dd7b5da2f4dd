"""Summaries of per-question scores: per category, per question type, and three headline groups.

Definitions (the run store's SQL summaries must match these):

- A row is one `QuestionRecord`: its `category`, `question_type`, `failed` and metric values
  `f1`, `bleu1`, `exact_match`, `mc_accuracy`, `evidence_recall`, `context_tokens` (None when not
  measured).
- A **failed** question (no answer could be produced, e.g. every LLM call failed) is left out of
  every mean and counted in `n_failed`, so an outage is not mistaken for a worse config.
  `n` counts the scored (non-failed) questions; a group holds `n + n_failed` questions.
- A metric's mean is over the group's scored questions that have a value for it; a metric no
  such question has is None. `evidence_recall` is None for questions without gold evidence, so
  its mean covers `n_evidence` questions.
- Headline groups are micro averages (every question weighs the same): `adversarial` = the
  questions `qtypes.is_adversarial` names (for LoCoMo category 5), `main` = the others (for
  LoCoMo the 1–4 average most papers quote), `all` = everything. `main_macro_f1` is the
  unweighted mean of the main categories' F1 means, reported separately.

The result is an `EvaluationScores`, whose headline fields are spelled as the `rounds` table's
columns (`main_f1`, `all_f1`, `n_questions`, ...): the store writes them as they are and reads them
back as a `RoundSummary` (store/rows.py) with the same names."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterable, Mapping

from evolvemem.contracts.records import QuestionRecord
from evolvemem.qtypes import is_adversarial

METRICS: tuple[str, ...] = ("f1", "bleu1", "exact_match", "mc_accuracy", "evidence_recall", "context_tokens")

Figure = float | int | str | None  # one value of a group as JSON holds it


@dataclass(frozen=True)
class GroupScores:
    """Counts and metric means of one group of questions (a category, a type, a headline group)."""

    n: int
    n_failed: int
    f1: float | None
    bleu1: float | None
    exact_match: float | None
    mc_accuracy: float | None
    evidence_recall: float | None
    n_evidence: int
    context_tokens: float | None
    name: str | None = None  # a category's display name (categories only)

    def as_dict(self) -> dict[str, Figure]:
        """The group as the `rounds.by_category` column and JSON output hold it."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.name is None:
            del out["name"]
        return out


@dataclass(frozen=True)
class EvaluationScores:
    """What `summarise` makes of one evaluation's records (definitions in the module docstring)."""

    n_questions: int  # scored (not failed) questions
    n_failed: int
    main_f1: float | None
    adversarial_f1: float | None
    all_f1: float | None
    evidence_recall: float | None
    main_evidence_recall: float | None  # the `evidence` objective: recall over the answerable questions
    context_tokens: float | None
    by_category: dict[str, GroupScores]
    n_main: int
    n_adversarial: int
    bleu1: float | None
    exact_match: float | None
    mc_accuracy: float | None
    n_evidence: int
    main_macro_f1: float | None
    groups: dict[str, GroupScores]  # "main", "adversarial", "all"
    by_question_type: dict[str, GroupScores]
    adversarial_categories: tuple[str, ...]  # the categories of the adversarial questions

    def by_category_json(self) -> dict[str, dict[str, Figure]]:
        """The per-category groups as the `rounds.by_category` column holds them."""
        return {key: group.as_dict() for key, group in self.by_category.items()}

    def as_json(self) -> dict[str, object]:
        """The `evolve eval --json` summary (its "overall" block is this without `by_category`): a
        public format, spelled as it always was (`main`, `all`, `n`)."""
        return {
            "main": self.main_f1,
            "adversarial": self.adversarial_f1,
            "all": self.all_f1,
            "n": self.n_questions,
            "n_failed": self.n_failed,
            "n_main": self.n_main,
            "n_adversarial": self.n_adversarial,
            "bleu1": self.bleu1,
            "exact_match": self.exact_match,
            "mc_accuracy": self.mc_accuracy,
            "evidence_recall": self.evidence_recall,
            "context_tokens": self.context_tokens,
            "n_evidence": self.n_evidence,
            "main_evidence_recall": self.main_evidence_recall,
            "main_macro_f1": self.main_macro_f1,
            "groups": {name: group.as_dict() for name, group in self.groups.items()},
            "by_category": self.by_category_json(),
            "by_question_type": {name: group.as_dict() for name, group in self.by_question_type.items()},
            "adversarial_categories": list(self.adversarial_categories),
        }


def group_scores(rows: list[QuestionRecord], name: str | None = None) -> GroupScores:
    """Counts and metric means of one group of rows (definitions in the module docstring)."""
    scored = [row for row in rows if not row.failed]
    means: dict[str, float | None] = {}
    n_evidence = 0
    for metric in METRICS:
        values = [float(v) for row in scored if (v := getattr(row, metric)) is not None]
        means[metric] = sum(values) / len(values) if values else None
        if metric == "evidence_recall":
            n_evidence = len(values)
    return GroupScores(n=len(scored), n_failed=len(rows) - len(scored), n_evidence=n_evidence, name=name, **means)


def _natural_key(label: str) -> tuple[int, int | str]:
    """Numeric ids in number order ("2" before "10"), then names alphabetically."""
    return (0, int(label)) if label.isdigit() else (1, label)


def _label(value: str | None) -> str:
    return "unknown" if value is None or value == "" else str(value)


def _grouped_by(rows: list[QuestionRecord], key: str) -> dict[str, list[QuestionRecord]]:
    groups: dict[str, list[QuestionRecord]] = {}
    for row in rows:
        groups.setdefault(_label(getattr(row, key)), []).append(row)
    return {label: groups[label] for label in sorted(groups, key=_natural_key)}


def summarise(rows: Iterable[QuestionRecord], category_names: Mapping[str, str] | None = None) -> EvaluationScores:
    """Summarise one evaluation's records (the module docstring says how)."""
    rows = list(rows)
    names = dict(category_names or {})
    by_category = {
        label: group_scores(members, names.get(label, "")) for label, members in _grouped_by(rows, "category").items()
    }
    adversarial = [row for row in rows if is_adversarial(row.question_type)]
    main = [row for row in rows if not is_adversarial(row.question_type)]
    main_labels = {_label(row.category) for row in main}
    main_f1s = [g.f1 for label, g in by_category.items() if label in main_labels and g.f1 is not None]
    groups = {"main": group_scores(main), "adversarial": group_scores(adversarial), "all": group_scores(rows)}
    overall = groups["all"]
    return EvaluationScores(
        n_questions=overall.n,
        n_failed=overall.n_failed,
        main_f1=groups["main"].f1,
        adversarial_f1=groups["adversarial"].f1,
        all_f1=overall.f1,
        evidence_recall=overall.evidence_recall,
        main_evidence_recall=groups["main"].evidence_recall,
        context_tokens=overall.context_tokens,
        by_category=by_category,
        n_main=groups["main"].n,
        n_adversarial=groups["adversarial"].n,
        bleu1=overall.bleu1,
        exact_match=overall.exact_match,
        mc_accuracy=overall.mc_accuracy,
        n_evidence=overall.n_evidence,
        main_macro_f1=sum(main_f1s) / len(main_f1s) if main_f1s else None,
        groups=groups,
        by_question_type={
            label: group_scores(members) for label, members in _grouped_by(rows, "question_type").items()
        },
        adversarial_categories=tuple(sorted({_label(row.category) for row in adversarial}, key=_natural_key)),
    )
