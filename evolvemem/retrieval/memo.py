"""A memo that forgets its oldest entries past a size.

Why: a retriever memoises question-side work by text (analysis, embeddings, late-interaction
scores). An evaluation asks a fixed set of questions, but a served memory is asked new ones without
end, so an unbounded memo would grow with every query. The bound is far above any benchmark's
question count, so an evaluation never loses an entry; a forgotten one is simply computed again."""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")

MEMO_ENTRIES = 100_000


class BoundedMemo(OrderedDict[K, V]):
    """A dict that drops the oldest-written entries beyond `limit` (reads do not refresh them)."""

    def __init__(self, limit: int = MEMO_ENTRIES):
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        while len(self) > self.limit:
            self.popitem(last=False)
