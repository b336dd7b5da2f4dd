"""What the mech_*.py benchmarks share: the LoCoMo dev file, an offline workspace over it, config
variants run through `evaluate`, and the printed comparison against the `default` preset.

Each script keeps its own mechanism's statistics; this module prints the common lines: one
`== <variant>: all F1 …  main F1 …  evidence recall …  | … evaluation … ms/question` line per
variant, then a per-category table (F1 and evidence recall of every variant with the Δ against
`default`) and one overall Δ line per variant. Scripts put the repo root on sys.path, then
import it as `benchmarks._mechanisms`.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10_dev8.json"
REFERENCE = "default"
CELL = 35  # "F1 0.1234 Δ+0.123 ER 0.1234 Δ+0.123"


@dataclass
class VariantRun:
    """One config evaluated over the questions; times are per question, in milliseconds."""

    summary: dict
    records: list[dict]
    evaluation_ms: float
    retrieval_ms: float | None = None


def argument_parser(doc: str, *, top_k: bool = False) -> argparse.ArgumentParser:
    """A parser described by the script docstring's first line, with `--data` (and `--top-k`,
    the mechanism view's size, when asked)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    if top_k:
        parser.add_argument("--top-k", type=int, default=10)
    return parser


def load_locomo_file(path: Path) -> Any:
    """The LoCoMo dataset at `path`; exits with a one-line message when the file is missing."""
    from evolvemem.benchmarks import load_benchmark

    if not path.is_file():
        raise SystemExit(f"no LoCoMo file at {path}")
    return load_benchmark("locomo", path)


def offline_workspace(dataset: Any, second_embedding_model: str | None = None) -> Any:
    """A built Workspace with the offline (rule-based) roles: no LLM is called (with
    `second_embedding_model`, configs may use the second dense view)."""
    from evolvemem.session import LocalModels, ModelSettings, QuietReporter, open_workspace

    local_models = LocalModels(second_embedding=second_embedding_model)
    return open_workspace(QuietReporter(), dataset, ModelSettings(), cache_enabled=True, local_models=local_models)


def retrieval_seconds(ws: Any, questions: list, config: Any, repeats: int = 3) -> float:
    """Retrieval alone over `questions` (fact store), best of `repeats` passes, in seconds."""
    effective = {q.question_type: config.for_type(q.question_type) for q in questions}
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for q in questions:
            ws.retriever(q.conversation_id).retrieve(q, effective[q.question_type])
        best = min(best, time.perf_counter() - started)
    return best


def with_changes(base: Any, variants: dict[str, dict]) -> dict[str, Any]:
    """One config per variant name: `base` with that variant's field changes (clamped silently)."""
    return {name: base.with_changes(changes)[0] for name, changes in variants.items()}


def fmt(value: float | None) -> str:
    return "  -   " if value is None else f"{value:.4f}"


def run_variant(ws: Any, questions: list, config: Any, *, time_retrieval: bool = True) -> VariantRun:
    """Prepare, optionally time retrieval alone (after a warm-up pass over 50 questions that
    fills lazy caches), then evaluate with the workspace's roles."""
    from evolvemem.session import evaluate

    ws.prepare(questions, config)
    retrieval_ms = None
    if time_retrieval:
        retrieval_seconds(ws, questions[:50], config, repeats=1)
        retrieval_ms = retrieval_seconds(ws, questions, config) / len(questions) * 1000
    outcome = evaluate(ws, config, questions)
    records = [r.as_row() for r in outcome.records]  # the tables below read the `evolve eval --json` spelling
    return VariantRun(outcome.summary.as_json(), records, outcome.wall_seconds / len(questions) * 1000, retrieval_ms)


def print_variant(name: str, run: VariantRun, *extras: str) -> None:
    """The `== name: all F1 …` line; `extras` (e.g. "context 123 words") go before the times."""
    s = run.summary
    parts = list(extras)
    if run.retrieval_ms is not None:
        parts.append(f"retrieval {run.retrieval_ms:.2f} ms/question")
    parts.append(f"evaluation {run.evaluation_ms:.2f} ms/question")
    print(
        f"\n== {name}: all F1 {fmt(s['all'])}  main F1 {fmt(s['main'])}  "
        f"evidence recall {fmt(s['evidence_recall'])}  | " + " | ".join(parts)
    )


def run_variants(
    ws: Any, questions: list, configs: dict[str, Any], *, time_retrieval: bool = True
) -> dict[str, VariantRun]:
    """`run_variant` and `print_variant` for each named config, in order."""
    runs = {}
    for name, config in configs.items():
        runs[name] = run_variant(ws, questions, config, time_retrieval=time_retrieval)
        print_variant(name, runs[name])
    return runs


def _change(value: float | None, reference: float | None, digits: int) -> str:
    return "-" if value is None or reference is None else f"{value - reference:+.{digits}f}"


def print_comparison(runs: dict[str, VariantRun]) -> None:
    """Per-category (then main / all) F1 and evidence recall of every variant with its Δ against
    the `default` run, then one overall Δ line per other variant (with the retrieval time's
    change when it was measured)."""
    reference = runs[REFERENCE].summary
    rows = [(f"{label} {g.get('name', '')}", "by_category", label) for label, g in reference["by_category"].items()]
    rows += [(group, "groups", group) for group in ("main", "all")]
    print(f"\n{'category':16s} {'n':>4s}   " + "  ".join(f"{name:>{CELL}s}" for name in runs))
    for label, table, key in rows:
        ref = reference[table][key]
        cells = []
        for name, run in runs.items():
            g = run.summary[table][key]
            f1, er = f"F1 {fmt(g['f1'])}", f"ER {fmt(g['evidence_recall'])}"
            if name != REFERENCE:
                f1 += f" Δ{_change(g['f1'], ref['f1'], 3)}"
                er += f" Δ{_change(g['evidence_recall'], ref['evidence_recall'], 3)}"
            cells.append(f"{f1} {er}".rjust(CELL))
        print(f"{label[:16]:16s} {ref['n']:4d}   " + "  ".join(cells))
    base = runs[REFERENCE]
    for name, run in runs.items():
        if name == REFERENCE:
            continue
        s = run.summary
        line = (
            f"Δ {name}: all F1 {_change(s['all'], reference['all'], 4)}, "
            f"main F1 {_change(s['main'], reference['main'], 4)}, "
            f"evidence recall {_change(s['evidence_recall'], reference['evidence_recall'], 4)}"
        )
        if run.retrieval_ms is not None and base.retrieval_ms:
            line += (
                f"; retrieval {run.retrieval_ms - base.retrieval_ms:+.3f} ms/question "
                f"(×{run.retrieval_ms / base.retrieval_ms:.2f})"
            )
        print(line)
