"""Scene-guided retrieval with a sufficiency check (after EverMemOS), offline.

Why: a question's evidence often sits next to the memory that matches it best (the answer to
a question asked two turns earlier, a follow-up that never repeats the topic words). Grouping
memories into *episodes* (runs of one session on one topic) and episodes into *scenes* (the
same topic recurring across sessions within a few days) lets retrieval pick the right scenes
first and then search deeper inside them than the flat top-k views can afford to.

Built lazily per index state and kept in the source's cache:

- episodes: each session's memories in time order, cut where the cosine of neighbouring
  memories falls clearly below the session's usual neighbour similarity (mean − CUT_STD · std;
  relative, so it holds for embedders whose cosines run high or low). An episode's atomic
  facts are its memories.
- scenes (per `scene_similarity`, `scene_max_gap_days`): episodes in time order; one joins the
  scene whose centroid is nearest if the cosine is ≥ `scene_similarity` and that scene has a
  member within `scene_max_gap_days`, otherwise it starts a new scene.

Per question: every memory gets the rank fusion (rrf) of its dense and BM25 ranks; a scene
scores its best member; the `scene_top_n` best scenes are pooled and their memories reranked
by the same score; the best `scene_top_k` form the view `scene`.

Sufficiency (`scene_sufficiency_rounds` > 0): rank-fusion scores say nothing absolute, so the
check reads the dense cosine of the best pooled memory. Below SUFFICIENT_COSINE the question is
rewritten (keywords only; person names stripped; the question plus the top scene's salient
terms), each rewrite is searched the same way, and the merged result is the view
`scene_rewrite`; a second round uses the salient terms of the scene the rewrites found.

LLM variant (`scene_llm` and the retriever has a model; otherwise everything above, unchanged):

- each episode gets a narrative (narrative.narrate_episode over its memories; written once per
  index state, concurrently, and replayed from the LLM response cache afterwards), and the
  narrative's embedding replaces the memory centroid as the episode's vector for clustering;
- the sufficiency check is the model's: prompts/sufficiency.md reads the question and the best
  pooled memories and answers {"sufficient": bool, "queries": [2-3 rewrites]}; the rewrites
  are searched like the offline ones, within the same round cap. A failed call or a reply
  without a verdict falls back to the offline rule for that round. Every call's cost is
  returned with the view (the narratives' cost by the first question that uses them).

Foresight items (EverMemOS's time-bounded predictions) are their own source: foresight.py.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from evolvemem.retrieval.source_cache import SourceCache, cached
from evolvemem.memory.granularity import topic_segments
from evolvemem.retrieval.fusion import ViewHits, merge_max, rank_order
from evolvemem.contracts.usage import Usage

if TYPE_CHECKING:
    from evolvemem.retrieval.extensions import ViewRequest
    from evolvemem.space.config import RetrievalConfig

CUT_STD = 1.0  # an episode ends where neighbour cosine < session mean − CUT_STD · std
MIN_EPISODE = 2  # no cut leaves an episode shorter than this
MAX_EPISODE = 12  # memories per episode at most (a long single-topic run is still split)
EPISODE_CONTEXT = 0.5  # share of its episode's best score a pooled memory inherits
SUFFICIENT_COSINE = 0.5  # best pooled memory's cosine with the question that counts as enough
SALIENT_TERMS = 5  # top-scene terms added to the question in the expansion rewrite
MAX_SUFFICIENCY_ROUNDS = 2
MAX_LLM_REWRITES = 3  # rewritten queries taken from one sufficiency reply
SUFFICIENCY_SHOWN = 10  # pooled memories the sufficiency prompt shows
SUFFICIENCY_MAX_TOKENS = 200
NARRATION_WORKERS = 8  # concurrent narrative calls while an index state's episodes are narrated


@dataclass(frozen=True)
class Groups:
    """A partition of memory rows: `rows[starts[g]:starts[g+1]]` are group g's rows; `of_row`
    maps a row to its group."""

    rows: np.ndarray
    starts: np.ndarray
    of_row: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def members(self, group: int) -> np.ndarray:
        end = self.starts[group + 1] if group + 1 < len(self.starts) else len(self.rows)
        return self.rows[self.starts[group] : end]


@dataclass(frozen=True)
class Episodes:
    groups: Groups  # in time order
    vectors: np.ndarray  # (m, d) unit centroid of each episode
    days: np.ndarray  # median day of each episode's dated memories (NaN when none)


def _groups(lists: Sequence[Sequence[int]], n_rows: int) -> Groups:
    rows = np.array([r for group in lists for r in group], dtype=np.int64)
    sizes = np.array([len(g) for g in lists], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if len(lists) else np.zeros(0, np.int64)
    of_row = np.full(n_rows, -1, dtype=np.int64)
    of_row[rows] = np.repeat(np.arange(len(lists)), sizes)
    return Groups(rows, starts, of_row)


def _unit(vector: np.ndarray) -> np.ndarray:
    return (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32)


def build_episodes(state: Any) -> Episodes:
    """Cut each session (in time order) at its topic shifts."""
    days = state.timestamp_days
    when = np.where(np.isnan(days), np.inf, days)
    sessions: dict[str, list[int]] = {}
    for row, unit in enumerate(state.memories):
        sessions.setdefault(unit.session_id, []).append(row)
    ordered = sorted(sessions.values(), key=lambda rows: (min(when[r] for r in rows), rows[0]))
    episodes: list[list[int]] = []
    for rows in ordered:
        rows = sorted(rows, key=lambda r: (when[r], r))
        for run in topic_segments(state.embeddings[rows], cut_std=CUT_STD, min_len=MIN_EPISODE, max_len=MAX_EPISODE):
            episodes.append([rows[i] for i in run])
    groups = _groups(episodes, len(state.memories))
    vectors = np.stack([_unit(state.embeddings[e].mean(axis=0)) for e in episodes])
    return Episodes(groups, vectors, np.array([_median_day(days[e]) for e in episodes]))


def _median_day(days: np.ndarray) -> float:
    dated = days[~np.isnan(days)]
    return float(np.median(dated)) if len(dated) else np.nan


def cluster_scenes(episodes: Episodes, similarity: float, max_gap_days: float) -> Groups:
    """Incremental clustering of episodes in time order (see the module docstring)."""
    m, dim = episodes.vectors.shape
    sums = np.zeros((m, dim), dtype=np.float64)
    centroids = np.zeros((m, dim), dtype=np.float32)
    scene_days: list[list[float]] = []
    scene_of_episode = np.zeros(m, dtype=np.int64)
    count = 0
    for e in range(m):
        vector, day = episodes.vectors[e], episodes.days[e]
        target = -1
        if count:
            sims = centroids[:count] @ vector
            nearest = int(np.argmax(sims))
            dated = [d for d in scene_days[nearest] if not np.isnan(d)]
            near_in_time = np.isnan(day) or not dated or min(abs(d - day) for d in dated) <= max_gap_days
            if sims[nearest] >= similarity and near_in_time:
                target = nearest
        if target < 0:
            target = count
            count += 1
            scene_days.append([])
        sums[target] += vector
        centroids[target] = _unit(sums[target])
        scene_days[target].append(day)
        scene_of_episode[e] = target
    members: list[list[int]] = [[] for _ in range(count)]
    for e in range(m):
        members[scene_of_episode[e]].extend(episodes.groups.members(e).tolist())
    return _groups([sorted(rows) for rows in members], len(episodes.groups.of_row))


def fact_scores(state: Any, vector: np.ndarray, keyword: np.ndarray, config: RetrievalConfig) -> np.ndarray:
    """Rank fusion of the dense and BM25 ranks of every memory (no BM25 match adds nothing)."""
    return rank_fusion(state.embeddings @ vector, keyword, config)


def rank_fusion(dense: np.ndarray, keyword: np.ndarray, config: RetrievalConfig) -> np.ndarray:
    """rrf of two score vectors over the same candidates, weighted like the semantic and
    keyword views; a candidate without a BM25 match gets nothing from the keyword side."""
    n, k = len(dense), float(config.rrf_k)
    ranks = np.empty(n, dtype=np.float64)
    ranks[rank_order(dense)] = np.arange(1, n + 1)
    scores: np.ndarray = max(config.semantic_weight, 0.0) / (k + ranks)
    matched = keyword > 0
    if matched.any():
        ranks[rank_order(keyword)] = np.arange(1, n + 1)
        scores = scores + matched * (max(config.keyword_weight, 0.0) / (k + ranks))
    return scores


def scene_select(
    scenes: Groups, episodes: Groups, scores: np.ndarray, top_n: int, top_k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The best `top_k` memories (rows, scores) of the `top_n` scenes with the best member.

    In the pool a memory scores its own fusion score plus EPISODE_CONTEXT times the best score
    of its episode, so the untold half of an exchange rises with the half that matched."""
    best = np.maximum.reduceat(scores[scenes.rows], scenes.starts)
    chosen = rank_order(best)[:top_n]
    pool = np.flatnonzero(np.isin(scenes.of_row, chosen))
    pooled = scores[pool]
    if EPISODE_CONTEXT:
        episode_best = np.maximum.reduceat(scores[episodes.rows], episodes.starts)
        pooled = pooled + EPISODE_CONTEXT * episode_best[episodes.of_row[pool]]
    keep = rank_order(pooled, pool)[:top_k]
    return pool[keep], pooled[keep]


def salient_terms(state: Any, rows: np.ndarray, exclude: Sequence[str]) -> list[str]:
    """Terms of `rows` that recur elsewhere too, by (members sharing it × idf)."""
    keyword = state.keyword
    if not len(rows) or not len(keyword.token_idf):
        return []
    ids, shared = np.unique(np.concatenate([keyword.doc_token_ids[r] for r in rows.tolist()]), return_counts=True)
    excluded = np.array(keyword.token_ids(exclude), dtype=np.int64)
    keep = (keyword.token_df[ids] >= 2) & ~np.isin(ids, excluded)
    ids, shared = ids[keep], shared[keep]
    order = rank_order(shared * keyword.token_idf[ids], ids)[:SALIENT_TERMS]
    return [keyword.id_to_token[i] for i in ids[order].tolist()]


def episode_date(state: Any, rows: np.ndarray) -> str | None:
    """The day an episode starts, as people write it ("8 May 2023"), or None when undated."""
    from evolvemem.data.dates import format_day

    stamps = [state.memories[r].timestamp for r in rows.tolist() if state.memories[r].timestamp is not None]
    return format_day(min(stamps)) if stamps else None


def narrate_episodes(
    state: Any, episodes: Episodes, client: Any, embed: Callable[[Sequence[str]], np.ndarray]
) -> tuple[Episodes, list[str], Usage]:
    """Every episode's narrative (concurrently, NARRATION_WORKERS at a time) and the episodes
    with the narratives' embeddings as their vectors."""
    from evolvemem.memory.narrative import narrate_episode

    def narrate(e: int) -> tuple[str, Usage]:
        rows = episodes.groups.members(e)
        return narrate_episode(client, [state.memories[r].content for r in rows.tolist()], episode_date(state, rows))

    with ThreadPoolExecutor(max_workers=NARRATION_WORKERS) as pool:
        written = list(pool.map(narrate, range(len(episodes.groups))))
    narratives = [text for text, _ in written]
    cost = sum((c for _, c in written), Usage())
    vectors = np.asarray(embed(narratives), dtype=np.float32)
    return replace(episodes, vectors=vectors), narratives, cost


def parse_sufficiency(parsed: Any) -> tuple[bool, list[str]]:
    """{"sufficient": bool, "queries": [...]} → (sufficient, up to MAX_LLM_REWRITES queries).

    A verdict of "not sufficient" without a usable query is no verdict (ValueError)."""
    if not isinstance(parsed, dict) or "sufficient" not in parsed:
        raise ValueError("no 'sufficient' field")
    verdict = parsed["sufficient"]
    if isinstance(verdict, str) and verdict.strip().lower() in ("true", "yes", "false", "no"):
        verdict = verdict.strip().lower() in ("true", "yes")
    if not isinstance(verdict, bool):
        raise ValueError(f"'sufficient' is {verdict!r}, not true or false")
    raw = parsed.get("queries") or []
    if not isinstance(raw, list):
        raise ValueError("'queries' is not a list")
    queries = list(dict.fromkeys(q.strip() for q in raw if isinstance(q, str) and q.strip()))
    if not verdict and not queries:
        raise ValueError("not sufficient, but no rewritten query")
    return verdict, queries[:MAX_LLM_REWRITES]


def judge_sufficiency(
    client: Any, question: str, memories: Sequence[str]
) -> tuple[tuple[bool, list[str]] | None, Usage]:
    """The model's sufficiency verdict and rewrites, or None (with the cost paid) when unusable."""
    from evolvemem.llm.ask import ask_json
    from evolvemem.prompts import load_prompt

    shown = "\n".join(f"{i}. {text}" for i, text in enumerate(memories, start=1)) or "(none)"
    prompt = load_prompt("sufficiency").render(question=question, memories=shown)
    return ask_json(client, prompt, role="sufficiency", max_tokens=SUFFICIENCY_MAX_TOKENS, parse=parse_sufficiency)


@dataclass
class _Narrated:
    """An index state's narrated episodes and what writing them cost (reported once)."""

    episodes: Episodes
    narratives: list[str]
    cost: Usage
    reported: bool = False


class SceneSource:
    name = "scenes"

    def enabled(self, config: RetrievalConfig) -> bool:
        return config.scene_top_k > 0

    def hits(self, request: ViewRequest, cache: SourceCache) -> tuple[list[ViewHits], Usage]:
        config, state = request.config, request.state
        client = request.llm if config.scene_llm else None
        if client is None:
            episodes, cost = self._episodes(state, cache), Usage()
        else:
            episodes, cost = self._narrated(request, cache, client)
        scenes = self._scenes(cache, config, episodes, narrated=client is not None)
        top_n, top_k = config.scene_top_n, config.scene_top_k
        scores = fact_scores(state, request.query_vector, request.keyword_scores(request.tokens), config)
        rows, picked = scene_select(scenes, episodes.groups, scores, top_n, top_k)
        views = [ViewHits("scene", rows, picked)]
        rounds = min(config.scene_sufficiency_rounds, MAX_SUFFICIENCY_ROUNDS)
        if rounds > 0 and len(rows):
            if client is not None:
                view, judged = self._llm_rewrite_view(
                    request, cache, client, episodes.groups, scenes, (rows, picked), rounds
                )
                cost = cost + judged
                views.extend([view] if view is not None else [])
            elif float(state.embeddings[rows[0]] @ request.query_vector) < SUFFICIENT_COSINE:
                views.append(self._rewrite_view(request, cache, episodes.groups, scenes, rows, rounds))
        return views, cost

    @staticmethod
    def _episodes(state: Any, cache: SourceCache) -> Episodes:
        return cached(cache, "episodes", lambda: build_episodes(state))

    def _narrated(self, request: ViewRequest, cache: SourceCache, client: Any) -> tuple[Episodes, Usage]:
        """Narrated episodes, written once per (index state, model) under a lock so concurrent
        questions never pay for the same narrative twice; the first question reports the cost."""
        key = ("narrated", getattr(client, "model", ""), getattr(client, "api_base", None))
        state = request.state
        with cached(cache, "narration_lock", threading.Lock):
            entry = cached(
                cache,
                key,
                lambda: _Narrated(*narrate_episodes(state, self._episodes(state, cache), client, request.embed)),
            )
            cost, entry.reported = (Usage() if entry.reported else entry.cost), True
        return entry.episodes, cost

    @staticmethod
    def _scenes(cache: SourceCache, config: RetrievalConfig, episodes: Episodes, narrated: bool) -> Groups:
        key = ("scenes", float(config.scene_similarity), float(config.scene_max_gap_days), narrated)
        return cached(cache, key, lambda: cluster_scenes(episodes, key[1], key[2]))

    @staticmethod
    def _fixed_rewrites(request: ViewRequest, cache: SourceCache) -> list[str]:
        """Keywords only and names stripped: they depend on the question alone, so memoised."""
        text = request.question.text
        memo = cached(cache, "rewrites", dict[str, list[str]])
        if text not in memo:
            from evolvemem.memory.nlp import annotate, strip_persons

            persons = annotate(text).persons
            stripped = strip_persons(text, persons) if persons else ""
            memo[text] = [q for q in (" ".join(request.tokens), stripped) if q.strip() and q != text]
        return memo[text]

    def _offline_rewrites(self, request: ViewRequest, cache: SourceCache, scenes: Groups, top_row: int) -> list[str]:
        """The fixed rewrites plus the question expanded with the salient terms of `top_row`'s scene."""
        extra = salient_terms(request.state, scenes.members(int(scenes.of_row[top_row])), request.tokens)
        return self._fixed_rewrites(request, cache) + ([f"{request.question.text} {' '.join(extra)}"] if extra else [])

    @staticmethod
    def _search(
        request: ViewRequest, episodes: Groups, scenes: Groups, queries: Sequence[str]
    ) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """Scene-guided search of each query: (rows, scores, cosine of its best row with the query)."""
        from evolvemem.memory.nlp import tokenize

        state, config = request.state, request.config
        out = []
        for query, vector in zip(queries, request.embed(list(queries))):
            scores = fact_scores(state, vector, request.keyword_scores(tokenize(query)), config)
            rows, picked = scene_select(scenes, episodes, scores, config.scene_top_n, config.scene_top_k)
            out.append((rows, picked, float(state.embeddings[rows[0]] @ vector) if len(rows) else -np.inf))
        return out

    def _rewrite_view(
        self, request: ViewRequest, cache: SourceCache, episodes: Groups, scenes: Groups, rows: np.ndarray, rounds: int
    ) -> ViewHits:
        config = request.config
        searched: set[str] = {request.question.text}
        found: list[tuple[np.ndarray, np.ndarray]] = []
        top_row = int(rows[0])
        for _ in range(rounds):
            queries = [
                q for q in dict.fromkeys(self._offline_rewrites(request, cache, scenes, top_row)) if q not in searched
            ]
            if not queries:
                break
            searched.update(queries)
            best_cosine, best_row = -np.inf, top_row
            for got_rows, got_scores, cosine in self._search(request, episodes, scenes, queries):
                found.append((got_rows, got_scores))
                if len(got_rows) and cosine > best_cosine:
                    best_cosine, best_row = cosine, int(got_rows[0])
            if best_cosine >= SUFFICIENT_COSINE:
                break
            top_row = best_row
        merged = merge_max("scene_rewrite", found)
        return ViewHits("scene_rewrite", merged.rows[: config.scene_top_k], merged.scores[: config.scene_top_k])

    def _llm_rewrite_view(
        self,
        request: ViewRequest,
        cache: SourceCache,
        client: Any,
        episodes: Groups,
        scenes: Groups,
        first: tuple[np.ndarray, np.ndarray],
        rounds: int,
    ) -> tuple[ViewHits | None, Usage]:
        """Up to `rounds` model verdicts on the best pooled memories; each "not sufficient" has
        its rewrites searched, and the next verdict reads what they found first, then the
        original pool. A round whose reply is unusable uses the offline rule (best cosine,
        offline rewrites) instead."""
        state, config, text = request.state, request.config, request.question.text
        searched: set[str] = {text}
        found: list[tuple[np.ndarray, np.ndarray]] = []
        shown, cost = first[0], Usage()
        for _ in range(rounds):
            top = shown[:SUFFICIENCY_SHOWN]
            verdict, paid = judge_sufficiency(client, text, [state.memories[r].content for r in top.tolist()])
            cost = cost + paid
            if verdict is None:
                enough = float(state.embeddings[top[0]] @ request.query_vector) >= SUFFICIENT_COSINE
                verdict = (enough, self._offline_rewrites(request, cache, scenes, int(top[0])))
            enough, proposed = verdict
            queries = [q for q in dict.fromkeys(proposed) if q not in searched]
            if enough or not queries:
                break
            searched.update(queries)
            found.extend((rows, scores) for rows, scores, _ in self._search(request, episodes, scenes, queries))
            rewritten = merge_max("scene_rewrite", found).rows  # what the rewrites found, then the rest
            shown = np.concatenate([rewritten, first[0][~np.isin(first[0], rewritten)]])
        if not found:
            return None, cost
        merged = merge_max("scene_rewrite", found)
        return ViewHits("scene_rewrite", merged.rows[: config.scene_top_k], merged.scores[: config.scene_top_k]), cost


SOURCE = SceneSource()
