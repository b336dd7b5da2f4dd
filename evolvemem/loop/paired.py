"""Paired decisions: is a candidate round better than the incumbent on the *same* dev questions?

Both rounds answered every dev question, so each question gives one difference (candidate F1 −
incumbent F1). Per group of questions (answerable = "main", unanswerable = "adversarial" as
`qtypes.is_adversarial` says, and "all") we report the mean difference, a 95% interval from a two-stage bootstrap (whole
conversations resampled, then questions within them: one conversation cannot carry it), and one-sided p-values from a sign-flip
permutation test over questions (under "no difference" each difference is as likely to have
the other sign). A change becomes the new best only when it passes `accept`:

- `balanced` (default): some group gains (mean ≥ min effect, p < alpha) and no group loses
  (mean below −max loss — at least one question's worth — or significantly below zero):
  trading answered questions for abstentions is not a gain;
- `all` / `main`: that group gains;
- and in every case a majority of dev conversations are not hurt beyond the tolerance (with
  `folds`, every fold of conversations).
Every figure is recorded with the decision so a reader can judge it."""

from __future__ import annotations

import json
from typing import Any, Sequence

from dataclasses import asdict, dataclass, field

import numpy as np

from evolvemem.contracts.records import QuestionRecord
from evolvemem.contracts.vocab import Objective
from evolvemem.loop.spec import GuardSettings, objective_group, objective_metric
from evolvemem.qtypes import is_adversarial

GROUPS = ("main", "adversarial", "all")
RESAMPLES = 4000


@dataclass(frozen=True)
class PairedStat:
    """One group's paired comparison (candidate − incumbent)."""

    n: int
    candidate: float
    incumbent: float
    diff: float
    ci_low: float
    ci_high: float
    p_gain: float  # one-sided: the candidate is better
    p_loss: float  # one-sided: the candidate is worse


def named_p(stat: PairedStat, digits: int = 3) -> str:
    """The one-sided p of the direction the difference points, with its side named as `evolve diff`
    names its columns: `p(better) 0.012` or `p(worse) 0.429` (a bare p reads as either)."""
    if stat.p_gain <= stat.p_loss:
        return f"p(better) {stat.p_gain:.{digits}f}"
    return f"p(worse) {stat.p_loss:.{digits}f}"


@dataclass(frozen=True)
class Comparison:
    candidate_round: int
    incumbent_round: int
    groups: dict[str, PairedStat]
    by_conversation: dict[str, float]  # objective difference per dev conversation
    by_fold: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: object) -> Comparison | None:
        """A stored `paired` column (`as_dict()`, or its JSON text) back as a `Comparison`; None for
        the start round, for stores written before paired decisions, and for a value this version
        cannot read."""
        if isinstance(raw, str):
            raw = json.loads(raw)
        if not isinstance(raw, dict):
            return None
        try:
            names = PairedStat.__dataclass_fields__
            groups = {
                name: PairedStat(**{k: stat[k] for k in names})
                for name, stat in (raw.get("groups") or {}).items()
                if name in GROUPS
            }
            return cls(
                int(raw["candidate_round"]),
                int(raw["incumbent_round"]),
                groups,
                {str(k): float(v) for k, v in (raw.get("by_conversation") or {}).items()},
                [float(x) for x in raw.get("by_fold") or []],
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Verdict:
    accepted: bool  # the candidate becomes the incumbent
    significant_loss: bool  # the candidate is worse than the incumbent (revert)
    reason: str


def _stat(
    diffs: np.ndarray, cand: np.ndarray, inc: np.ndarray, convs: np.ndarray, rng: np.random.Generator
) -> PairedStat:
    n = len(diffs)
    if n == 0:
        return PairedStat(0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0)
    observed = float(diffs.mean())
    signs = rng.choice(np.array([-1.0, 1.0]), size=(RESAMPLES, n))
    null = (signs * diffs).mean(axis=1)
    p_gain = float((1 + np.count_nonzero(null >= observed - 1e-12)) / (RESAMPLES + 1))
    p_loss = float((1 + np.count_nonzero(null <= observed + 1e-12)) / (RESAMPLES + 1))
    # two-stage bootstrap: resample whole conversations, then questions within each one
    names = sorted(set(convs.tolist()))
    half = RESAMPLES // 2
    within = np.stack(
        [
            diffs[convs == name][
                rng.integers(0, int((convs == name).sum()), size=(half, int((convs == name).sum())))
            ].sum(axis=1)
            for name in names
        ],
        axis=1,
    )  # (resample, conversation) -> resampled sum
    counts = np.array([(convs == name).sum() for name in names], dtype=float)
    picks = rng.integers(0, len(names), size=(half, len(names)))
    boot = np.take_along_axis(within, picks, axis=1).sum(axis=1) / counts[picks].sum(axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    return PairedStat(n, float(cand.mean()), float(inc.mean()), observed, float(low), float(high), p_gain, p_loss)


@dataclass(frozen=True)
class PairedDifferences:
    """Two rounds' records paired by question (sorted by question id): each side's value and
    the question's conversation and group. The one pairing rule of `compare` and of the
    sequential evaluation's futility bound (loop/sequential.py)."""

    candidate: np.ndarray
    incumbent: np.ndarray
    conversations: np.ndarray
    adversarial: np.ndarray

    @property
    def diffs(self) -> np.ndarray:
        return np.asarray(self.candidate - self.incumbent, dtype=float)

    def mask(self, group: str) -> np.ndarray:
        """Which pairs are in `group` (one of GROUPS)."""
        if group == "main":
            return ~self.adversarial
        if group == "adversarial":
            return self.adversarial
        return np.ones(len(self.candidate), dtype=bool)


def paired_differences(
    candidate: Sequence[QuestionRecord], incumbent: Sequence[QuestionRecord], metric: str
) -> PairedDifferences:
    """Pair two rounds' records by question on `metric` (records without a value or failed on
    either side are left out)."""

    def paired(record: QuestionRecord) -> bool:
        return not record.failed and getattr(record, metric) is not None

    inc_by_id = {r.question_id: r for r in incumbent if paired(r)}
    pairs = [(r, inc_by_id[r.question_id]) for r in candidate if paired(r) and r.question_id in inc_by_id]
    pairs.sort(key=lambda p: p[0].question_id)
    return PairedDifferences(
        np.array([getattr(c, metric) for c, _ in pairs], dtype=float),
        np.array([getattr(i, metric) for _, i in pairs], dtype=float),
        np.array([c.conversation_id for c, _ in pairs], dtype=object),
        np.array([is_adversarial(c.question_type) for c, _ in pairs], dtype=bool),
    )


def compare(
    candidate: Sequence[QuestionRecord],
    incumbent: Sequence[QuestionRecord],
    candidate_round: int,
    incumbent_round: int,
    objective: str,
    folds: int = 0,
    seed: int = 0,
    metric: str | None = None,
) -> Comparison:
    """Pair two rounds' records by question on `metric` (by default the objective's: F1, or the
    context's evidence recall; records without a value or failed on either side are left out)."""
    pairs = paired_differences(candidate, incumbent, metric or objective_metric(objective))
    cand, inc, convs, diffs = pairs.candidate, pairs.incumbent, pairs.conversations, pairs.diffs
    rng = np.random.default_rng(seed)
    masks = {g: pairs.mask(g) for g in GROUPS}
    groups = {g: _stat(diffs[m], cand[m], inc[m], convs[m], rng) for g, m in masks.items()}
    objective_mask = masks[objective_group(objective)]
    by_conversation = {
        str(c): float(diffs[objective_mask & (convs == c)].mean()) for c in sorted(set(convs[objective_mask].tolist()))
    }
    by_fold: list[float] = []
    if folds > 1:
        names = list(by_conversation)
        for k in range(folds):
            members = set(names[k::folds])
            mask = objective_mask & np.array([c in members for c in convs], dtype=bool)
            if mask.any():
                by_fold.append(float(diffs[mask].mean()))
    return Comparison(candidate_round, incumbent_round, groups, by_conversation, by_fold)


def judged_groups(objective: str) -> tuple[str, ...]:
    """The groups a decision judges: both for `balanced`, else the objective's own."""
    return ("main", "adversarial") if objective == Objective.BALANCED else (objective_group(objective),)


def gains(stat: PairedStat, settings: GuardSettings, alpha: float | None = None) -> bool:
    """A gain of at least `min_effect` with a one-sided p below `alpha` (the guard's own unless a
    caller, such as a minibatch screening, tests at another level)."""
    return (
        stat.n > 0 and stat.diff >= settings.min_effect and stat.p_gain < (settings.alpha if alpha is None else alpha)
    )


def loses(stat: PairedStat, settings: GuardSettings) -> bool:
    """Significantly worse, or worse by more than `max_loss` of mean F1 — or one question's worth
    in a small group, where a single flipped answer already moves the mean by 1/n."""
    tolerance = max(settings.max_loss, 1.0 / stat.n) if stat.n else settings.max_loss
    return stat.n > 0 and (stat.diff < -tolerance or (stat.diff < 0 and stat.p_loss < settings.alpha))


def accept(comparison: Comparison, objective: str, settings: GuardSettings) -> Verdict:
    """Whether the candidate becomes the new best, and whether it is a loss worth reverting."""
    g = comparison.groups
    judged = judged_groups(objective)
    gaining = [name for name in judged if gains(g[name], settings)]
    losses = [name for name in judged if loses(g[name], settings)]
    convs = comparison.by_conversation
    held = sum(1 for d in convs.values() if d >= -settings.consistency_tolerance)
    consistent = held * 2 > len(convs) if convs else True
    folds_hold = all(d >= -settings.consistency_tolerance for d in comparison.by_fold)
    objective_stat = g[objective_group(objective)]
    significant_loss = bool(losses) or objective_stat.diff < -settings.revert_threshold

    def describe(name: str) -> str:
        s = g[name]
        return f"{name} {s.diff:+.4f} [{s.ci_low:+.4f}, {s.ci_high:+.4f}] {named_p(s)}"

    detail = "; ".join(describe(name) for name in ("main", "adversarial", "all") if g[name].n)
    if gaining and not losses and consistent and folds_hold:
        return Verdict(
            True,
            False,
            f"significant gain on {', '.join(gaining)} vs round {comparison.incumbent_round} "
            f"({detail}; {held}/{len(convs)} conversations hold)",
        )
    why = []
    if losses:
        why.append(f"loses on {', '.join(losses)}")
    if not gaining:
        why.append("no significant gain")
    if not consistent:
        why.append(f"only {held}/{len(convs)} conversations hold")
    if not folds_hold:
        why.append("a fold loses")
    return Verdict(
        False, significant_loss, f"not better than round {comparison.incumbent_round}: {', '.join(why)} ({detail})"
    )


# A judged group needs this many dev questions before the guard can accept a gain of
# DETECTABLE_TARGET even in the best case (docs/guides/custom-data.md#how-much-data).
DETECTABLE_TARGET = 0.05


def smallest_detectable_gain(n: int, alpha: float, min_effect: float = 0.0) -> float:
    """The smallest mean gain the guard's sign-flip test can call significant on `n` paired questions,
    in the best case: k questions gain a whole point and every other one is unchanged, so the one-sided
    p-value is 2^-k, and k must bring it below `alpha`. A real change (partial gains, some losses) needs
    more; `inf` when no gain on `n` questions can pass."""
    k = _questions_to_significance(alpha)
    return max(min_effect, k / n) if 0 < k <= n else float("inf")


def questions_needed(alpha: float, target: float = DETECTABLE_TARGET) -> int:
    """Questions a judged group needs so that `target` is a detectable gain (in the best case)."""
    return int(np.ceil(_questions_to_significance(alpha) / target))


def _questions_to_significance(alpha: float) -> int:
    """Fewest questions that, all gaining and none losing, give a sign-flip p below `alpha`."""
    k = 1
    while 2.0**-k >= alpha:
        k += 1
    return k
