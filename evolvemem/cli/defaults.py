"""Defaults of a run, read off `RunSpec` and `GuardSettings`, and the benchmark names, so the
CLI never restates them."""

from __future__ import annotations

from evolvemem.benchmarks import benchmark_help
from evolvemem.loop.spec import GuardSettings, RunSpec

RUN_DEFAULTS = RunSpec(benchmark="locomo", data=None, diagnoser="rubric")
GUARD_DEFAULTS = GuardSettings()
BENCHMARK_HELP = benchmark_help()
