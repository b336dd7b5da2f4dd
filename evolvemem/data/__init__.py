"""Benchmarks' data: every loader returns a `Dataset` of conversations and questions.

The benchmark table (evolvemem/benchmarks.py: `load_benchmark(name, data)`) names the loaders;
`split_dataset` picks the dev or test conversations. Formats: `locomo`, `custom`, `membench`,
`longmemeval`, and the generated `synth` (see each module's docstring).
"""

from evolvemem.data.models import Conversation, Dataset, Question, Session, Turn
from evolvemem.data.split import SPLITS, split_dataset, split_ids

__all__ = [
    "SPLITS",
    "Conversation",
    "Dataset",
    "Question",
    "Session",
    "Turn",
    "split_dataset",
    "split_ids",
]
