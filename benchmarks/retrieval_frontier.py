"""Evidence recall at equal context tokens: plain baselines, presets and evolved configs, paired.

    python benchmarks/retrieval_frontier.py [--data PATH] [--split test]
        [--config LABEL=PRESET|TOML|RUN_DIR ...] [--evolved BUDGET=RUN_DIR ...]
        [--frontier-run RUN_DIR] [--second-embedding-model PATH_OR_NAME] [--encoder torch|onnx|onnx-int8]

On the split's answerable questions with gold evidence (LoCoMo categories 1-4), every system's
context is built by the evaluation path itself (`answering/contexts.py`, the same code `evolve eval
--context-tokens` runs) and cut at 600, 1,500 and 3,000 estimated tokens. Printed per system:
evidence recall at each budget, R@5/10/20 (recall of the first k ranked memories), recall per
category at 1,500 tokens, tokens used, and retrieval milliseconds per question (after the batch
preparation, which is printed apart); then each system's paired difference from the raw-turn
hybrid and from `default` at each budget: mean, 95% interval (conversations resampled, then
questions) and one-sided p of a gain.

Systems: raw-turn BM25, raw-turn dense, the `hybrid` preset (BM25 + dense, RRF k = 60, filled to
the budget), an independent plain hybrid written here in a few lines on the turns' bare text (a
check on our own), `default`, every `--config`, and with `--evolved 1500=runs/x` the best config
of a run evolved at that budget (scored at that budget; its row shows the other budgets too).
With `--frontier-run RUN_DIR` (an `evolve run --budgets` run) the row `frontier run` scores, at each
budget, that run's point there (`best_config.<budget>.toml`, ranked as the run ranked it; a budget
the run did not score takes its primary config), and a last table sets each budget's point beside
the separate `--evolved` run at that budget: both recalls and the paired difference.
With `--second-embedding-model`, configs may use the second dense view (`second_semantic_top_k`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._mechanisms import DEFAULT_DATA, load_locomo_file, offline_workspace  # noqa: E402

BUDGETS = (600, 1500, 3000)
RANKS = (5, 10, 20)
DEEP = 100_000  # a budget no context reaches: the whole ranking, for R@k


def plain_hybrid(ws: Any, questions: list, budget: int) -> dict[str, float]:
    """A raw-turn hybrid written without our retriever: bm25s and the embedder on "speaker: text",
    reciprocal-rank fusion (k = 60), turns taken in order until the next one would pass the budget."""
    import bm25s
    import numpy as np

    from evolvemem.memory.nlp import tokenize
    from evolvemem.retrieval.retriever import CONTEXT_LINE_TOKENS
    from evolvemem.llm.context_window import estimate_text_tokens
    from evolvemem.scoring.metrics import evidence_recall

    out: dict[str, float] = {}
    for conv_id, conv in ws.dataset.conversations.items():
        turns = conv.turns()
        texts = [f"{t.speaker}: {t.full_text}" for t in turns]
        vocab: dict[str, int] = {}
        corpus = [[vocab.setdefault(w, len(vocab)) for w in tokenize(text)] for text in texts]
        bm25 = bm25s.BM25()
        bm25.index((corpus, dict(vocab)), show_progress=False)
        vectors = ws.embedder.encode(texts)
        cost = np.array([estimate_text_tokens(text) + CONTEXT_LINE_TOKENS for text in texts])
        for q in (q for q in questions if q.conversation_id == conv_id):
            ids = [vocab[w] for w in tokenize(q.text) if w in vocab]
            fused = np.zeros(len(turns))
            for scores in (
                bm25.get_scores_from_ids(ids) if ids else np.zeros(len(turns)),
                vectors @ ws.embedder.encode([q.text])[0],
            ):
                fused[np.argsort(-scores, kind="stable")] += 1.0 / (60 + np.arange(1, len(turns) + 1))
            order = np.argsort(-fused, kind="stable")
            keep = order[: max(1, int(np.searchsorted(np.cumsum(cost[order]), budget, side="right")))]
            out[q.question_id] = evidence_recall(q.evidence, [turns[i].turn_id for i in keep]) or 0.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--split", default="test", choices=("dev", "test", "all"))
    parser.add_argument("--config", action="append", default=[], metavar="LABEL=CONFIG")
    parser.add_argument("--evolved", action="append", default=[], metavar="BUDGET=RUN_DIR")
    parser.add_argument("--frontier-run", type=Path, help="an evolve run --budgets directory: its point at each budget")
    parser.add_argument("--second-embedding-model", help="a second sentence-transformers model for configs that use it")
    parser.add_argument(
        "--encoder", choices=("torch", "onnx", "onnx-int8"), help="the embedding backend (default: evolve's own)"
    )
    args = parser.parse_args()
    if args.encoder:
        os.environ["EVOLVEMEM_ENCODER"] = args.encoder  # what the workspace's LocalModels resolve to

    import numpy as np

    from evolvemem.answering.contexts import evaluate_contexts
    from evolvemem.data.split import split_dataset
    from evolvemem.loop.paired import compare
    from evolvemem.scoring.metrics import evidence_recall
    from evolvemem.space.budget import TokenBudget
    from evolvemem.space.config import load_config

    dataset = split_dataset(load_locomo_file(args.data), args.split)
    questions = [q for q in dataset.questions if q.category not in dataset.adversarial_categories and q.evidence]
    started = time.perf_counter()
    ws = offline_workspace(dataset, args.second_embedding_model)
    print(
        f"{dataset.name} {args.split}: {len(dataset.conversations)} conversations "
        f"({', '.join(sorted(dataset.conversations))}), {len(questions)} answerable questions with evidence; "
        f"workspace {time.perf_counter() - started:.1f} s; encoder {ws.embedder.backend.value}"
    )

    def each(config: Any) -> dict[int, Any]:  # a config scored at every budget, ranked as for it
        return {b: config.with_budget(TokenBudget(b)) for b in BUDGETS}

    hybrid = load_config("hybrid")[0]
    systems: dict[str, tuple[Any, dict[int, Any]]] = {
        "raw-turn BM25": (hybrid.with_changes({"semantic_top_k": 0})[0], {}),
        "raw-turn dense": (hybrid.with_changes({"keyword_top_k": 0})[0], {}),
        "hybrid": (hybrid, {}),
        "default": (load_config("default")[0], {}),
    }
    for item in args.config:
        label, _, source = item.partition("=")
        systems[label] = (load_config(source)[0], {})
    for item in args.evolved:
        budget, _, run_dir = item.partition("=")
        systems[f"evolved@{budget}"] = (load_config(str(Path(run_dir) / "best_config.toml"))[0], {})
    systems = {label: (config, at or each(config)) for label, (config, at) in systems.items()}
    if args.frontier_run:
        systems["frontier run"] = frontier_system(args.frontier_run, each)

    from evolvemem.answering.stores import stores_needed

    turns_of: dict[str, tuple[str, ...]] = {}
    for _, at in systems.values():
        config = at[BUDGETS[0]]
        ws.ensure_stores(stores_needed(config))
        for conv_id in dataset.conversations:
            for store in {"fact", *stores_needed(config)}:
                turns_of.update({m.memory_id: m.source_turn_ids for m in ws.store_memories(conv_id, store)})

    records: dict[tuple[str, int], list[Any]] = {}
    rows = []
    for label, (config, at) in systems.items():
        prep = time.perf_counter()
        ws.prepare(questions, config)
        prep_ms = (time.perf_counter() - prep) * 1000 / len(questions)
        timed = time.perf_counter()
        deep = evaluate_contexts(ws, config.with_budget(TokenBudget(DEEP)), questions).records
        deep_ms = (time.perf_counter() - timed) * 1000 / len(questions)
        q_by_id = {q.question_id: q for q in questions}
        at_k = {
            k: np.mean(
                [
                    evidence_recall(
                        q_by_id[r.question_id].evidence,
                        [turns_of[i] for i in [*(r.context_ids or ()), *(r.cut_ids or ())][:k]],
                    )
                    or 0.0
                    for r in deep
                ]
            )
            for k in RANKS
        }
        for budget, scored in at.items():
            ws.prepare(questions, scored)
            records[(label, budget)] = evaluate_contexts(ws, scored, questions).records
        rows.append((label, at_k, prep_ms, deep_ms))

    plain = {b: plain_hybrid(ws, questions, b) for b in BUDGETS}
    for budget in BUDGETS:
        records[("plain hybrid (independent)", budget)] = [
            replace(r, evidence_recall=plain[budget][r.question_id], context_tokens=None)
            for r in records[("hybrid", budget)]
        ]
    rows.append(("plain hybrid (independent)", {k: float("nan") for k in RANKS}, float("nan"), float("nan")))

    categories = sorted({q.category for q in questions})
    names = dataset.category_names
    print(
        f"\n{'system':28s} "
        + " ".join(f"R@{b:<5d}" for b in BUDGETS)
        + "  "
        + " ".join(f"R@{k:<3d}it" for k in RANKS)
        + "  "
        + " ".join(f"{names.get(c, c)[:10]:>10s}" for c in categories)
        + "   tokens@1500  prep ms/q  retrieval ms/q"
    )
    for label, at_k, prep_ms, deep_ms in rows:
        recall = {b: np.mean([r.evidence_recall for r in records[(label, b)]]) for b in BUDGETS}
        mid = records[(label, 1500)]
        by_cat = [np.mean([r.evidence_recall for r in mid if r.category == c]) for c in categories]
        tokens = [r.context_tokens for r in mid if r.context_tokens is not None]
        print(
            f"{label:28s} "
            + " ".join(f"{recall[b]:.3f}  " for b in BUDGETS)
            + "  "
            + " ".join(f"{at_k[k]:.3f}   " for k in RANKS)
            + "  "
            + " ".join(f"{v:10.3f}" for v in by_cat)
            + f"   {np.mean(tokens) if tokens else float('nan'):11.0f}  {prep_ms:9.2f}  {deep_ms:14.2f}"
        )

    for reference in ("hybrid", "default"):
        print(f"\npaired, system − {reference} (answerable, 95% interval by conversation, p of a gain):")
        for label, *_ in rows:
            if label == reference:
                continue
            cells = []
            for budget in BUDGETS:
                stat = compare(
                    records[(label, budget)],
                    records[(reference, budget)],
                    1,
                    0,
                    "evidence",
                    metric="evidence_recall",
                ).groups["main"]
                cells.append(
                    f"@{budget}: {stat.diff:+.3f} [{stat.ci_low:+.3f}, {stat.ci_high:+.3f}] p {stat.p_gain:.3f}"
                )
            print(f"  {label:28s} " + "   ".join(cells))
        print(f"  by category at 1500 (system − {reference}):")
        for label, *_ in rows:
            if label == reference:
                continue
            mine, theirs = records[(label, 1500)], {r.question_id: r for r in records[(reference, 1500)]}
            diffs = [
                np.mean([r.evidence_recall - theirs[r.question_id].evidence_recall for r in mine if r.category == c])
                for c in categories
            ]
            print(
                f"    {label:26s} " + " ".join(f"{names.get(c, c)[:10]}: {d:+.3f}" for c, d in zip(categories, diffs))
            )
    if args.frontier_run:
        frontier_beside_runs(records)


def frontier_system(run_dir: Path, each: Any) -> tuple[Any, dict[int, Any]]:
    """A `--budgets` run as one system: at each budget its point there (its exported file, which
    carries the budget and the ranking depth), else its primary config at that budget."""
    from evolvemem.loop.frontier import point_config_file, run_budgets
    from evolvemem.space.config import load_config

    primary = load_config(str(run_dir / "best_config.toml"))[0]
    have = set(run_budgets(run_dir))
    at = each(primary)
    at.update({b: load_config(str(point_config_file(run_dir, b)))[0] for b in BUDGETS if b in have})
    missing = [b for b in BUDGETS if b not in have]
    print(f"frontier run {run_dir}: budgets {sorted(have)}" + (f"; at {missing} its primary config" if missing else ""))
    return primary, at


def frontier_beside_runs(records: dict[tuple[str, int], list[Any]]) -> None:
    """Each budget's point of the frontier run beside the separate run evolved at that budget."""
    import numpy as np

    from evolvemem.loop.paired import compare

    print("\nfrontier run − separate run at each budget (answerable, 95% interval by conversation):")
    for budget in BUDGETS:
        single = records.get((f"evolved@{budget}", budget))
        point = records[("frontier run", budget)]
        mean = np.mean([r.evidence_recall for r in point])
        if single is None:
            print(f"  @{budget}: frontier {mean:.3f} (no --evolved {budget}=RUN given)")
            continue
        stat = compare(point, single, 1, 0, "evidence", metric="evidence_recall").groups["main"]
        print(
            f"  @{budget}: frontier {mean:.3f}  separate {np.mean([r.evidence_recall for r in single]):.3f}  "
            f"diff {stat.diff:+.3f} [{stat.ci_low:+.3f}, {stat.ci_high:+.3f}]"
        )


if __name__ == "__main__":
    main()
