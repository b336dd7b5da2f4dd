"""What the two real-model benchmarks (local_llm.py, evolve_llm.py) share to cut a fixed LoCoMo
slice: the dev file, the context window they serve the local model with, and a question picker
that takes the categories in turn so a small slice still holds every kind of question.
Scripts put the repo root on sys.path, then import this as `benchmarks._slice`."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10_dev8.json"
WINDOW = 4096  # llama.cpp context the local model is served with (and the runs are told)
ADVERSARIAL = 5  # LoCoMo's adversarial category (unanswerable questions)


def stratified(qa: list[dict], n: int) -> list[dict]:
    """`n` questions taking the categories in turn (file order within each)."""
    by_category: dict[int, list[dict]] = defaultdict(list)
    for q in qa:
        by_category[q["category"]].append(q)
    picked: list[dict] = []
    while len(picked) < n and any(by_category.values()):
        for category in sorted(by_category):
            if by_category[category] and len(picked) < n:
                picked.append(by_category[category].pop(0))
    return picked
