"""Consolidation: duplicate merge at the 0.80 boundary, decay numbers, reinforcement cap."""

from __future__ import annotations

import itertools
import time
from datetime import datetime, timedelta

import pytest

from evolvemem.memory.consolidate import (
    consolidate,
    decay_importance,
    effective_importance,
    jaccard,
    merge_duplicates,
    reinforce,
)
from evolvemem.memory.nlp import Annotations, annotate, tokenize
from evolvemem.contracts.memory import MemoryUnit

DAY = datetime(2023, 6, 1)


def unit(content: str, importance: float = 0.5, sources: tuple[str, ...] = ("D1:1",), **kw) -> MemoryUnit:
    return MemoryUnit(
        memory_id=f"c:{content[:20]}",
        conversation_id="c",
        content=content,
        importance=importance,
        source_turn_ids=sources,
        **kw,
    )


def test_jaccard_boundary_at_080():
    four = "pottery lisbon studio river"
    five = four + " kiln"
    assert jaccard(set(tokenize(four)), set(tokenize(five))) == pytest.approx(0.8)
    merged = merge_duplicates([unit(four, 0.4, ("D1:1",)), unit(five, 0.9, ("D1:2",))])
    assert len(merged) == 1
    assert merged[0].content == five  # the more important unit is kept ...
    assert merged[0].source_turn_ids == ("D1:2", "D1:1")  # ... with the other's sources

    three = "pottery lisbon studio"
    assert jaccard(set(tokenize(three)), set(tokenize(four))) == pytest.approx(0.75)
    assert len(merge_duplicates([unit(three), unit(four)])) == 2
    assert len(merge_duplicates([unit(three), unit(four)], threshold=0.75)) == 1


def test_exact_duplicates_merge_and_annotations_unite():
    a = unit("Priya Raman visited Lisbon.", 0.3, ("D1:1",), persons=("priya raman",), topics=("travel",))
    b = unit("priya raman   visited lisbon.", 0.6, ("D2:4",), locations=("lisbon",), reinforcement=0.1)
    c = unit("Tomasz bought a kiln for the studio.", 0.5, ("D1:3",))
    merged = merge_duplicates([a, c, b])
    assert [m.content for m in merged] == [c.content, b.content]  # original order of the survivors
    kept = merged[1]
    assert kept.source_turn_ids == ("D2:4", "D1:1")
    assert kept.persons == ("priya raman",) and kept.locations == ("lisbon",) and kept.topics == ("travel",)
    assert kept.importance == 0.6 and kept.reinforcement == 0.1


def test_merge_on_real_memories_matches_exhaustive_comparison(locomo_path):
    """Survivors never duplicate each other (the prefix filter misses no pair) and no source is lost."""
    from evolvemem.data.locomo import load_locomo
    from evolvemem.memory.offline_extract import OfflineExtractor

    conv = next(iter(load_locomo(locomo_path).conversations.values()))
    units, _ = OfflineExtractor().extract(conv)
    for threshold in (0.5, 0.8):
        merged = merge_duplicates(units, threshold)
        sets = [set(tokenize(u.content)) for u in merged]
        assert all(jaccard(a, b) < threshold for a, b in itertools.combinations(sets, 2))
        assert {t for u in merged for t in u.source_turn_ids} == {t for u in units for t in u.source_turn_ids}
    assert len(merge_duplicates(units, 0.5)) < len(units)


def test_merge_of_600_units_is_fast():
    words = [f"w{i}" for i in range(400)]
    units = [unit(" ".join(words[(i * 7 + k * 13) % 400] for k in range(12)), sources=(f"D1:{i}",)) for i in range(600)]
    started = time.perf_counter()
    merge_duplicates(units)
    assert time.perf_counter() - started < 0.5


def test_decay_numbers():
    def aged(days: float, importance: float) -> MemoryUnit:
        return unit(f"memory {days} {importance}", importance, timestamp=DAY - timedelta(days=days))

    units = [aged(30, 0.9), aged(31, 0.9), aged(40, 0.9), aged(100, 0.9), aged(100, 0.1), aged(5, 0.9)]
    undated = unit("no date", 0.9)
    out = decay_importance([*units, undated], DAY)
    assert [round(u.importance, 6) for u in out] == [0.9, 0.85, 0.4, 0.15, 0.1, 0.9, 0.9]
    assert out[0] is units[0] and out[-1] is undated  # unchanged units are not copied
    assert consolidate(units, reference=DAY)[2].importance == pytest.approx(0.4)
    assert consolidate(units)[2].importance == 0.9  # no reference date: no decay


def test_reinforcement_per_shared_entity_with_cap():
    memory = unit(
        "Priya Raman and Tomasz went to Lisbon for the Riverside Jazz Festival.",
        persons=("priya raman", "tomasz"),
        locations=("lisbon",),
        entities=("riverside jazz festival",),
    )
    other = unit("The weather was fine.")
    query = annotate("Did Priya Raman and Tomasz enjoy Lisbon?", ["Priya Raman", "Tomasz"])
    once = reinforce([memory, other], query)
    assert once[0].reinforcement == pytest.approx(0.15)  # three shared entities
    assert once[1] is other
    twice = reinforce(once, query)
    assert twice[0].reinforcement == pytest.approx(0.30)
    assert reinforce(twice, query)[0].reinforcement == pytest.approx(0.30)  # capped
    assert effective_importance(twice[0]) == pytest.approx(0.8)
    assert reinforce([memory], Annotations()) == [memory]
