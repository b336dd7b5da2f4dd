"""Consolidation: merge near-duplicate memories, decay old ones, reinforce ones a query names.

Near-duplicates are found with an exact set-similarity join (prefix filtering): two token sets
with Jaccard >= t must share a token among the rarest |A| - ceil(t·|A|) + 1 tokens of each, so
only pairs sharing a rare token are ever compared. That keeps ~600 units far below a second
without approximate hashing, and gives the same answer as comparing every pair.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime
from typing import Iterable, Sequence

import numpy as np

from evolvemem.memory.nlp import Annotations, tokenize
from evolvemem.contracts.memory import MemoryUnit

DUPLICATE_THRESHOLD = 0.80
DECAY_PER_DAY = 0.05
DECAY_GRACE_DAYS = 30
DECAY_FLOOR = 0.15
REINFORCE_STEP = 0.05
REINFORCE_CAP = 0.30


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _union(*groups: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(x for group in groups for x in group))


def merge_into(kept: MemoryUnit, other: MemoryUnit) -> MemoryUnit:
    """`kept` with `other`'s sources and annotations added (its content and id stay)."""
    return kept.evolve(
        source_turn_ids=_union(kept.source_turn_ids, other.source_turn_ids),
        persons=_union(kept.persons, other.persons),
        locations=_union(kept.locations, other.locations),
        entities=_union(kept.entities, other.entities),
        topics=_union(kept.topics, other.topics),
        keywords=_union(kept.keywords, other.keywords),
        importance=max(kept.importance, other.importance),
        reinforcement=max(kept.reinforcement, other.reinforcement),
        confidence=max(kept.confidence, other.confidence),
    )


def _normalised(text: str) -> str:
    return " ".join(text.lower().split())


def merge_duplicates(units: Sequence[MemoryUnit], threshold: float = DUPLICATE_THRESHOLD) -> list[MemoryUnit]:
    """Merge exact and near-duplicate memories (Jaccard of `tokenize` sets >= `threshold`).

    Units are visited most important first; each one either joins the first already kept unit
    it duplicates (which is at least as important) or is kept itself. The survivors come back
    in their original order, each carrying the union of its duplicates' sources."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"duplicate threshold must be in (0, 1], got {threshold}")
    n = len(units)
    if n < 2:
        return list(units)
    token_sets = [frozenset(tokenize(u.content)) for u in units]
    frequency = Counter(tok for tokens in token_sets for tok in tokens)
    order = sorted(range(n), key=lambda i: (-units[i].importance, i))

    merged: dict[int, MemoryUnit] = {}  # kept index -> unit with merged sources
    by_text: dict[str, int] = {}
    prefix_index: dict[str, list[int]] = {}
    for i in order:
        text_key = _normalised(units[i].content)
        target = by_text.get(text_key)
        tokens = token_sets[i]
        if target is None and tokens:
            ranked = sorted(tokens, key=lambda tok: (frequency[tok], tok))
            prefix = ranked[: len(ranked) - math.ceil(threshold * len(ranked)) + 1]
            seen: set[int] = set()
            for tok in prefix:
                for j in prefix_index.get(tok, ()):
                    if j in seen:
                        continue
                    seen.add(j)
                    other = token_sets[j]
                    small, large = sorted((len(tokens), len(other)))
                    if small >= threshold * large and jaccard(tokens, other) >= threshold:
                        target = j
                        break
                if target is not None:
                    break
            if target is None:
                for tok in prefix:
                    prefix_index.setdefault(tok, []).append(i)
        if target is None:
            merged[i] = units[i]
            by_text.setdefault(text_key, i)
        else:
            merged[target] = merge_into(merged[target], units[i])
    return [merged[i] for i in sorted(merged)]


def decay_importance(
    units: Sequence[MemoryUnit],
    reference: datetime,
    per_day: float = DECAY_PER_DAY,
    grace_days: int = DECAY_GRACE_DAYS,
    floor: float = DECAY_FLOOR,
) -> list[MemoryUnit]:
    """Lower the importance of memories older than `grace_days` by `per_day` for each further day,
    never below `floor` (a memory already under the floor keeps its value). Undated units and
    units within the grace period come back unchanged."""
    ages = np.array(
        [(reference - u.timestamp).total_seconds() / 86400.0 if u.timestamp is not None else 0.0 for u in units]
    )
    current = np.array([u.importance for u in units], dtype=float)
    overdue = np.maximum(0.0, np.floor(ages) - grace_days)
    decayed = np.where(overdue > 0, np.minimum(current, np.maximum(floor, current - per_day * overdue)), current)
    return [
        u if new == old else u.evolve(importance=round(float(new), 6)) for u, new, old in zip(units, decayed, current)
    ]


def _names(persons: Iterable[str], locations: Iterable[str], entities: Iterable[str]) -> set[str]:
    return {x.strip().lower() for group in (persons, locations, entities) for x in group if x and x.strip()}


def reinforce(
    units: Sequence[MemoryUnit],
    query_annotations: Annotations,
    step: float = REINFORCE_STEP,
    cap: float = REINFORCE_CAP,
) -> list[MemoryUnit]:
    """Raise `reinforcement` by `step` for each of the query's persons/locations/entities a memory
    also names, up to `cap`. Memories that share no entity come back unchanged."""
    wanted = _names(query_annotations.persons, query_annotations.locations, query_annotations.entities)
    if not wanted:
        return list(units)
    out = []
    for u in units:
        shared = len(wanted & _names(u.persons, u.locations, u.entities))
        if shared:
            u = u.evolve(reinforcement=round(min(cap, u.reinforcement + step * shared), 6))
        out.append(u)
    return out


def effective_importance(unit: MemoryUnit) -> float:
    """Importance plus reinforcement, capped at 1 (what a ranker that weighs importance reads)."""
    return min(1.0, unit.importance + unit.reinforcement)


def consolidate(
    units: Sequence[MemoryUnit],
    reference: datetime | None = None,
    threshold: float = DUPLICATE_THRESHOLD,
) -> list[MemoryUnit]:
    """Merge duplicates, then decay relative to `reference` (no decay when it is None)."""
    merged = merge_duplicates(units, threshold)
    return decay_importance(merged, reference) if reference is not None else merged
