"""Multi-view retrieval for one conversation: views → fusion → ranking terms → context budget.

Views (each a labelled, ranked candidate list; see `fusion.ViewHits`):

- `semantic`    cosine of the question embedding with every memory (`semantic_top_k`)
- `keyword`     BM25 over memory tokens (`keyword_top_k`)
- `structured`  idf-weighted overlap of the question's persons/locations/entities (`structured_top_k`)
- `second_semantic`  cosine under a second embedding model, if the user has one
                (`second_semantic_top_k`; retrieval/second_embedder.py)
- `swap_semantic`, `swap_keyword`  entity swap: the question with person names stripped,
                searched again with the swap top-ks (helps a question that names the wrong person)
- `sub_query`   decomposition: each sub-query's semantic + keyword hits, fused, best
                `decomposition_merge_top_k` kept; rows keep their best score across sub-queries
- `reflection`  each round expands the query with salient terms of the current top memories
                (keyword side) and their embedding centroid (semantic side), using the views
                that are on with their own top-k; rows keep their best score across rounds

Swap views use the semantic/keyword weights; `sub_query` and `reflection` lists are already
fused from weighted semantic and keyword scores, so they enter the final fusion with weight 1.

The retriever receives the effective config of the question (per-type overrides already
resolved) and is a pure function of (index, question, config): question-side work (analysis,
embeddings, decompositions) is memoised by text, and `prepare` does it for a batch up front so
the per-question path is only vector arithmetic.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Collection, Sequence

import numpy as np

from evolvemem.data.models import Question
from evolvemem.errors import ConfigError
from evolvemem.contracts.memory import MemoryUnit
from evolvemem.llm.context_window import estimate_text_tokens
from evolvemem.retrieval.extensions import CandidateSource, ViewRequest
from evolvemem.retrieval.source_cache import SourceCache
from evolvemem.retrieval.fusion import ViewHits, final_scores, fuse, merge_max, rank_order, recency, top_k
from evolvemem.retrieval.index import ConversationIndex, IndexState, to_days
from evolvemem.retrieval.late_interaction import LateIndex
from evolvemem.retrieval.memo import BoundedMemo
from evolvemem.retrieval.rerank import NO_RERANKER, CrossEncoderReranker, blended_order
from evolvemem.retrieval.second_embedder import NO_SECOND_EMBEDDER, SecondEmbedder
from evolvemem.retrieval.temporal import question_span
from evolvemem.contracts.usage import Usage

if TYPE_CHECKING:
    from evolvemem.space.config import RetrievalConfig

REFLECTION_SEEDS = 3  # top memories whose terms expand the query in a reflection round
REFLECTION_TERMS = 5  # salient terms added per round


# a context line adds its number and date label to the memory's own text
CONTEXT_LINE_TOKENS = 8


def memory_tokens(memory: MemoryUnit) -> int:
    """Estimated tokens one memory takes in an answer context (the token budget counts these)."""
    return estimate_text_tokens(memory.content) + CONTEXT_LINE_TOKENS


def context_tokens(memories: Sequence[MemoryUnit]) -> int:
    return sum(memory_tokens(m) for m in memories)


def within_budget(items: Sequence[RetrievedItem], max_items: int, max_tokens: int | None) -> int:
    """How many of the ranked `items` the context takes: with a token budget the longest prefix
    that fits it (never fewer than one) — the budget is the cap, `max_items` does not bind below
    it; without one, at most `max_items`."""
    if not max_tokens:
        return min(len(items), max_items)
    keep = len(items)
    used = 0
    for position, item in enumerate(items[:keep]):
        used += memory_tokens(item.memory)
        if used > max_tokens:
            return max(1, position)
    return keep


def above_floor(items: Sequence[RetrievedItem], floor: float) -> int:
    """How many of the ranked `items` score at least `floor` times the first one's score (never
    fewer than one; all of them when the first scores nothing positive, where a share means
    nothing): the context ends where the ranking stops being sure."""
    if not items or items[0].score <= 0:
        return len(items)
    bar = floor * items[0].score
    return next((position for position, item in enumerate(items) if position and item.score < bar), len(items))


REINFORCEMENT_STEP = 0.05  # per entity shared with the query
REINFORCEMENT_CAP = 0.30


@dataclass(frozen=True)
class RetrievedItem:
    memory: MemoryUnit
    score: float
    rank: int  # 1-based rank by final score (also when the context is shown chronologically)
    views: dict[str, int]  # view label -> 1-based rank in that view


@dataclass(frozen=True)
class RetrievalResult:
    items: tuple[RetrievedItem, ...]  # the context: within max_context (and the token limit), in context_order
    cut: tuple[RetrievedItem, ...]  # ranked candidates that the context budget cut, by rank
    sub_queries: tuple[str, ...] = ()
    cost: Usage = Usage()


@dataclass(frozen=True)
class _QueryInfo:
    tokens: tuple[str, ...]
    terms: tuple[str, ...]  # lowercased persons, locations, entities
    stripped: str  # the text without person names ("" when there is nothing left)
    persons: tuple[str, ...] = ()  # lowercased persons the question names


class _StateExtras:
    """What the retriever derives once per index state: session codes, token counts, the
    token-vector index of late interaction and the second embedding model's memory vectors
    (each built on first use), and late interaction's per-question scores."""

    def __init__(self, state: IndexState):
        self.state = state
        sessions: dict[str, int] = {}
        self.session = np.array(
            [sessions.setdefault(m.session_id or f"\0{row}", len(sessions)) for row, m in enumerate(state.memories)],
            np.int64,
        )
        self.n_sessions = len(sessions)
        self.min_tokens = min((memory_tokens(m) for m in state.memories), default=1)
        self.late: LateIndex | None = None
        self.late_scores: BoundedMemo[str, np.ndarray] = BoundedMemo()
        self.second: np.ndarray | None = None  # (n, d') unit rows under the second embedding model
        self.persons: dict[str, np.ndarray] = {}

    def person_mask(self, person: str) -> np.ndarray:
        mask = self.persons.get(person)
        if mask is None:
            mask = np.array([person in terms for terms in self.state.term_lists], bool)
            self.persons[person] = mask
        return mask


@dataclass
class _Decomposition:
    sub_queries: tuple[str, ...]
    cost: Usage
    reported: bool = False


class Retriever:
    """Retrieval over one conversation's index. Thread-safe; all caches are keyed by text."""

    def __init__(
        self,
        index: ConversationIndex,
        embedder: Any,
        decomposer: Any = None,
        known_persons: Collection[str] = (),
        llm: Any = None,
        reranker: CrossEncoderReranker | None = None,
        sources: Sequence[CandidateSource] = (),
        second_embedder: SecondEmbedder | None = None,
    ):
        self.index = index
        self.sources = tuple(sources)  # mechanisms adding candidate views, handed in by the composition root
        self.reranker = reranker  # the cross-encoder of `rerank_top_k`, if the user gave one
        self.second_embedder = second_embedder  # the model of `second_semantic_top_k`, if the user gave one
        self.llm = llm  # handed to candidate sources that have an LLM variant
        self.embedder = embedder
        self.decomposer = decomposer
        self.known_persons = tuple(known_persons)
        self._queries: BoundedMemo[str, _QueryInfo] = BoundedMemo()
        self._vectors: BoundedMemo[str, np.ndarray] = BoundedMemo()
        self._second_vectors: BoundedMemo[str, np.ndarray] = BoundedMemo()
        self._decompositions: dict[tuple[str, int], _Decomposition] = {}
        self._lock = threading.Lock()
        self._source_caches: dict[tuple[str, int], tuple[IndexState, SourceCache]] = {}
        self._extras: _StateExtras | None = None

    # ------------------------------------------------------------------------ query side
    def _analyse(self, text: str) -> _QueryInfo:
        info = self._queries.get(text)
        if info is None:
            from evolvemem.memory.nlp import annotate, strip_persons, tokenize

            found = annotate(text, self.known_persons)
            stripped = strip_persons(text, found.persons) if found.persons else text
            terms = tuple(dict.fromkeys(t.lower() for t in (*found.persons, *found.locations, *found.entities)))
            persons = tuple(dict.fromkeys(p.lower() for p in found.persons))
            info = _QueryInfo(tuple(tokenize(text)), terms, stripped if tokenize(stripped) else "", persons)
            self._queries[text] = info
        return info

    def _embed(self, texts: Sequence[str]) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if todo:
            for text, vector in zip(todo, self.embedder.encode(todo)):
                self._vectors[text] = vector

    def _vector(self, text: str) -> np.ndarray:
        vector = self._vectors.get(text)
        if vector is None:
            self._embed([text])
            vector = self._vectors[text]
        return vector

    def _second_query_vectors(self, texts: Sequence[str]) -> None:
        """The second model's vectors of `texts` not memoised yet, embedded in one call."""
        if self.second_embedder is None:
            raise ConfigError(NO_SECOND_EMBEDDER)
        todo = list(dict.fromkeys(t for t in texts if t not in self._second_vectors))
        if todo:
            self._second_vectors.update(zip(todo, self.second_embedder.of_questions(todo)))

    def _second_scores(self, extras: _StateExtras, text: str) -> np.ndarray:
        """Cosine of the question with every memory under the second embedding model."""
        vector = self._second_vectors.get(text)
        if vector is None:
            self._second_query_vectors([text])
            vector = self._second_vectors[text]
        scores: np.ndarray = self._second_matrix(extras) @ vector
        return scores

    def _second_matrix(self, extras: _StateExtras) -> np.ndarray:
        """The second model's vectors of this index state's memories (from its cache by content)."""
        if extras.second is None:
            if self.second_embedder is None:
                raise ConfigError(NO_SECOND_EMBEDDER)
            vectors = self.second_embedder.of_memories([m.content for m in extras.state.memories])
            extras.second = np.ascontiguousarray(vectors, dtype=np.float32)
        return extras.second

    def _decomposition(self, text: str, max_sub_queries: int) -> _Decomposition:
        """Sub-queries other than the question itself, memoised by (text, max_sub_queries)."""
        key = (text, max_sub_queries)
        entry = self._decompositions.get(key)
        if entry is None:
            subs, cost = self.decomposer.decompose(text, max_sub_queries)
            own = " ".join(text.lower().split())
            kept = tuple(dict.fromkeys(s.strip() for s in subs if s.strip() and " ".join(s.lower().split()) != own))
            with self._lock:
                entry = self._decompositions.setdefault(key, _Decomposition(kept[:max_sub_queries], cost))
        return entry

    def _charge(self, entry: _Decomposition) -> Usage:
        """A decomposition's cost is reported by the first retrieval that uses it; later ones
        count its calls as cache hits, so summing records never double-counts."""
        with self._lock:
            if entry.reported:
                return Usage(cache_hits=entry.cost.calls)
            entry.reported = True
            return entry.cost

    def prepare(
        self, questions: Sequence[Question], config: RetrievalConfig | None = None, *, decompose: bool = True
    ) -> None:
        """Analyse and batch-embed every question and its name-stripped form up front.

        With `config` (the run's config, overrides included), questions whose effective config
        uses late interaction are scored against every memory in one batch, and with `decompose`
        those whose config decomposes are decomposed now and their sub-queries embedded too (the
        decomposition's cost is still reported by the retrieval that first uses it)."""
        texts: list[str] = []
        late: list[str] = []
        second: list[str] = []
        for question in questions:
            info = self._analyse(question.text)
            texts.append(question.text)
            if info.stripped and info.stripped != question.text:
                texts.append(info.stripped)
            effective = config.for_type(question.question_type) if config is not None else None
            if (
                effective is not None
                and decompose
                and self.decomposer is not None
                and effective.enable_query_decomposition
            ):
                texts.extend(self._decomposition(question.text, effective.max_sub_queries).sub_queries)
            if effective is not None and effective.late_top_k > 0:
                late.append(question.text)
            if effective is not None and effective.second_semantic_top_k > 0:
                second.append(question.text)
        self._embed(texts)
        if late:
            self._late_batch(self._extras_of(self.index.state), late)
        if second:
            self._second_query_vectors(second)
            self._second_matrix(self._extras_of(self.index.state))

    # ------------------------------------------------------------------------ per index state
    def _extras_of(self, state: IndexState) -> _StateExtras:
        with self._lock:
            if self._extras is None or self._extras.state is not state:
                self._extras = _StateExtras(state)
            return self._extras

    def _late_batch(self, extras: _StateExtras, texts: Sequence[str]) -> None:
        """Late-interaction scores of `texts` against every memory, computed in one batch."""
        with self._lock:
            todo = [t for t in dict.fromkeys(texts) if t not in extras.late_scores]
            if not todo:
                return
            if extras.late is None:
                tokens = self.embedder.tokens
                extras.late = LateIndex(
                    tokens.of_memories([m.content for m in extras.state.memories]),
                    int(extras.state.embeddings.shape[1]),
                )
            queries = self.embedder.tokens.of_queries(todo)
            extras.late_scores.update(zip(todo, extras.late.scores(queries)))

    def _late_scores(self, extras: _StateExtras, text: str) -> np.ndarray:
        scores = extras.late_scores.get(text)
        if scores is None:
            self._late_batch(extras, [text])
            scores = extras.late_scores[text]
        return scores

    # ------------------------------------------------------------------------ retrieval
    def retrieve(self, question: Question, config: RetrievalConfig) -> RetrievalResult:
        """The ranked context for `question` under its effective `config`."""
        return self.retrieve_cuts(question, [config])[0]

    def retrieve_cuts(self, question: Question, configs: Sequence[RetrievalConfig]) -> list[RetrievalResult]:
        """One ranking of `question`, cut at each config's token limit: `configs` differ only in
        the budget they carry and share one ranking depth (`ranking_limit`), so each result is
        the one `retrieve` gives under that config alone, for the cost of one ranking."""
        first = configs[0]
        if any(c.ranking_limit != first.ranking_limit for c in configs):
            raise ConfigError("configs cut from one ranking share its depth (TokenBudget.ranked_at)")
        state = self.index.state
        if not state.memories:
            return [RetrievalResult((), ()) for _ in configs]
        rows, final, views, sub_queries, cost = self._rank(state, question, first)
        items = self._items(state, rows, final, views)  # labelled once, cut at each budget
        return [self._cut(state, items, c, sub_queries, cost) for c in configs]

    def _rank(
        self, state: IndexState, question: Question, config: RetrievalConfig
    ) -> tuple[np.ndarray, np.ndarray, list[ViewHits], tuple[str, ...], Usage]:
        """Every view, fused and reordered: the ranked rows, their final scores, the views, the
        sub-queries and what they cost."""
        text = question.text
        info = self._analyse(text)
        swap = bool(config.enable_entity_swap and info.stripped and info.stripped != text)
        if swap:
            self._embed([text, info.stripped])  # one embedder call: a served query's two forms share a batch
        query_vector = self._vector(text)
        extras = self._extras_of(state)
        depth = self._depth(extras, config)
        views: list[ViewHits] = []
        if config.semantic_top_k > 0:
            views.append(
                top_k("semantic", state.embeddings @ query_vector, depth(config.semantic_top_k), config.semantic_weight)
            )
        keyword_scores = self._keyword_scores(state, info.tokens) if config.keyword_top_k > 0 else None
        if keyword_scores is not None:  # reflection starts from these scores too
            k = depth(config.keyword_top_k)
            views.append(top_k("keyword", keyword_scores, k, config.keyword_weight, positive_only=True))
        if config.structured_top_k > 0 and info.terms:
            scores = state.structured.scores(info.terms, len(state.memories))
            views.append(
                top_k(
                    "structured", scores, depth(config.structured_top_k), config.structured_weight, positive_only=True
                )
            )
        if config.late_top_k > 0:
            views.append(top_k("late", self._late_scores(extras, text), depth(config.late_top_k), config.late_weight))
        if config.second_semantic_top_k > 0:
            views.append(
                top_k(
                    "second_semantic",
                    self._second_scores(extras, text),
                    depth(config.second_semantic_top_k),
                    config.second_semantic_weight,
                )
            )
        if swap:
            views.extend(self._swap_views(state, info.stripped, config))
        sub_queries: tuple[str, ...] = ()
        cost = Usage()
        if config.enable_query_decomposition and self.decomposer is not None:
            entry = self._decomposition(text, config.max_sub_queries)
            sub_queries, cost = entry.sub_queries, self._charge(entry)
            if sub_queries:
                views.append(self._sub_query_view(state, sub_queries, config))
        for source in self.sources:
            if source.enabled(config):
                extra, extra_cost = source.hits(
                    self._request(state, question, info, query_vector, config), self._source_cache(source.name, state)
                )
                views.extend(extra)
                cost = cost + extra_cost

        rows, fused = fuse(views, config.fusion_mode, config.rrf_k)
        question_day = to_days(question.question_date)
        terms = self._ranking_terms(state, config, question_day, info.terms)
        if config.reflection_rounds > 0 and len(rows):
            views, rows, fused = self._reflect(
                state, info, query_vector, keyword_scores, views, rows, fused, terms, config
            )
        span = question_span(text, question.question_date) if config.temporal_grounding_weight else None
        final = fused + terms[rows] + self._context_terms(extras, rows, fused, config, info.persons, span)
        order = rank_order(final, rows)
        rows, final = rows[order], final[order]
        if config.rerank_top_k > 0 and len(rows):
            rows, final, views = self._rerank(state, text, rows, final, views, config)
        return rows, final, views, sub_queries, cost

    def _swap_views(self, state: IndexState, stripped: str, config: RetrievalConfig) -> list[ViewHits]:
        """Entity swap: the question without its person names, as a semantic and a keyword view."""
        return [
            top_k(
                "swap_semantic",
                state.embeddings @ self._vector(stripped),
                config.entity_swap_semantic_top_k,
                config.semantic_weight,
            ),
            top_k(
                "swap_keyword",
                self._keyword_scores(state, self._analyse(stripped).tokens),
                config.entity_swap_keyword_top_k,
                config.keyword_weight,
                positive_only=True,
            ),
        ]

    def _rerank(
        self,
        state: IndexState,
        text: str,
        rows: np.ndarray,
        final: np.ndarray,
        views: list[ViewHits],
        config: RetrievalConfig,
    ) -> tuple[np.ndarray, np.ndarray, list[ViewHits]]:
        """The first `rerank_top_k` ranked rows reordered by the cross-encoder's blend
        (retrieval/rerank.py); its own order is kept as the `rerank` view."""
        if self.reranker is None:
            raise ConfigError(NO_RERANKER)
        top = min(config.rerank_top_k, len(rows))
        head = rows[:top]
        model_scores = self.reranker.scores(text, [state.memories[r].content for r in head.tolist()])
        moved = blended_order(model_scores, config.rerank_weight)
        by_model = np.argsort(-model_scores, kind="stable")
        views = [*views, ViewHits("rerank", head[by_model], model_scores[by_model])]
        rows = np.concatenate([head[moved], rows[top:]])
        final = np.concatenate([final[:top][moved], final[top:]])
        return rows, final, views

    @staticmethod
    def _depth(extras: _StateExtras, config: RetrievalConfig) -> Callable[[int], int]:
        """A view's candidate count: its top-k, and with a token budget at least as many as it
        takes to fill the budget with the conversation's shortest memories — so no view size
        binds below the budget (a view's top-k still deepens it)."""
        budget = config.ranking_limit
        floor = -(-budget // max(extras.min_tokens, 1)) if budget else 0
        return lambda k: max(k, floor)

    def _context_terms(
        self,
        extras: _StateExtras,
        rows: np.ndarray,
        fused: np.ndarray,
        config: RetrievalConfig,
        persons: Sequence[str],
        span: tuple[float, float] | None = None,
    ) -> np.ndarray:
        """Terms that reorder candidates by where they sit, added to the fused score:

        - session prior: the best fused score among the candidates of the memory's session
          (a session that holds a strong match is likely to hold the rest of the answer);
        - neighbour: the best fused score of the memory's neighbours in its session (an answer
          often sits next to the turn that matches the question's words);
        - person focus: 1 for memories by or about the one person the question names, if it names
          one (the person among the memory's annotated persons, locations and entities);
        - temporal grounding: 1 for memories dated inside the span the question's date phrase
          points at (retrieval/temporal.py), if it names one."""
        out = np.zeros(len(rows))
        if not len(rows):
            return out
        session = extras.session[rows]
        if config.session_prior_weight:
            best = np.zeros(extras.n_sessions)
            np.maximum.at(best, session, fused)
            out += config.session_prior_weight * best[session]
        if config.neighbour_weight:
            n = len(extras.session)
            full = np.zeros(n + 2)
            full[rows + 1] = fused
            codes = np.concatenate([[-1], extras.session, [-1]])
            left = np.where(codes[rows] == session, full[rows], 0.0)
            right = np.where(codes[rows + 2] == session, full[rows + 2], 0.0)
            out += config.neighbour_weight * np.maximum(left, right)
        if config.person_focus_weight and len(persons) == 1:
            out += config.person_focus_weight * extras.person_mask(persons[0])[rows]
        if span is not None:
            days = extras.state.timestamp_days[rows]
            out += config.temporal_grounding_weight * ((days >= span[0]) & (days <= span[1]))
        return out

    def _request(
        self, state: IndexState, question: Question, info: _QueryInfo, vector: np.ndarray, config: RetrievalConfig
    ) -> ViewRequest:
        def keyword_scores(tokens: Sequence[str]) -> np.ndarray:
            return self._keyword_scores(state, tokens)

        def embed(texts: Sequence[str]) -> np.ndarray:
            self._embed(texts)
            return np.stack([self._vectors[t] for t in texts]) if texts else np.zeros((0, state.embeddings.shape[1]))

        return ViewRequest(state, question, info.tokens, info.terms, vector, config, embed, keyword_scores, self.llm)

    def _source_cache(self, name: str, state: IndexState) -> SourceCache:
        """Per (source, index state) scratch space; a new state (after re-extraction) starts empty."""
        with self._lock:
            key = (name, id(state))
            if key not in self._source_caches or self._source_caches[key][0] is not state:
                self._source_caches[key] = (state, {})
            return self._source_caches[key][1]

    @staticmethod
    def _keyword_scores(state: IndexState, tokens: Sequence[str]) -> np.ndarray:
        """BM25 of `tokens` against every memory of `state`."""
        return state.keyword.scores(state.keyword.token_ids(tokens), len(state.memories))

    @staticmethod
    def _ranking_terms(
        state: IndexState, config: RetrievalConfig, question_day: float, query_terms: Sequence[str] = ()
    ) -> np.ndarray:
        """Importance, recency and reinforcement terms of every memory (once per question: the
        follow-up rounds and the final ranking index it by their candidate rows).

        Reinforcement is the memory's stored reinforcement plus +0.05 per entity it shares with
        this query, capped at 0.30 — computed per query, so retrieval stays a pure function and
        one question never changes the ranking of another."""
        n = len(state.memories)
        rec = (
            recency(state.timestamp_days, question_day, config.time_decay_half_life_days)
            if config.recency_weight
            else np.zeros(n)
        )
        reinforcement = state.reinforcement
        if config.reinforcement_weight and query_terms:
            shared = state.structured.counts(query_terms, n)
            reinforcement = reinforcement + np.minimum(REINFORCEMENT_STEP * shared, REINFORCEMENT_CAP)
        return final_scores(
            np.zeros(n),
            state.importance,
            rec,
            reinforcement,
            config.importance_weight,
            config.recency_weight,
            config.reinforcement_weight,
        )

    def _semantic_keyword(
        self,
        state: IndexState,
        vector: np.ndarray | None,
        keyword_scores: np.ndarray | None,
        k_semantic: int,
        k_keyword: int,
        k_keep: int,
        config: RetrievalConfig,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Semantic + keyword hits of one derived query (its BM25 scores over every memory),
        fused; the best `k_keep` as (rows, score)."""
        parts = []
        if vector is not None and k_semantic > 0:
            parts.append(top_k("semantic", state.embeddings @ vector, k_semantic, config.semantic_weight))
        if k_keyword > 0 and keyword_scores is not None:
            parts.append(top_k("keyword", keyword_scores, k_keyword, config.keyword_weight, positive_only=True))
        rows, scores = fuse(parts, config.fusion_mode, config.rrf_k)
        keep = rank_order(scores, rows)[:k_keep]
        return rows[keep], scores[keep]

    def _sub_query_view(self, state: IndexState, sub_queries: Sequence[str], config: RetrievalConfig) -> ViewHits:
        k = config.decomposition_merge_top_k
        self._embed(sub_queries)
        lists = [
            self._semantic_keyword(
                state, self._vector(s), self._keyword_scores(state, self._analyse(s).tokens), k, k, k, config
            )
            for s in sub_queries
        ]
        return merge_max("sub_query", lists)

    def _reflect(
        self,
        state: IndexState,
        info: _QueryInfo,
        query_vector: np.ndarray,
        keyword_scores: np.ndarray | None,
        views: list[ViewHits],
        rows: np.ndarray,
        fused: np.ndarray,
        terms: np.ndarray,
        config: RetrievalConfig,
    ) -> tuple[list[ViewHits], np.ndarray, np.ndarray]:
        """Follow-up retrieval: the query plus what its current best memories are about.
        `keyword_scores` are the question's own BM25 scores (None without a keyword view); each
        round extends them by its new terms."""
        keyword = state.keyword
        query_ids = set(keyword.token_ids(info.tokens))
        k_keep = max(config.semantic_top_k, config.keyword_top_k)
        found: list[tuple[np.ndarray, np.ndarray]] = []
        for _ in range(config.reflection_rounds if k_keep else 0):
            current = fused + terms[rows]
            seeds = rows[rank_order(current, rows)[:REFLECTION_SEEDS]]
            new_terms = self._salient_terms(state, seeds, query_ids)
            if not new_terms:
                break
            query_ids.update(new_terms)
            if keyword_scores is not None:  # the query grows by the new terms: add their postings
                keyword_scores = keyword.extended(keyword_scores, new_terms)
            centroid = query_vector + state.embeddings[seeds].mean(axis=0)
            centroid = (centroid / max(float(np.linalg.norm(centroid)), 1e-12)).astype(np.float32)
            found.append(
                self._semantic_keyword(
                    state, centroid, keyword_scores, config.semantic_top_k, config.keyword_top_k, k_keep, config
                )
            )
            reflection = merge_max("reflection", found)
            views = [v for v in views if v.label != "reflection"] + [reflection]
            rows, fused = fuse(views, config.fusion_mode, config.rrf_k)
        return views, rows, fused

    @staticmethod
    def _salient_terms(state: IndexState, seeds: np.ndarray, exclude: set[int]) -> list[int]:
        """Terms of the seed memories that also occur elsewhere (so they can lead somewhere),
        ranked by how many seeds share them times their idf; at most REFLECTION_TERMS."""
        keyword = state.keyword
        if not len(seeds) or not len(keyword.token_idf):
            return []
        ids, shared = np.unique(np.concatenate([keyword.doc_token_ids[s] for s in seeds.tolist()]), return_counts=True)
        fresh = np.fromiter((i not in exclude for i in ids.tolist()), bool, len(ids))  # a few dozen ids
        keep = (keyword.token_df[ids] >= 2) & fresh
        ids, shared = ids[keep], shared[keep]
        order = rank_order(shared * keyword.token_idf[ids], ids)[:REFLECTION_TERMS]
        ordered: list[int] = ids[order].tolist()
        return ordered

    @staticmethod
    def _items(
        state: IndexState, rows: np.ndarray, scores: np.ndarray, views: Sequence[ViewHits]
    ) -> list[RetrievedItem]:
        """The ranked rows as items, each labelled with its rank in every view that holds it."""
        row_list = rows.tolist()
        labels: dict[int, dict[str, int]] = {row: {} for row in row_list}
        for view in views:  # one pass over each view (labels in view order, as the views came)
            label = view.label
            for rank, of_row in enumerate(map(labels.get, view.rows.tolist()), start=1):
                if of_row is not None:
                    of_row[label] = rank
        memories = state.memories
        return [
            RetrievedItem(memories[row], score, rank, labels[row])
            for rank, (row, score) in enumerate(zip(row_list, scores.tolist()), start=1)
        ]

    @staticmethod
    def _cut(
        state: IndexState,
        items: list[RetrievedItem],
        config: RetrievalConfig,
        sub_queries: tuple[str, ...],
        cost: Usage,
    ) -> RetrievalResult:
        """The context `config` takes of the ranked `items` (its token limit, its order)."""
        keep = within_budget(items, config.max_context, config.token_limit)
        if config.context_score_floor:
            keep = above_floor(items[:keep], config.context_score_floor)
        context, cut = items[:keep], items[keep:]
        if config.context_order == "chronological":
            days = state.timestamp_days
            row_of = state.row_of_id

            def when(item: RetrievedItem) -> tuple[float, int]:
                row = row_of[item.memory.memory_id]
                return (np.inf if np.isnan(days[row]) else days[row], row)

            context = sorted(context, key=when)
        return RetrievalResult(tuple(context), tuple(cut), sub_queries, cost)
