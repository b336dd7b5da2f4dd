"""Late interaction: MaxSim of a question's content words against every token of every memory.

Why: a pooled sentence vector averages a memory's words into one point, so a question that
shares two rare words with a long turn may sit far from it. MaxSim (ColBERT's scoring) lets each
content word of the question find its best match anywhere in the memory and averages those best
matches. With the embedder's own token outputs (no second model) it reordered held-out LoCoMo
turns more than any other lever in the space (benchmarks/retrieval_frontier.py).

Speed: one conversation's token matrix is a few tens of thousands of rows, so scoring a single
question is a memory-bound matrix-vector product; scoring a batch of questions at once
(`LateIndex.scores`) turns it into one matrix product, which is how the retriever's `prepare`
calls it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig

BATCH_QUERY_TOKENS = 512  # query vectors scored in one product (bounds the similarity matrix)


class LateIndex:
    """One conversation's token vectors, stacked, with where each memory's rows start."""

    def __init__(self, token_vectors: Sequence[np.ndarray], dimension: int):
        lengths = np.array([max(len(v), 1) for v in token_vectors], np.int64)
        blocks = [v if len(v) else np.zeros((1, dimension), np.float32) for v in token_vectors]
        self.flat = (
            np.ascontiguousarray(np.concatenate(blocks), dtype=np.float32)
            if blocks
            else np.zeros((0, dimension), np.float32)
        )
        self.starts = (
            np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(lengths) else np.zeros(0, np.int64)
        )
        self.n_memories = len(token_vectors)

    def scores(self, queries: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Per query (an (m, d) array of unit vectors): the mean over its m vectors of the best
        cosine with any token of each memory — one score per memory."""
        out: list[np.ndarray] = []
        if not self.n_memories:
            return [np.zeros(0, np.float32) for _ in queries]
        batch: list[np.ndarray] = []
        size = 0
        for query in queries:
            if batch and size + len(query) > BATCH_QUERY_TOKENS:
                out.extend(self._batch(batch))
                batch, size = [], 0
            batch.append(query)
            size += len(query)
        if batch:
            out.extend(self._batch(batch))
        return out

    def _batch(self, queries: list[np.ndarray]) -> list[np.ndarray]:
        stacked = np.concatenate(queries).astype(np.float32, copy=False)
        # (query vectors, tokens): each memory's tokens are a contiguous run of a row, so the max
        # over them reads memory in order (1.5x faster than reducing over rows of the transpose;
        # the same products and maxima, bit for bit)
        similarity = stacked @ self.flat.T
        best = np.ascontiguousarray(np.maximum.reduceat(similarity, self.starts, axis=1).T)  # (memories, query vectors)
        bounds = np.cumsum([0] + [len(q) for q in queries])
        return [best[:, a:b].mean(axis=1) for a, b in zip(bounds[:-1], bounds[1:])]


def reads_token_vectors(config: RetrievalConfig) -> bool:
    """Whether some question type's late view is on under `config`, so the memories' token vectors
    will be read (an index then keeps them from the pass that embeds the memories)."""
    return any(config.for_type(question_type).late_top_k > 0 for question_type in (None, *config.overrides()))
