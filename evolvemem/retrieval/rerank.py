"""Cross-encoder rerank: a model that reads the question and a memory together scores the best
fused candidates again, and its order is blended into theirs.

Why a blend of ranks and not of scores: a cross-encoder's logits have no common scale with a
fused RRF or weighted score, so the stage turns both orders into reciprocal ranks (as RRF does)
and mixes them with `rerank_weight` (1 = the cross-encoder's order alone). Only the first
`rerank_top_k` candidates are read again; the rest keep their order below them, so the stage
never pulls in a memory retrieval did not rank near the top.

Any sentence-transformers `CrossEncoder` a user has works (`--rerank-model PATH_OR_NAME`). The
model is loaded on first use and its scores are memoised by (question, memory text) — the
latest MEMO_PAIRS (retrieval/memo.py) — so a question asked again in a later round with the same
candidates costs nothing.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from evolvemem.errors import ConfigError
from evolvemem.retrieval.model_files import load_torch_model
from evolvemem.retrieval.memo import BoundedMemo

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig

RANK_K = 60.0  # the reciprocal-rank constant of the blend (the usual RRF value)
BATCH = 32
MEMO_PAIRS = 200_000  # (question, memory) scores kept; a run's rounds fit, a server's memory stays bounded


class CrossEncoderReranker:
    """Scores (question, memory text) pairs with a sentence-transformers CrossEncoder."""

    def __init__(self, model: str, *, device: str = "cpu"):
        self.model_name = model
        self.device = device
        self._model: Any = None
        self._scores: BoundedMemo[tuple[str, str], float] = BoundedMemo(MEMO_PAIRS)
        self._lock = threading.Lock()
        self.pairs_scored = 0  # pairs that reached the model (memo misses), for reports

    def _load(self) -> Any:
        def build() -> Any:
            from sentence_transformers import CrossEncoder

            return CrossEncoder(self.model_name, device=self.device)

        return load_torch_model(
            build,
            f"rerank model {self.model_name!r}",
            "cannot be loaded as a cross-encoder (a local folder, or a name cached on this machine)",
        )

    def check(self) -> None:
        """Load the model now, so a wrong path fails when a run starts, not mid-round."""
        with self._lock:
            if self._model is None:
                self._model = self._load()

    def scores(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """The model's score of each (question, text) pair; pairs seen before are not re-read."""
        with self._lock:
            todo = [t for t in dict.fromkeys(texts) if (question, t) not in self._scores]
            if todo:
                if self._model is None:
                    self._model = self._load()
                found = self._model.predict(
                    [(question, t) for t in todo], batch_size=BATCH, show_progress_bar=False, convert_to_numpy=True
                )
                for text, score in zip(todo, np.asarray(found, np.float64).reshape(-1).tolist()):
                    self._scores[(question, text)] = score
                self.pairs_scored += len(todo)
            return np.array([self._scores[(question, t)] for t in texts], np.float64)


NO_RERANKER = (
    "the config turns on the cross-encoder rerank (rerank_top_k > 0) but no cross-encoder was given: "
    "pass --rerank-model PATH_OR_NAME, or set rerank_top_k = 0"
)


def reranks(config: RetrievalConfig) -> bool:
    """Whether `config` or one of its per-type overrides turns the rerank stage on."""
    return config.rerank_top_k > 0 or any(int(o.get("rerank_top_k") or 0) > 0 for o in config.overrides().values())


def require_reranker(config: RetrievalConfig, reranker: CrossEncoderReranker | None) -> None:
    """Refuse in one line a config that reranks when there is no cross-encoder: its figures (or a
    served context) would silently lack the stage (entry points call it through stage_models)."""
    if reranker is None and reranks(config):
        raise ConfigError(NO_RERANKER)


def load_reranker(model: str | None) -> CrossEncoderReranker | None:
    """The cross-encoder `model` names, loaded now so a wrong one fails before any work (None: none)."""
    if not model:
        return None
    reranker = CrossEncoderReranker(model)
    reranker.check()
    return reranker


def blended_order(model_scores: np.ndarray, weight: float) -> np.ndarray:
    """New order of `n` candidates given in their current order: each scores
    (1 - weight) / (K + current rank) + weight / (K + the model's rank); ties keep the current
    order. Returns positions into the current order."""
    n = len(model_scores)
    current = np.arange(1, n + 1, dtype=np.float64)
    by_model = np.empty(n, np.float64)
    by_model[np.argsort(-model_scores, kind="stable")] = current
    blended = (1.0 - weight) / (RANK_K + current) + weight / (RANK_K + by_model)
    return np.argsort(-blended, kind="stable")
