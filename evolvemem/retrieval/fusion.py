"""Pure ranking math: top-k per view, fusion of the views, and the final score (paper Eq. 1).

Every function takes and returns numpy arrays; nothing here knows about memories or configs
beyond plain numbers, so the math can be checked by hand (see tests/test_retrieval.py).

Ties are always broken by row order (the earlier memory first), so a ranking is a pure
function of its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from evolvemem.space.action_space import files_space

FUSION_MODES: tuple[str, ...] = files_space().enum("fusion_mode").choices


@dataclass(frozen=True)
class ViewHits:
    """One view's candidates, best first: `rows[i]` scored `scores[i]` and has rank i + 1."""

    label: str
    rows: np.ndarray
    scores: np.ndarray
    weight: float = 1.0

    def __len__(self) -> int:
        return len(self.rows)

    def ranks(self) -> dict[int, int]:
        """Row -> 1-based rank in this view."""
        return {row: rank for rank, row in enumerate(self.rows.tolist(), start=1)}


def rank_order(scores: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Positions that sort `scores` descending, ties by ascending `rows` (default: position)."""
    if rows is None:
        return np.argsort(-scores, kind="stable")
    return np.lexsort((rows, -scores))


def top_k(label: str, scores: np.ndarray, k: int, weight: float = 1.0, positive_only: bool = False) -> ViewHits:
    """The `k` best rows of a full score vector (ties by row). O(n): a partition finds the
    k-th score, then only rows at or above it are sorted. `positive_only` drops rows with no
    match at all (BM25 or entity overlap of 0), which are not candidates."""
    n = len(scores)
    if k <= 0 or n == 0:
        return ViewHits(label, np.zeros(0, np.int64), np.zeros(0, np.float64), weight)
    # a sparse view (BM25, entity overlap, a graph's activation) is mostly zeros: with
    # `positive_only` the partition runs over its matches alone, which selects the same rows
    rows = np.flatnonzero(scores > 0) if positive_only else np.arange(n)
    picked = scores[rows] if positive_only else scores
    if k < len(rows):
        threshold = np.partition(picked, len(rows) - k)[len(rows) - k]
        keep = np.flatnonzero(picked >= threshold)
        rows, picked = rows[keep], picked[keep]
    order = np.argsort(-picked, kind="stable")[:k]  # rows are ascending, so stable = ties by row
    return ViewHits(label, rows[order], picked[order].astype(np.float64), weight)


def min_max(scores: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; a list whose scores are all equal (or a single hit) scores 1."""
    if len(scores) == 0:
        return scores.astype(np.float64)
    low, high = float(scores.min()), float(scores.max())
    if high - low <= 1e-12:
        return np.ones(len(scores), dtype=np.float64)
    return (scores - low) / (high - low)


def fuse(views: Sequence[ViewHits], mode: str, rrf_k: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Merge view lists into (candidate rows ascending, fused score in [0, 1]).

    sum: per-view min-max scores added; weighted_sum: the same times each view's weight;
    rrf: sum of weight / (rrf_k + rank). The result is divided by its maximum so the ranking
    terms added afterwards weigh the same in every mode."""
    if mode not in FUSION_MODES:
        raise ValueError(f"unknown fusion mode {mode!r} (known: {', '.join(FUSION_MODES)})")
    present = [v for v in views if len(v)]
    if not present:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    # accumulated over every row a view can name (a conversation's few hundred memories): cheaper
    # than sorting the union of the lists, and each row's terms are added in the same view order
    size = max(int(v.rows.max()) for v in present) + 1
    total = np.zeros(size, dtype=np.float64)
    named = np.zeros(size, dtype=bool)
    for view in present:
        named[view.rows] = True
        if mode == "rrf":
            total[view.rows] += view.weight / (rrf_k + np.arange(1, len(view) + 1, dtype=np.float64))
        else:
            weight = view.weight if mode == "weighted_sum" else 1.0
            total[view.rows] += weight * min_max(view.scores)
    rows = np.flatnonzero(named)
    fused = total[rows]
    top = fused.max()
    if top > 0:
        fused /= top
    return rows, fused


def merge_max(label: str, lists: Sequence[tuple[np.ndarray, np.ndarray]], weight: float = 1.0) -> ViewHits:
    """One view from several (rows, score) lists (each already cut to its own top-k): every
    row keeps its best score, ranked best first."""
    lists = [(r, s) for r, s in lists if len(r)]
    if not lists:
        return ViewHits(label, np.zeros(0, np.int64), np.zeros(0, np.float64), weight)
    all_rows = np.concatenate([r for r, _ in lists])
    all_scores = np.concatenate([s for _, s in lists])
    rows = np.unique(all_rows)
    best = np.full(len(rows), -np.inf)
    np.maximum.at(best, np.searchsorted(rows, all_rows), all_scores)
    order = rank_order(best)  # rows ascending, so ties by row
    return ViewHits(label, rows[order], best[order], weight)


def recency(timestamp_days: np.ndarray, question_day: float | None, half_life_days: float | None) -> np.ndarray:
    """0.5 ** (age / half-life), age counted back from the question date (future memories: age 0).
    0 for memories without a date, and everywhere when recency is off or the question is undated."""
    if half_life_days is None or question_day is None or np.isnan(question_day):
        return np.zeros(len(timestamp_days), dtype=np.float64)
    age = np.maximum(question_day - timestamp_days, 0.0)
    out = np.power(0.5, age / half_life_days)
    return np.nan_to_num(out, nan=0.0)


def final_scores(
    fused: np.ndarray,
    importance: np.ndarray,
    recency_values: np.ndarray,
    reinforcement: np.ndarray,
    importance_weight: float,
    recency_weight: float,
    reinforcement_weight: float,
) -> np.ndarray:
    """Paper Eq. 1: fused relevance + weighted importance, recency and reinforcement."""
    return (
        fused + importance_weight * importance + recency_weight * recency_values + reinforcement_weight * reinforcement
    )
