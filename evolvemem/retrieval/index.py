"""One conversation's retrieval index: BM25, the embedding matrix and an entity incidence matrix.

Indexes are never pooled across conversations: a question only ever searches the memories of
its own conversation. Everything a query needs is precomputed here as flat numpy arrays so the
retriever's hot path is a handful of vector operations per view.

`add` (targeted re-extraction) appends units: their embeddings come from the embedder's cache
or the model, old rows keep their vectors and tokens, and only the small BM25 and entity
matrices are rebuilt. The whole state is swapped in one assignment, so a concurrent reader sees
either the old index or the new one, never a mix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Collection, Sequence

import numpy as np
import scipy.sparse as sp

from evolvemem.contracts.memory import MemoryUnit
from evolvemem.memory.nlp import annotate, tokenize

_EPOCH = datetime(1970, 1, 1)


def to_days(moment: datetime | None) -> float:
    """Days since 1970 (naive datetimes taken as they are, aware ones in UTC); NaN for None."""
    if moment is None:
        return math.nan
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return (moment - _EPOCH).total_seconds() / 86400.0


def memory_tokens(unit: MemoryUnit) -> list[str]:
    """What BM25 indexes for a memory: its content plus its keywords."""

    return tokenize(unit.content) + (tokenize(" ".join(unit.keywords)) if unit.keywords else [])


def memory_terms(unit: MemoryUnit, known_persons: Collection[str] = ()) -> list[str]:
    """Lowercased persons, locations and entities of a memory, for the structured view.

    Units that carry none (e.g. built without the offline extractor) are annotated from their
    content, so the structured view does not go silent on them."""
    terms = [*unit.persons, *unit.locations, *unit.entities]
    if not terms:
        found = annotate(unit.content, known_persons)
        terms = [*found.persons, *found.locations, *found.entities]
    return list(dict.fromkeys(t.strip().lower() for t in terms if t and t.strip()))


def _idf(document_frequency: np.ndarray, n_docs: int) -> np.ndarray:
    weights: np.ndarray = np.log1p(n_docs / np.maximum(document_frequency, 1)).astype(np.float32)
    return weights


@dataclass(frozen=True)
class KeywordIndex:
    """BM25 over memory tokens; `doc_token_ids`, `token_df` and `token_idf` serve reflection."""

    bm25: Any  # bm25s.BM25, or None when no memory has a token
    vocab: dict[str, int]
    id_to_token: tuple[str, ...]
    token_df: np.ndarray  # per token id: how many memories contain it
    token_idf: np.ndarray  # per token id
    doc_token_ids: tuple[np.ndarray, ...]  # per memory row: its distinct token ids

    @classmethod
    def build(cls, token_lists: Sequence[list[str]]) -> "KeywordIndex":
        if not any(token_lists):
            empty = np.zeros(0, np.float32)
            return cls(None, {}, (), empty, empty, tuple(np.zeros(0, np.int64) for _ in token_lists))
        import bm25s

        # Our own vocabulary in first-seen order: bm25s builds its own from a set, whose order
        # changes between processes, and token ids break ties in reflection.
        vocab: dict[str, int] = {}
        corpus_ids = [[vocab.setdefault(t, len(vocab)) for t in tokens] for tokens in token_lists]
        bm25 = bm25s.BM25()
        bm25.index((corpus_ids, dict(vocab)), show_progress=False)
        id_to_token = list(vocab)
        doc_ids = tuple(np.unique(np.array(ids, dtype=np.int64)) for ids in corpus_ids)
        df = np.zeros(len(id_to_token), dtype=np.float32)
        for ids in doc_ids:
            df[ids] += 1
        return cls(bm25, vocab, tuple(id_to_token), df, _idf(df, len(token_lists)), doc_ids)

    def token_ids(self, tokens: Sequence[str]) -> list[int]:
        vocab = self.vocab
        return [vocab[t] for t in tokens if t in vocab]

    def scores(self, token_ids: Sequence[int], n_rows: int) -> np.ndarray:
        if self.bm25 is None or not token_ids:
            return np.zeros(n_rows, dtype=np.float32)
        scores: np.ndarray = self.bm25.get_scores_from_ids(list(token_ids))
        return scores

    def extended(self, scores: np.ndarray, more_ids: Sequence[int]) -> np.ndarray:
        """`scores(ids + more_ids)` from `scores(ids)`, bit for bit, reading only `more_ids`'
        postings (reflection grows its query a few terms a round). bm25s sums a query by adding
        each token's precomputed postings to a zero vector in query order, so continuing that
        sum from a copy does the same additions in the same order (a test checks it)."""
        if self.bm25 is None or not more_ids:
            return scores
        index = self.bm25.scores
        data, indices, indptr = index["data"], index["indices"], index["indptr"]
        out = scores.copy()
        for token in more_ids:
            start, end = indptr[token], indptr[token + 1]
            np.add.at(out, indices[start:end], data[start:end])
        return out


@dataclass(frozen=True)
class _Structured:
    """Incidence of persons/locations/entities (columns) in memories (rows), with term idf."""

    matrix: sp.csc_matrix
    vocab: dict[str, int]
    idf: np.ndarray

    @classmethod
    def build(cls, term_lists: Sequence[list[str]]) -> "_Structured":
        vocab: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        for row, terms in enumerate(term_lists):
            for term in terms:
                rows.append(row)
                cols.append(vocab.setdefault(term, len(vocab)))
        data = np.ones(len(rows), dtype=np.float32)
        matrix = sp.csc_matrix((data, (rows, cols)), shape=(len(term_lists), len(vocab)), dtype=np.float32)
        df = np.diff(matrix.indptr).astype(np.float32)
        return cls(matrix, vocab, _idf(df, max(len(term_lists), 1)))

    def scores(self, terms: Sequence[str], n_rows: int) -> np.ndarray:
        """Overlap of the query's terms with each memory's, each shared term weighted by its idf
        (a name in every memory counts less than a rare place)."""
        out = np.zeros(n_rows, dtype=np.float32)
        indptr, indices = self.matrix.indptr, self.matrix.indices
        for term in dict.fromkeys(terms):
            col = self.vocab.get(term)
            if col is not None:
                out[indices[indptr[col] : indptr[col + 1]]] += self.idf[col]
        return out

    def counts(self, terms: Sequence[str], n_rows: int) -> np.ndarray:
        """How many of the query's terms each memory shares (unweighted)."""
        out = np.zeros(n_rows, dtype=np.float32)
        indptr, indices = self.matrix.indptr, self.matrix.indices
        for term in dict.fromkeys(terms):
            col = self.vocab.get(term)
            if col is not None:
                out[indices[indptr[col] : indptr[col + 1]]] += 1.0
        return out


@dataclass(frozen=True)
class IndexState:
    """Everything one version of the index holds; replaced as a whole by `add`."""

    memories: tuple[MemoryUnit, ...]
    embeddings: np.ndarray  # (n, d) float32, unit rows
    token_lists: tuple[list[str], ...]
    term_lists: tuple[list[str], ...]
    keyword: KeywordIndex
    structured: _Structured
    importance: np.ndarray
    reinforcement: np.ndarray
    timestamp_days: np.ndarray  # NaN where a memory has no timestamp
    row_of_id: dict[str, int]


class ConversationIndex:
    """The searchable form of one conversation's memories; rows follow the memories' order."""

    def __init__(self, state: IndexState, embedder: Any, known_persons: Collection[str] = ()):
        self._state = state
        self._embedder = embedder
        self.known_persons = tuple(known_persons)

    # ------------------------------------------------------------------------------ building
    @classmethod
    def build(
        cls, memories: Sequence[MemoryUnit], embedder: Any, known_persons: Collection[str] = ()
    ) -> "ConversationIndex":
        """Index `memories` (one conversation). Embeddings come from `embedder` (cached by content)."""
        units = _unique(memories, {})
        vectors = (
            embedder.encode_memories([u.content for u in units])
            if units
            else np.zeros((0, embedder.dimension), np.float32)
        )
        state = _assemble(
            units, vectors, [memory_tokens(u) for u in units], [memory_terms(u, known_persons) for u in units]
        )
        return cls(state, embedder, known_persons)

    def add(self, memories: Sequence[MemoryUnit]) -> int:
        """Append units whose id is new; returns how many were added. Old rows keep their
        embeddings and tokens; only the new units are embedded (or read from the cache)."""
        old = self._state
        fresh = _unique(memories, old.row_of_id)
        if not fresh:
            return 0
        new_vectors = self._embedder.encode_memories([u.content for u in fresh])
        self._state = _assemble(
            old.memories + tuple(fresh),
            np.vstack([old.embeddings, new_vectors]) if len(old.memories) else new_vectors,
            list(old.token_lists) + [memory_tokens(u) for u in fresh],
            list(old.term_lists) + [memory_terms(u, self.known_persons) for u in fresh],
        )
        return len(fresh)

    # ------------------------------------------------------------------------------ reading
    @property
    def state(self) -> IndexState:
        """A consistent snapshot; the retriever reads it once per question."""
        return self._state

    @property
    def memories(self) -> tuple[MemoryUnit, ...]:
        return self._state.memories

    @property
    def embeddings(self) -> np.ndarray:
        return self._state.embeddings

    @property
    def structured_vocab(self) -> dict[str, int]:
        return self._state.structured.vocab

    def __len__(self) -> int:
        return len(self._state.memories)


def _unique(memories: Sequence[MemoryUnit], seen: dict[str, int]) -> list[MemoryUnit]:
    out, ids = [], set(seen)
    for unit in memories:
        if unit.memory_id not in ids:
            ids.add(unit.memory_id)
            out.append(unit)
    return out


def _assemble(
    units: Sequence[MemoryUnit], vectors: np.ndarray, token_lists: Sequence[list[str]], term_lists: Sequence[list[str]]
) -> IndexState:
    units = tuple(units)
    return IndexState(
        memories=units,
        embeddings=np.ascontiguousarray(vectors, dtype=np.float32),
        token_lists=tuple(token_lists),
        term_lists=tuple(term_lists),
        keyword=KeywordIndex.build(token_lists),
        structured=_Structured.build(term_lists),
        importance=np.array([u.importance for u in units], dtype=np.float32),
        reinforcement=np.array([u.reinforcement for u in units], dtype=np.float32),
        timestamp_days=np.array([to_days(u.timestamp) for u in units], dtype=np.float64),
        row_of_id={u.memory_id: i for i, u in enumerate(units)},
    )
