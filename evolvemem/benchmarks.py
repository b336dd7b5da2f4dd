"""The benchmark table: one row per benchmark — its loader, its scorer, its options.

Adding a benchmark is one module (a loader in `data/`, and a scorer unless the generic one
fits) plus one row here; `load_benchmark`, `score_prediction` and the CLI's help read the
table, and nothing else compares benchmark names."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from evolvemem.data.custom import load_custom
from evolvemem.data.loader import require_path
from evolvemem.data.locomo import load_locomo, resolve_locomo_path
from evolvemem.data.longmemeval import load_longmemeval
from evolvemem.data.membench import load_membench
from evolvemem.data.models import Dataset, Question
from evolvemem.data.synth import generate_synth
from evolvemem.errors import ConfigError, DataError
from evolvemem.scoring import score_generic
from evolvemem.scoring.locomo import score_locomo
from evolvemem.named_table import named_table

Loader = Callable[[Path | None, dict[str, Any]], Dataset]  # (data file or None, options)
Scorer = Callable[[Question, str, str], dict[str, float]]  # (question, prediction, protocol)


@dataclass(frozen=True)
class Benchmark:
    name: str
    description: str
    load: Loader
    score: Scorer = score_generic
    options: tuple[str, ...] = ()  # keyword options `load_benchmark(..., **opts)` accepts
    reads_file: bool = True  # False: generated, no --data
    file_optional: bool = False  # True: found on its own when --data is not given


def _file(name: str, load: Callable[[Path], Dataset]) -> Loader:
    return lambda data, opts: load(require_path(name, data))


BENCHMARK_TABLE: dict[str, Benchmark] = named_table(
    Benchmark(
        "locomo",
        "LoCoMo-10 (official scoring; downloaded on first use or --data locomo10.json)",
        lambda data, opts: load_locomo(resolve_locomo_path(None if data is None else str(data))),
        score=score_locomo,
        file_optional=True,
    ),
    Benchmark(
        "synth",
        "generated conversations with known answers (no file)",
        lambda data, opts: generate_synth(**opts),
        options=("seed", "n_conversations", "n_sessions", "chitchat_per_session"),
        reads_file=False,
    ),
    Benchmark(
        "custom",
        "your own conversations and questions (JSON, see docs/guides/custom-data.md)",
        _file("custom", load_custom),
    ),
    Benchmark("membench", "MemBench (multiple choice; a file or a folder)", _file("membench", load_membench)),
    Benchmark("longmemeval", "LongMemEval (one JSON file)", _file("longmemeval", load_longmemeval)),
)


def benchmark(name: str) -> Benchmark:
    key = name.strip().lower() if isinstance(name, str) else ""
    if key not in BENCHMARK_TABLE:
        raise DataError(f"unknown benchmark {name!r} (known: {', '.join(BENCHMARK_TABLE)})")
    return BENCHMARK_TABLE[key]


def benchmark_help() -> str:
    """'locomo, synth, custom, membench or longmemeval' for option help texts."""
    names = list(BENCHMARK_TABLE)
    return f"{', '.join(names[:-1])} or {names[-1]}"


def load_benchmark(name: str, data: str | Path | None = None, **opts: Any) -> Dataset:
    """Load a benchmark by name (see the table for which read a file and which options exist)."""
    entry = benchmark(name)
    unknown = sorted(set(opts) - set(entry.options))
    if unknown:
        allowed = ", ".join(entry.options) or "none"
        raise ConfigError(f"benchmark {entry.name!r} has no option {', '.join(unknown)} (options: {allowed})")
    if not entry.reads_file and data is not None:
        raise DataError(f"benchmark {entry.name!r} is generated, it reads no file: drop --data")
    path = None if data is None or str(data).strip() == "" else Path(data).expanduser()
    dataset = entry.load(path, opts)
    # an empty file would "run" on nothing: a table of dashes, a run directory and a config chosen by chance
    if not dataset.conversations:
        raise DataError(f"{dataset.source or entry.name}: no conversations: there is nothing to remember or ask about")
    if not dataset.questions:
        raise DataError(
            f"{dataset.source or entry.name}: no questions: nothing to score a config on "
            "(every conversation needs questions about it)"
        )
    return dataset


def score_prediction(
    question: Question, prediction: str, protocol: str = "official", *, benchmark_name: str = "locomo"
) -> dict[str, float]:
    """Scores of one prediction under its benchmark's scorer (a dataset built in code, not named
    in the table, gets the generic one): {"f1", "bleu1", "exact_match"}, plus "mc_accuracy" when
    the question has choices. Bad question data raises a one-line DataError naming the question;
    an unknown protocol raises ConfigError."""
    entry = BENCHMARK_TABLE.get(benchmark_name)
    return (entry.score if entry is not None else score_generic)(question, prediction, protocol)
