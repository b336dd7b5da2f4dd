"""Typed reads of a candidate source's private cache.

The retriever gives each (source, index state) a plain dict (retrieval/extensions.py); the source
alone decides what its keys hold, so a key's type is that source's own invariant. `cached` states
it once, at the read, instead of every source re-checking what it stored itself."""

from __future__ import annotations

from typing import Callable, Hashable, TypeVar, cast

# What a source keeps per index state: its own keys (names, or tuples of a name and parameters).
SourceCache = dict[Hashable, object]

T = TypeVar("T")


def cached(cache: SourceCache, key: Hashable, build: Callable[[], T]) -> T:
    """`cache[key]`, built by `build` on first use; `setdefault` keeps the first of two threads
    that built it at once, so every caller sees the same object."""
    value = cache.get(key)
    if value is None:
        value = cache.setdefault(key, build())
    return cast(T, value)
