"""Cue–tag–content graph with spreading activation (an offline take on MRAgent's active
reconstruction of memories from cues).

Memories are linked to their **cues** (the keyword tokens BM25 indexes: content + `keywords`)
and their **tags** (topics, persons, locations, entities) in one sparse bipartite graph. A
question activates the cues and tags it mentions; activation then flows cue → memory → that
memory's other cues → further memories, losing `cue_graph_decay` of its strength per hop and
keeping only the `cue_graph_beam` most active memories and cues after each hop. This reaches a
memory that shares nothing with the question but a rare cue with a memory that does (e.g. the
question names a person's sister, one memory names the sister, another says what she does).

Edges are weighted by the cue's idf (a name in every memory carries little activation) divided
by the square root of the memory's cue count (a long memory does not soak up everything).
The graph is built once per index state, lazily, in the source's private cache; a question
costs `steps` pairs of sparse matrix-vector products over one conversation.

The candidate source that serves this as a retrieval view is cue_graph.py; its LLM walk
(cue_graph_llm.py) reads the same graph.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from evolvemem.retrieval.fusion import top_k

_WORD = "w:"  # cue node: a keyword token
_TAG = "t:"  # tag node: a topic, person, location or entity (lowercased)


@dataclass(frozen=True)
class CueGraph:
    """Memories (rows) × cue/tag nodes (columns), edge weight idf / sqrt(node count of the row)."""

    to_memories: sp.csr_matrix  # (memories, nodes): cue activation -> memory activation
    to_cues: sp.csr_matrix  # (nodes, memories): memory activation -> cue activation (shared nodes only)
    node_of: dict[str, int]

    @property
    def n_memories(self) -> int:
        rows: int = self.to_memories.shape[0]
        return rows

    @functools.cached_property
    def node_keys(self) -> tuple[str, ...]:
        """Node id -> key ("w:lisbon", "t:priya raman")."""
        keys = [""] * len(self.node_of)
        for key, node in self.node_of.items():
            keys[node] = key
        return tuple(keys)

    def seeds(self, tokens: Iterable[str], terms: Iterable[str]) -> np.ndarray:
        """Node ids the question activates: its tokens as cues (or as single-word tags, e.g. a
        topic) and its persons/locations/entities as tags."""
        keys = [_WORD + t for t in tokens] + [_TAG + t for t in tokens] + [_TAG + t for t in terms]
        ids = {self.node_of[k] for k in keys if k in self.node_of}
        return np.array(sorted(ids), dtype=np.int64)


def memory_nodes(tokens: Sequence[str], terms: Sequence[str], topics: Sequence[str]) -> list[str]:
    """The distinct node keys of one memory; a tag that is one of its tokens already (a
    one-word name or topic) is not doubled, so names do not count twice."""
    words = set(tokens)
    tags = [t.strip().lower() for t in (*terms, *topics) if t and t.strip()]
    return list(dict.fromkeys([_WORD + t for t in tokens] + [_TAG + t for t in tags if t not in words]))


def build_graph(state: Any) -> CueGraph:
    """The cue graph of one index state (memories, token_lists, term_lists)."""
    node_of: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for row, (unit, tokens, terms) in enumerate(zip(state.memories, state.token_lists, state.term_lists)):
        for key in memory_nodes(tokens, terms, unit.topics):
            rows.append(row)
            cols.append(node_of.setdefault(key, len(node_of)))
    n = len(state.memories)
    incidence = sp.csr_matrix((np.ones(len(rows), np.float64), (rows, cols)), shape=(n, len(node_of)))
    df = np.asarray(incidence.sum(axis=0)).ravel()
    idf = np.log1p(n / np.maximum(df, 1.0))
    per_row = np.sqrt(np.maximum(np.diff(incidence.indptr), 1)).astype(np.float64)
    weighted = sp.diags(1.0 / per_row) @ incidence @ sp.diags(idf)
    weighted = sp.csr_matrix(weighted)
    # a node in one memory only leads back to it: it scores memories but never spreads
    leads_on = sp.diags((df >= 2).astype(np.float64))
    return CueGraph(weighted, sp.csr_matrix(leads_on @ weighted.T), node_of)


def _beam(activation: np.ndarray, beam: int) -> np.ndarray:
    """Keep the `beam` most active nodes (ties by id), scaled so the strongest is 1."""
    kept = top_k("", activation, beam, positive_only=True)
    out = np.zeros_like(activation)
    if len(kept):
        out[kept.rows] = kept.scores / kept.scores[0]
    return out


def spread(graph: CueGraph, seeds: np.ndarray, steps: int, beam: int, decay: float) -> np.ndarray:
    """Accumulated activation of every memory after `steps` cue → memory hops.

    Hop 1 scores memories by the question's own cues; each later hop first lifts the *other*
    cues of the active memories (the question's own have been followed already), then scores
    memories from those, weighted `decay` ** (hop - 1)."""
    total = np.zeros(graph.n_memories, dtype=np.float64)
    if not len(seeds) or graph.n_memories == 0:
        return total
    cues = np.zeros(graph.to_memories.shape[1], dtype=np.float64)
    cues[seeds] = 1.0
    carried = 1.0
    for hop in range(steps):
        memories = _beam(graph.to_memories @ cues, beam)
        if not memories.any():
            break
        total += carried * memories
        if hop + 1 == steps:
            break
        lifted = graph.to_cues @ memories
        lifted[seeds] = 0.0
        cues = _beam(lifted, beam)
        carried *= decay
    return total
