"""Retrieval mechanisms that plug into the retriever as candidate sources (see retrieval/extensions.py).

`candidate_sources()` is the one list of them: the workspace (the composition root) hands it to
every retriever it builds. Adding a mechanism that adds a view adds one line here."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evolvemem.retrieval.extensions import CandidateSource


@functools.lru_cache(maxsize=None)
def candidate_sources() -> tuple[CandidateSource, ...]:
    """Every candidate source, in the order the retriever fuses their views (imported on first use:
    a mechanism's module is loaded only by a process that retrieves)."""
    from evolvemem.mechanisms import cue_graph, foresight, scenes

    return (cue_graph.SOURCE, scenes.SOURCE, foresight.SOURCE)
