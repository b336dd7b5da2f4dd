"""Honesty guard: no LoCoMo question, gold answer or evidence sentence appears in product code,
prompts or the action space (examples must be about invented people)."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = [
    *sorted((REPO / "evolvemem").rglob("*.py")),
    *sorted((REPO / "prompts").glob("*.md")),
    *sorted((REPO / "action_space").rglob("*.toml")),
]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^a-z0-9 ]", " ", text.lower())).strip()


def test_no_locomo_text_in_product_files(locomo_path):
    data = json.loads(locomo_path.read_text(encoding="utf-8"))
    needles: set[str] = set()
    for sample in data:
        for qa in sample["qa"]:
            needles.add(_norm(qa["question"]))
            for key in ("answer", "adversarial_answer"):
                value = _norm(str(qa.get(key, "")))
                if len(value) >= 16:  # short answers ("2022", "yes") are ordinary words
                    needles.add(value)
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                needles.update(_norm(t["text"]) for t in turns if len(t.get("text", "")) >= 40)
        speakers = {sample["conversation"]["speaker_a"], sample["conversation"]["speaker_b"]}
        needles.update(_norm(s) for s in speakers)
    # normalised text is space-separated words, so padding with spaces makes `in` word-bounded
    haystack = {p: f" {_norm(p.read_text(encoding='utf-8'))} " for p in PRODUCT}
    hits = [(p.relative_to(REPO), n) for p, text in haystack.items() for n in needles if n and f" {n} " in text]
    assert not hits, f"benchmark text in product files: {hits[:5]}"
