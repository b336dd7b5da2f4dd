"""Benchmarks: every loader returns a `Dataset` of conversations and questions.

`load_benchmark(name, data)` is the one entry point (names in `BENCHMARKS`); `split_dataset`
picks the dev or test conversations. Formats: `locomo`, `custom`, `membench`, `longmemeval`,
and the generated `synth` (see each module's docstring).
"""
from evolvemem.data.loader import BENCHMARKS, load_benchmark
from evolvemem.data.models import Conversation, Dataset, Question, Session, Turn
from evolvemem.data.split import SPLITS, split_dataset, split_ids

__all__ = [
    "BENCHMARKS",
    "SPLITS",
    "Conversation",
    "Dataset",
    "Question",
    "Session",
    "Turn",
    "load_benchmark",
    "split_dataset",
    "split_ids",
]
