"""Retrieval latency on every dev LoCoMo question.

    python benchmarks/retrieval_latency.py [--data PATH] [--repeats 3] [--config LABEL=CONFIG ...]
        [--context-tokens 1500] [--rerank-model PATH_OR_NAME] [--second-embedding-model PATH_OR_NAME]

Prints: first-time embedding of all memories (fresh temporary cache), the cached reload, the
index build per conversation, question preparation (analysis + batch embedding, not part of
the timed loop), then the per-question retrieval time for the default views (semantic +
keyword + structured, rrf, entity swap on) and for the weak preset (BM25 only) as a baseline,
best of `--repeats` passes. Each `--config` (a preset, a TOML file or a run's best_config.toml; e.g.
an evolved config with late interaction) is timed the same way with its contexts cut at
`--context-tokens`, after its own preparation — for late interaction the questions' token vectors
and their MaxSim against every memory, computed in one batch per conversation — which is printed
apart per question, as is the first-time encoding of the memories' token vectors. With
`--rerank-model`, a config that reranks (`rerank_top_k` > 0) is timed twice more — once with the
cross-encoder reading every question's candidates for the first time, once reading them from its
memo — and the cross-encoder's cost per question is printed apart from retrieval's. With
`--second-embedding-model`, that model's load and first-time embedding of every memory (its own
fresh temporary cache) and its cached reload are printed, and for a config that uses the second
dense view (`second_semantic_top_k` > 0) its cost is printed apart: the questions' encoding by the
second model (batched, as preparation does it) and the view's share of retrieval (the config timed
again with the view off globally). The last line is `retrieval_ms_per_question=<x>` (the three-view
config).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evolvemem.space.budget import TokenBudget  # noqa: E402
from evolvemem.mechanisms import candidate_sources  # noqa: E402
from evolvemem.data.locomo import load_locomo  # noqa: E402
from evolvemem.memory.offline_extract import OfflineExtractor  # noqa: E402
from evolvemem.retrieval.embeddings import Embedder  # noqa: E402
from evolvemem.retrieval.index import ConversationIndex  # noqa: E402
from evolvemem.retrieval.latency import timed_pass as shared_timed_pass  # noqa: E402
from evolvemem.retrieval.retriever import Retriever  # noqa: E402
from evolvemem.retrieval.second_embedder import SecondEmbedder, uses_second_view  # noqa: E402
from evolvemem.space.config import load_config  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo10_dev8.json"


def timed_pass(retrievers: dict, questions: list, config) -> float:
    """Seconds to retrieve every question once: the package's timer (evolvemem/retrieval/latency.py),
    the one a run's cost meter uses, over each question's conversation's retriever."""
    return shared_timed_pass(lambda q, _effective: retrievers[q.conversation_id], questions, config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--config", action="append", default=[], metavar="LABEL=CONFIG")
    parser.add_argument("--context-tokens", type=int, default=1500)
    parser.add_argument("--rerank-model", help="a sentence-transformers CrossEncoder for configs that rerank")
    parser.add_argument("--second-embedding-model", help="a second sentence-transformers model for its dense view")
    args = parser.parse_args()
    if not args.data.is_file():
        sys.exit(f"LoCoMo file not found: {args.data}")

    dataset = load_locomo(args.data)
    extractor = OfflineExtractor()
    memories = {cid: extractor.extract(conv)[0] for cid, conv in dataset.conversations.items()}
    questions = dataset.questions
    n_memories = sum(len(m) for m in memories.values())
    print(
        f"data: {len(dataset.conversations)} conversations, {n_memories} memories (one per turn), "
        f"{len(questions)} questions"
    )

    with tempfile.TemporaryDirectory() as fresh_cache:
        embedder = Embedder(cache_root=Path(fresh_cache))
        started = time.perf_counter()
        _ = embedder.encoder
        load_s = time.perf_counter() - started
        texts = [m.content for units in memories.values() for m in units]
        started = time.perf_counter()
        embedder.encode(texts)
        embed_s = time.perf_counter() - started
        print(
            f"model load: {load_s:.2f} s; first-time embedding of {embedder.texts_embedded} memories: "
            f"{embed_s:.2f} s ({embed_s / max(embedder.texts_embedded, 1) * 1000:.2f} ms/text)"
        )
        reloaded = Embedder(cache_root=Path(fresh_cache))
        started = time.perf_counter()
        reloaded.encode(texts)
        print(
            f"cached reload of {len(texts)} embeddings (new process state, from disk): "
            f"{(time.perf_counter() - started) * 1000:.1f} ms, model calls: {reloaded.texts_embedded}"
        )

        build_s = []
        indexes = {}
        for cid, units in memories.items():
            started = time.perf_counter()
            indexes[cid] = ConversationIndex.build(units, reloaded, dataset.conversations[cid].speakers)
            build_s.append(time.perf_counter() - started)
        print(
            f"index build per conversation (embeddings cached): mean {statistics.mean(build_s) * 1000:.1f} ms, "
            f"max {max(build_s) * 1000:.1f} ms"
        )

        second = second_model(args.second_embedding_model, Path(fresh_cache) / "second", texts)

        from evolvemem.retrieval.rerank import CrossEncoderReranker

        reranker = CrossEncoderReranker(args.rerank_model) if args.rerank_model else None
        if reranker is not None:
            reranker.check()
        retrievers = {
            cid: Retriever(
                index,
                reloaded,
                known_persons=dataset.conversations[cid].speakers,
                reranker=reranker,
                sources=candidate_sources(),
                second_embedder=second,
            )
            for cid, index in indexes.items()
        }
        by_conv: dict[str, list] = {}
        for q in questions:
            by_conv.setdefault(q.conversation_id, []).append(q)
        started = time.perf_counter()
        for cid, qs in by_conv.items():
            retrievers[cid].prepare(qs)
        print(
            f"prepare (analyse + embed {len(questions)} questions and their name-stripped forms, "
            f"not timed below): {time.perf_counter() - started:.2f} s"
        )

        default, _ = load_config("default")
        full, _ = default.with_changes({"fusion_mode": "rrf", "enable_entity_swap": True})
        weak, _ = load_config("weak")
        timings = {}
        for label, config in (("weak (BM25 only)", weak), ("three views + rrf + entity swap", full)):
            timed_pass(retrievers, questions, config)  # warm-up
            best = min(timed_pass(retrievers, questions, config) for _ in range(max(1, args.repeats)))
            timings[label] = best * 1000 / len(questions)
            print(f"{label}: {timings[label]:.3f} ms/question (best of {args.repeats})")
        baseline, ours = timings["weak (BM25 only)"], timings["three views + rrf + entity swap"]
        print(f"ratio full / weak: {ours / baseline:.2f}x")
        for item in args.config:
            label, _, source = item.partition("=")
            config = load_config(source)[0].with_budget(TokenBudget(args.context_tokens))
            late = any(config.for_type(q.question_type).late_top_k for q in questions)
            if second is not None and uses_second_view(config):
                embedded = second.texts_embedded
                started = time.perf_counter()
                second.of_questions([q.text for q in questions])  # what preparation does, in one batch
                second_queries = (time.perf_counter() - started) * 1000 / len(questions)
                second_queries_new = second.texts_embedded - embedded
            started = time.perf_counter()
            if late:
                reloaded.tokens.of_queries([q.text for q in questions])
            query_tokens = (time.perf_counter() - started) * 1000 / len(questions)
            encoded = reloaded.tokens.texts_encoded
            started = time.perf_counter()
            for cid, qs in by_conv.items():
                retrievers[cid].prepare(qs, config)
            prepared = (time.perf_counter() - started) * 1000 / len(questions)
            new_memories = reloaded.tokens.texts_encoded - encoded
            if late:  # the memories' token vectors now come from the cache: time MaxSim alone
                fresh = {
                    cid: Retriever(
                        indexes[cid],
                        reloaded,
                        known_persons=dataset.conversations[cid].speakers,
                        sources=candidate_sources(),
                    )
                    for cid in by_conv
                }
                for cid, qs in by_conv.items():
                    fresh[cid].prepare(qs)
                    fresh[cid].prepare(qs[:1], config)  # assembles the conversation's token matrix
                started = time.perf_counter()
                for cid, qs in by_conv.items():
                    fresh[cid].prepare(qs[1:], config)
                maxsim = (time.perf_counter() - started) * 1000 / max(len(questions) - len(by_conv), 1)
                print(
                    f"{label}: question token vectors {query_tokens:.2f} ms/question (the query-side encoding, "
                    f"batched); memories' token vectors first time: {prepared:.2f} ms/question "
                    f"({new_memories} memories); MaxSim of every question against every memory, batched per "
                    f"conversation (token matrix already assembled): {maxsim:.2f} ms/question"
                )
            if reranker is not None and config.rerank_top_k > 0:
                pairs = reranker.pairs_scored
                first = timed_pass(retrievers, questions, config) * 1000 / len(questions)
                memo = min(timed_pass(retrievers, questions, config) for _ in range(max(1, args.repeats)))
                memo = memo * 1000 / len(questions)
                print(
                    f"{label}: cross-encoder {args.rerank_model}: {first - memo:.2f} ms/question reading "
                    f"{(reranker.pairs_scored - pairs) / len(questions):.1f} pairs a question the first time "
                    f"(retrieval with its scores memoised: {memo:.3f} ms/question)"
                )
            timed_pass(retrievers, questions, config)  # warm-up
            best = min(timed_pass(retrievers, questions, config) for _ in range(max(1, args.repeats)))
            per_question = best * 1000 / len(questions)
            print(
                f"{label} at {args.context_tokens} tokens: retrieval {per_question:.3f} ms/question after "
                f"preparation (best of {args.repeats}), {per_question / baseline:.2f}x BM25 only"
            )
            if second is not None and uses_second_view(config):
                without, _ = config.with_changes({"second_semantic_top_k": 0})
                timed_pass(retrievers, questions, without)  # warm-up
                off = min(timed_pass(retrievers, questions, without) for _ in range(max(1, args.repeats)))
                print(
                    f"{label}: second dense view ({args.second_embedding_model}): question encoding "
                    f"{second_queries:.2f} ms/question (batched; {second_queries_new} questions reached the model, "
                    f"the rest came from its cache); its share of retrieval "
                    f"{per_question - off * 1000 / len(questions):.3f} ms/question (the config with the view off: "
                    f"{off * 1000 / len(questions):.3f} ms/question)"
                )
        print(f"weak_retrieval_ms_per_question={baseline:.3f}")
        print(f"retrieval_ms_per_question={ours:.3f}")


def second_model(model: str | None, cache: Path, texts: list[str]) -> SecondEmbedder | None:
    """The second embedding model with a fresh cache, its memory vectors embedded and reloaded
    (each timed), or None without one."""
    if not model:
        return None
    first = SecondEmbedder(Embedder(model, cache_root=cache))
    started = time.perf_counter()
    _ = first.embedder.encoder
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    first.of_memories(texts)
    embed_s = time.perf_counter() - started
    print(
        f"second embedding model {model}: load {load_s:.2f} s; first-time embedding of {first.texts_embedded} "
        f"memories: {embed_s:.2f} s ({embed_s / max(first.texts_embedded, 1) * 1000:.2f} ms/text)"
    )
    reloaded = SecondEmbedder(Embedder(model, cache_root=cache))
    started = time.perf_counter()
    reloaded.of_memories(texts)
    print(
        f"second model's cached reload of {len(texts)} vectors: {(time.perf_counter() - started) * 1000:.1f} ms, "
        f"model calls: {reloaded.texts_embedded}"
    )
    return reloaded


if __name__ == "__main__":
    main()
