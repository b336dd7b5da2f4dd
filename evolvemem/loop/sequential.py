"""Sequential dev evaluation of a screened candidate: stop early only when it clearly cannot win.

A candidate that passed its minibatch screening is evaluated on dev in looks at fixed shares of
the dev questions (`LOOK_SHARES`), the questions ordered once per run: the minibatch first (its
answers are reused, no call), then a seeded, stratified share of every (question type,
conversation) cell. After every look but the last the candidate is paired with the incumbent on
the questions asked so far; when no judged group's one-sided upper bound (`FUTILITY_LEVEL`, a
normal approximation over question-level differences) reaches the guard's minimum effect, the
round stops there.

Futility stopping only. A stop is never an acceptance: the guard's accept test runs unchanged,
and only a candidate that reached every dev question can pass it, so stopping for futility
cannot raise the false-acceptance rate and no alpha has to be spent across looks. A candidate
that looks better is not stopped early either: an accepted round becomes the incumbent every
later round is paired against, so it is measured on all of dev. The price of the normal bound on
questions (not conversations) is that a stop is a little eager when one conversation carries the
difference; the cost of a wrong stop is one round that is not built on, never a wrong acceptance."""

from __future__ import annotations

import math
import random
from collections import defaultdict
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np

from evolvemem.contracts.records import QuestionRecord
from evolvemem.data.models import Question
from evolvemem.loop.paired import judged_groups, paired_differences
from evolvemem.loop.spec import objective_metric

LOOK_SHARES = (0.5, 0.75, 1.0)  # the cumulative shares of dev at which a candidate is looked at
FUTILITY_LEVEL = 0.90  # one-sided level of the upper bound a futility stop reads


def looks(dev: Sequence[Question], first: Sequence[Question], seed: int) -> list[list[Question]]:
    """The questions asked by each look (cumulative, in dev's order): in every (question type,
    conversation) cell the questions of `first` (the screening minibatch) lead, the others follow
    in a seeded order; look k takes the first share of each cell, at least `first`'s."""
    leading = {q.question_id for q in first}
    cells: dict[tuple[str, str], list[Question]] = defaultdict(list)
    for question in dev:
        cells[(question.question_type or "", question.conversation_id)].append(question)
    ordered: dict[tuple[str, str], list[str]] = {}
    for cell, members in cells.items():
        ids = sorted(q.question_id for q in members)
        rest = [qid for qid in ids if qid not in leading]
        random.Random(f"looks-{seed}-{cell[0]}-{cell[1]}").shuffle(rest)
        ordered[cell] = [qid for qid in ids if qid in leading] + rest
    out = []
    for share in LOOK_SHARES:
        chosen: set[str] = set()
        for cell, ids in ordered.items():
            led = sum(1 for qid in ids if qid in leading)
            chosen.update(ids[: max(1, led, math.ceil(share * len(ids) - 1e-9))])
        out.append([q for q in dev if q.question_id in chosen])
    return out


@dataclass(frozen=True)
class GroupBound:
    """One judged group's paired difference on the questions asked so far, and its upper bound."""

    group: str
    n: int
    diff: float
    upper: float


def upper_bound(diffs: np.ndarray, level: float = FUTILITY_LEVEL) -> float:
    """The one-sided `level` upper bound of the mean of `diffs` (normal approximation; +inf below
    two questions, where nothing can be concluded)."""
    if len(diffs) < 2:
        return math.inf
    spread = float(np.std(diffs, ddof=1)) / math.sqrt(len(diffs))
    return float(diffs.mean()) + NormalDist().inv_cdf(level) * spread


def futility(
    candidate: Sequence[QuestionRecord],
    incumbent: Sequence[QuestionRecord],
    objective: str,
    min_effect: float,
) -> tuple[bool, list[GroupBound]]:
    """Whether no judged group of `objective` can still gain `min_effect` (every group's upper
    bound below it), with each group's figures."""
    pairs = paired_differences(candidate, incumbent, objective_metric(objective))
    bounds = []
    for group in judged_groups(objective):
        diffs = pairs.diffs[pairs.mask(group)]
        if len(diffs):
            bounds.append(GroupBound(group, len(diffs), float(diffs.mean()), upper_bound(diffs)))
    return bool(bounds) and all(b.upper < min_effect for b in bounds), bounds


def stop_text(look: str, asked: int, total: str, bounds: list[GroupBound], min_effect: float) -> str:
    """What a futility stop records (`rounds.stopped_at`, a screening's reason): where it stopped
    ("look 1 (400 of 800 dev questions)"), and each group's figures."""
    detail = "; ".join(f"{b.group} {b.diff:+.4f} n={b.n}, upper bound {b.upper:+.4f}" for b in bounds)
    return f"futility at {look} ({asked} of {total}): {detail} < min effect {min_effect:g} ({FUTILITY_LEVEL:.0%} one-sided)"
