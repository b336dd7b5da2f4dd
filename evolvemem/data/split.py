"""Deterministic dev/test split by conversation.

Evolution reads only the dev split; the chosen config is scored once on test. Splitting by
conversation (never by question) keeps every question about a conversation on one side, so the
loop cannot tune to facts it will be tested on.

How: each conversation id is hashed with sha256 (stable across machines, Python versions and
file orderings); the conversations are ranked by hash and the first round(n * test_fraction)
form the test side, clamped so that with two or more conversations each side gets at least
one. Ranking rather than a hash threshold gives the requested proportion exactly even for the
ten conversations of LoCoMo (a threshold could put 2 of 8 on one side). The price: adding
conversations to a benchmark can move an existing one across, so a split belongs to a dataset.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

from evolvemem.data.models import Dataset
from evolvemem.errors import ConfigError, DataError

SPLITS = ("dev", "test", "all")


def _rank_key(conversation_id: str) -> tuple[str, str]:
    return hashlib.sha256(conversation_id.encode("utf-8")).hexdigest(), conversation_id


def split_ids(conversation_ids: Iterable[str], test_fraction: float = 0.5) -> tuple[list[str], list[str]]:
    """(dev ids, test ids), each sorted by id."""
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) or not 0 < test_fraction < 1:
        raise ConfigError(f"test_fraction must be between 0 and 1 (exclusive), got {test_fraction!r}")
    ranked = sorted(set(conversation_ids), key=_rank_key)
    n = len(ranked)
    n_test = round(n * test_fraction)
    if n >= 2:
        n_test = min(max(n_test, 1), n - 1)
    else:
        n_test = 0  # a single conversation can only be dev
    return sorted(ranked[n_test:]), sorted(ranked[:n_test])


def split_dataset(dataset: Dataset, split: str, test_fraction: float = 0.5) -> Dataset:
    """The dataset restricted to the "dev" or "test" conversations, or all of it ("all")."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r} (known: {', '.join(SPLITS)})")
    if split == "all":
        return dataset
    dev, test = split_ids(dataset.conversations, test_fraction)
    chosen = dev if split == "dev" else test
    if not chosen:
        raise DataError(
            f"{dataset.name}: a {split} split needs at least 2 conversations, it has {len(dataset.conversations)}; "
            "use --split all"
        )
    return dataset.subset(set(chosen))
